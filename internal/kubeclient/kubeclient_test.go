package kubeclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

func TestRestConfig(t *testing.T) {
	dir := t.TempDir()
	a := apiserver.TokenKubeconfig(t, dir, "a", "https://a.example:6443")
	b := apiserver.TokenKubeconfig(t, dir, "b", "https://b.example:6443")
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name     string
		path     string
		env      string
		wantHost string // "" with no wantErr: no API server
		wantErr  string
	}{
		{name: "flag", path: a, wantHost: "https://a.example:6443"},
		{name: "flag over $KUBECONFIG", path: a, env: b, wantHost: "https://a.example:6443"},
		{name: "$KUBECONFIG", env: b, wantHost: "https://b.example:6443"},
		{name: "$KUBECONFIG list", env: missing + string(os.PathListSeparator) + b, wantHost: "https://b.example:6443"},
		{name: "$KUBECONFIG without a config", env: missing, wantErr: fmt.Sprintf("$KUBECONFIG %q: ", missing)},
		{name: "missing flag file", path: missing, env: b, wantErr: fmt.Sprintf("kubeconfig %q: ", missing)},
		{name: "neither, outside a pod", wantHost: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			rc, err := restConfig(tc.path)
			if !testkit.WantErrPrefix(t, err, tc.wantErr) {
				return
			}
			host := "" // no API server
			if rc != nil {
				host = rc.Host
			}
			if host != tc.wantHost {
				t.Errorf("host %q, want %q", host, tc.wantHost)
			}
		})
	}
}

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
	t.Setenv("KUBECONFIG", apiserver.TokenKubeconfig(t, t.TempDir(), "kubeconfig", srv.URL))
	for _, component := range []string{"serve", "shim"} {
		client, err := New("", component)
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
	t.Setenv("KUBECONFIG", apiserver.TokenKubeconfig(t, t.TempDir(), "kubeconfig", srv.URL))
	rc, client, err := NewREST("", "serve")
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
