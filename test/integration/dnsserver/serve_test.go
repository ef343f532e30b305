package dnsserver_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// TestServeCommand builds dnsconfigurer and runs `dnsconfigurer serve
// --kubeconfig` with the token of deploy/dnsserver's ServiceAccount, so the
// command's own wiring (flags, client, feed, listeners, /readyz, /metrics)
// is what answers. Through a kube-apiserver outage it keeps answering and
// /readyz stays 200; afterwards it catches up. SIGTERM ends it with status 0.
func TestServeCommand(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	buildbin.Dnsconfigurer(t) // built, or the test skipped, first
	dir := t.TempDir()

	o := apiserver.LoadRBAC(t, rbacManifest)
	o.Apply(t, cp.Client())
	ctx := t.Context()
	cfg, err := cp.ServiceAccountConfig(ctx, o.Account.Namespace, o.Account.Name)
	if err != nil {
		t.Fatal(err)
	}
	// The command reaches the API server through a proxy of the test's,
	// which counts the connections it could not pass on during the outage.
	proxy := startProxy(t, strings.TrimPrefix(cfg.Host, "https://"))
	cfg.Host = "https://" + proxy.addr
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := apiserver.WriteKubeconfig(kubeconfig, cfg); err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	client := newClient(t, cp.Config())

	p := buildbin.Start(t, "serve", "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0",
		"--metrics-listen", "127.0.0.1:0", "--pods", "verified", "--ttl", "7")
	dnsAddr := p.WaitLog(t, regexp.MustCompile(`msg="serving DNS".* listen=\[(127\.0\.0\.1:\d+)\]`))[1]
	metricsAddr := p.WaitLog(t, regexp.MustCompile(`msg="serving metrics".* listen=(127\.0\.0\.1:\d+)`))[1]
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + metricsAddr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testkit.WaitFor(t, followBound, func() error { return testkit.GetOK(nil, "http://"+metricsAddr+"/readyz") })
	if _, body := get("/metrics"); !strings.Contains(body, "\ndnsconfigurer_dnsserver_synced 1\n") {
		t.Errorf("/metrics: no dnsconfigurer_dnsserver_synced 1")
	}

	name := func(s string) string { return s + "." + ns + ".svc." + zone + "." }
	web := createService(t, client, ns, "web", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}})
	waitAnswer(t, dnsAddr, name("web"), dns.TypeA, "NOERROR A "+web.Spec.ClusterIP)
	mustAnswer(t, dnsAddr, "_http._tcp."+name("web"), dns.TypeSRV, "NOERROR SRV 0 100 80 "+name("web"))
	if ttl := answerTTL(t, dnsAddr, name("web")); ttl != 7 {
		t.Errorf("TTL %d, want --ttl 7", ttl)
	}
	pod := createPod(t, client, ns, "app")
	setPodStatus(t, client, pod, corev1.PodRunning, "10.244.8.8")
	podName := "10-244-8-8." + ns + ".pod." + zone + "."
	waitAnswer(t, dnsAddr, podName, dns.TypeA, "NOERROR A 10.244.8.8")

	// The outage: answers and /readyz hold while client-go fails to reach
	// the API server: it retries, and the proxy refuses the connections.
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := cp.StartAPIServer(context.Background()); err != nil {
				t.Errorf("start kube-apiserver: %v", err)
			}
		}
	})
	first := proxy.refused() + 1
	for n := first; n < first+3; n++ {
		proxy.waitRefused(t, n)
		mustAnswer(t, dnsAddr, name("web"), dns.TypeA, "NOERROR A "+web.Spec.ClusterIP)
		mustAnswer(t, dnsAddr, podName, dns.TypeA, "NOERROR A 10.244.8.8")
		if code, body := get("/readyz"); code != http.StatusOK {
			t.Fatalf("/readyz %d while the API server is down: %s", code, body)
		}
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	up := time.Now()
	after := createService(t, client, ns, "after", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}})
	if err := client.CoreV1().Pods(ns).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswerWithin(t, catchUpBound, dnsAddr, name("after"), dns.TypeA, "NOERROR A "+after.Spec.ClusterIP)
	waitAnswerWithin(t, catchUpBound, dnsAddr, podName, dns.TypeA, "NXDOMAIN")
	t.Logf("caught up %v after the API server was back", time.Since(up).Round(time.Millisecond))

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(t, 15*time.Second); err != nil {
		t.Errorf("dnsconfigurer serve after SIGTERM: %v", err)
	}
	if strings.Contains(p.Output.String(), "record feed stopped") {
		t.Errorf("the feed stopped with an error")
	}
}

// answerTTL returns the TTL of the first answer record of name's A.
func answerTTL(t *testing.T, addr, name string) uint32 {
	t.Helper()
	r, err := dns.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
	if err != nil || len(r.Answer) == 0 {
		t.Fatalf("%s A: %v %v", name, r, err)
	}
	return r.Answer[0].Header().Ttl
}

// proxy passes TCP connections on to the API server and counts those it
// could not pass on.
type proxy struct {
	addr string

	mu       sync.Mutex
	failures int
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln := testkit.ListenTCP(t)
	p := &proxy{addr: ln.Addr().String()}
	testkit.Accept(t, ln, func(c net.Conn) {
		up, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			c.Close()
			p.mu.Lock()
			p.failures++
			p.mu.Unlock()
			return
		}
		testkit.Pipe(c, up)
	})
	return p
}

func (p *proxy) refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failures
}

// waitRefused waits until n connections could not be passed on.
func (p *proxy) waitRefused(t *testing.T, n int) {
	t.Helper()
	testkit.WaitFor(t, catchUpBound, func() error {
		if got := p.refused(); got < n {
			return fmt.Errorf("%d connections refused, want %d", got, n)
		}
		return nil
	})
}
