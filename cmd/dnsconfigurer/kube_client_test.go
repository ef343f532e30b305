package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

// TestKubeClientUserAgent: the API server sees the component and the
// version in the User-Agent.
func TestKubeClientUserAgent(t *testing.T) {
	var (
		mu     sync.Mutex
		agents []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"major":"1","minor":"33","gitVersion":"v1.33.0"}`)
	}))
	defer srv.Close()
	t.Setenv("KUBECONFIG", writeKubeconfig(t, t.TempDir(), "kubeconfig", srv.URL))
	for _, component := range []string{"serve", "shim"} {
		client, err := kubeClient("", component)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := agents[len(agents)-1]
		mu.Unlock()
		if want := version.Get().UserAgent(component); got != want || !strings.HasPrefix(got, "dnsconfigurer-"+component+"/") {
			t.Errorf("%s: User-Agent %q, want %q", component, got, want)
		}
	}
}

// TestKubeClientProtobuf: the typed client asks for protobuf first, as
// CoreDNS and kubelet do, and still reads a JSON reply; the config handed
// to the clients of other kinds stays JSON.
func TestKubeClientProtobuf(t *testing.T) {
	accepts := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case accepts <- r.Header.Get("Accept"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"prod"}}`)
	}))
	defer srv.Close()
	t.Setenv("KUBECONFIG", writeKubeconfig(t, t.TempDir(), "kubeconfig", srv.URL))
	rc, client, err := kubeREST("", "serve")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := client.CoreV1().Namespaces().Get(context.Background(), "prod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Name != "prod" {
		t.Errorf("namespace %q, want prod", ns.Name)
	}
	if got := <-accepts; !strings.HasPrefix(got, "application/vnd.kubernetes.protobuf,") {
		t.Errorf("Accept %q, want protobuf first", got)
	}
	if rc.ContentType != "" || rc.AcceptContentTypes != "" {
		t.Errorf("the shared config has ContentType %q, Accept %q; want the defaults (JSON)", rc.ContentType, rc.AcceptContentTypes)
	}
}
