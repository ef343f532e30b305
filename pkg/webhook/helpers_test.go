package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// testServer is a Server running on 127.0.0.1 for one test.
type testServer struct {
	srv      *Server
	url      string
	ca       *testkit.CA
	certFile string
	keyFile  string
	reg      *prometheus.Registry
	logs     *testkit.Buffer
}

// issue makes the webhook's serving certificate, for 127.0.0.1, ::1,
// localhost and its Service name; it returns the PEM pair and the serial
// number.
func issue(t testing.TB, ca *testkit.CA) (certPEM, keyPEM []byte, serial int64) {
	t.Helper()
	return ca.Serving(t, "dnsconfigurer-webhook", "dnsconfigurer-webhook.dnsconfigurer.svc")
}

// testNode is the node every test pool assumes unless it says otherwise.
var testNode = testkit.Node()

var testHost = policy.Host{Nameservers: []string{"10.0.0.2"}, Searches: []string{"ec2.internal"}, Options: []string{"ndots:2"}}

func testReviewer(t testing.TB) *Reviewer {
	t.Helper()
	return &Reviewer{Default: testPool(t, "", nil, testNode, testHost)}
}

func testPool(t testing.TB, name string, sel map[string]string, node policy.Node, host policy.Host) Pool {
	t.Helper()
	eng, err := policy.New(node)
	if err != nil {
		t.Fatal(err)
	}
	return Pool{Name: name, NodeSelector: sel, Engine: eng, Host: host}
}

func startServer(t testing.TB, r *Reviewer, opts ...Option) *testServer {
	t.Helper()
	ca := testkit.NewCA(t)
	dir := t.TempDir()
	ts := &testServer{ca: ca, certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"),
		reg: prometheus.NewRegistry(), logs: &testkit.Buffer{}}
	certPEM, keyPEM, _ := issue(t, ca)
	testkit.WriteAtomic(t, ts.certFile, string(certPEM))
	testkit.WriteAtomic(t, ts.keyFile, string(keyPEM))
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(ts.logs, nil))), WithRegistry(ts.reg), WithReloadDebounce(10 * time.Millisecond)}, opts...)
	srv, err := New(r, ts.certFile, ts.keyFile, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.url = "https://" + ln.Addr().String()
	testkit.Go(t, "Serve", func(ctx context.Context) error { return srv.Serve(ctx, ln) })
	return ts
}

// client returns an HTTPS client that trusts the test CA, with its own
// connection pool.
func (ts *testServer) client(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ts.ca.Pool(), MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
		MaxIdleConns:      10,
		IdleConnTimeout:   30 * time.Second,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// review builds the AdmissionReview the API server sends for a pod CREATE.
func podReview(t testing.TB, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return reviewJSON(t, &admissionv1.AdmissionRequest{
		UID:       types.UID("5bdc1a0b-5ad0-4c83-a8a4-1f2b3c4d5e6f"),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Name:      pod.Name,
		Namespace: pod.Namespace,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	})
}

func reviewJSON(t testing.TB, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	data, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// post sends body to /validate and returns the status, the decoded review
// (when 200) and the raw body.
func post(t testing.TB, c *http.Client, url string, body []byte) (int, *admissionv1.AdmissionReview, string) {
	t.Helper()
	resp, err := c.Post(url+PathValidate, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, string(data)
	}
	var out admissionv1.AdmissionReview
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decode response %s: %v", data, err)
	}
	return resp.StatusCode, &out, string(data)
}

// pod is a minimal pod after the API server's defaulting.
func pod(name string, mod ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			DNSPolicy:  corev1.DNSClusterFirst,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}},
		},
	}
	for _, m := range mod {
		m(p)
	}
	return p
}

func manySearches(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("team-%02d.corp.example.com", i)
	}
	return s
}
