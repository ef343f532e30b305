package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
)

// The webhook's hardening target (issue 20): its peak RSS stays under the
// memory limit of deploy/webhook/deployment.yaml with 50 parallel large
// AdmissionReviews.
const (
	webhookMemoryLimit = 128 << 20
	webhookParallel    = 50
	webhookBodySize    = 6_000_000 // under the 6 MiB body cap
)

// raceBuild is whether this test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	return ok && slices.ContainsFunc(bi.Settings, func(s debug.BuildSetting) bool { return s.Key == "-race" && s.Value == "true" })
}

// webhookMemoryRun skips t unless it can measure the webhook process's
// memory (on Linux, without -short and -race), naming what it sends, and
// returns a serving certificate for the process.
func webhookMemoryRun(t *testing.T, sends string) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads the webhook's peak RSS from /proc/<pid>/status")
	}
	if testing.Short() || raceBuild() {
		t.Skip("sends " + sends + " and measures the process's memory: run without -short and -race")
	}
	return whServingCert(t, t.TempDir())
}

// TestWebhookProcess runs `dnsconfigurer webhook` with its default limits
// (the built binary: real HTTPS on loopback with a self-signed
// certificate), sends it 50 parallel 6 MB reviews, each on a
// connection of its own, over HTTP/1.1 and then over HTTP/2 (a process
// each, so that each peak is its own), and checks that every one is
// answered as the server's contract says (200 with the review's answer, or
// 429 with Retry-After once a body has waited half the read timeout for its
// share of the in-flight budget) and that the process's peak RSS (VmHWM)
// stays under the Deployment's 128 MiB memory limit.
func TestWebhookProcess(t *testing.T) {
	cert, key, pool := webhookMemoryRun(t, "600 MB")
	body := largeWebhookReview(t, webhookBodySize)
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) { webhookLargeBodies(t, proto, cert, key, pool, body) })
	}
}

// largeWebhookReview is an AdmissionReview for a Pod CREATE of a valid pod,
// padded with a container's environment variable to size bytes (as a real
// large pod is: annotations are bounded at 256 KiB).
func largeWebhookReview(t *testing.T, size int) []byte {
	t.Helper()
	review := func(pad int) []byte {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
			Spec: corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.0",
				Env: []corev1.EnvVar{{Name: "PADDING", Value: strings.Repeat("x", pad)}}}}}}
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "0b6a3f0e-large", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: admissionv1.Create,
				Name: "web-0", Namespace: "default", Object: k8sruntime.RawExtension{Raw: raw}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := review(size - len(review(1)) + 1) // review(0) has no "value" at all
	if len(b) != size {
		t.Fatalf("review of %d bytes, want %d", len(b), size)
	}
	return b
}

// startWebhookProcess starts the webhook, the binary as the image ships
// it, on a free loopback port and waits until /healthz answers.
func startWebhookProcess(t *testing.T, cert, key string, pool *x509.CertPool) (*child, string) {
	t.Helper()
	addr := testkit.FreeAddr(t, "127.0.0.1")
	// The progress limit is the read timeout here: this test measures
	// memory under 50 parallel bodies, and on a loaded 2-core machine one
	// client's TLS writer can stall past the 2 s default. TestSlowBodyCutOff
	// and test/integration/webhook/slowbody prove the default.
	conf := filepath.Join(t.TempDir(), "webhook.yaml")
	if err := os.WriteFile(conf, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: WebhookConfiguration\nbodyProgressTimeout: 10s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// GOMEMLIMIT as the Deployment sets it, from the memory limit.
	c := startBinary(t, buildbin.Dnsconfigurer(t), []string{"GOMEMLIMIT=" + strconv.Itoa(webhookMemoryLimit)}, "webhook", "--config", conf, "--listen", addr, "--tls-cert-file", cert, "--tls-private-key-file", key,
		"--cluster-dns", "10.96.0.10", "--log-format", "text")
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	c.waitUntil(t, 20*time.Second, func() error { return testkit.GetOK(client, "https://"+addr+"/healthz") })
	return c, addr
}

// webhookAnswer is what one review got.
type webhookAnswer struct {
	code       int
	retryAfter string
	allowed    bool
	uid        string
	err        error
}

func webhookLargeBodies(t *testing.T, proto, cert, key string, pool *x509.CertPool, body []byte) {
	c, addr := startWebhookProcess(t, cert, key, pool)
	base := procHWM(t, c.pid)
	answers := make([]webhookAnswer, webhookParallel)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range answers {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
		if proto == "HTTP/1.1" {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: time.Minute}
		wg.Go(func() { answers[i] = postReview(client, proto, "https://"+addr+"/validate", body) })
	}
	wg.Wait()
	took := time.Since(start)
	peak, file := procHWM(t, c.pid), procStatus(t, c.pid, "RssFile")

	var admitted, refused int
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("review %d: %v", i, a.err)
		case a.code == http.StatusOK && a.allowed && a.uid == "0b6a3f0e-large":
			admitted++
		case a.code == http.StatusTooManyRequests && a.retryAfter != "":
			refused++
		default:
			t.Errorf("review %d: %+v; want 200 admitting the pod, or 429 with Retry-After", i, a)
		}
	}
	t.Logf("%d parallel %d-byte reviews over %s answered in %v: %d admitted, %d refused (429, Retry-After); webhook RSS: baseline %.1f MiB, peak %.1f MiB (VmHWM; %.1f MiB of it the executable's mapped pages; limit %d MiB)",
		webhookParallel, len(body), proto, took.Round(time.Millisecond), admitted, refused, mib(base), mib(peak), mib(file), webhookMemoryLimit>>20)
	if admitted == 0 {
		t.Errorf("no review admitted: the in-flight budget lets two maximum-size bodies through at once")
	}
	if peak >= webhookMemoryLimit {
		t.Errorf("webhook peak RSS %.1f MiB, want under its %d MiB memory limit", mib(peak), webhookMemoryLimit>>20)
	}
	if took := c.terminate(t, 15*time.Second); c.waitErr != nil {
		t.Errorf("webhook exit %v after SIGTERM (%v)", c.waitErr, took.Round(time.Millisecond))
	}
}

// postReview sends body to url and reads the answer.
func postReview(client *http.Client, proto, url string, body []byte) webhookAnswer {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return webhookAnswer{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	a := webhookAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), err: err}
	if resp.Proto != proto && a.err == nil {
		a.err = &protoError{got: resp.Proto, want: proto}
	}
	if a.code == http.StatusOK && a.err == nil {
		var out admissionv1.AdmissionReview
		if a.err = json.Unmarshal(data, &out); a.err == nil && out.Response != nil {
			a.allowed, a.uid = out.Response.Allowed, string(out.Response.UID)
		}
	}
	return a
}

type protoError struct{ got, want string }

func (e *protoError) Error() string { return "answered over " + e.got + ", want " + e.want }
