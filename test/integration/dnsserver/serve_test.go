package dnsserver_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
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

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// TestServeCommand builds dnsconfigurer and runs `dnsconfigurer serve
// --kubeconfig` with the token of deploy/dnsserver's ServiceAccount, so the
// command's own wiring (flags, client, feed, listeners, /readyz, /metrics)
// is what answers. Through a kube-apiserver outage it keeps answering and
// /readyz stays 200; afterwards it catches up. SIGTERM ends it with status 0.
func TestServeCommand(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build dnsconfigurer: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "dnsconfigurer")
	build := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, "github.com/dnsconfigurer/dnsconfigurer/cmd/dnsconfigurer")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	o := loadRBAC(t)
	applyRBAC(t, cp.Client(), o)
	ctx := t.Context()
	cfg, err := cp.ServiceAccountConfig(ctx, o.sa.Namespace, o.sa.Name)
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

	stderr := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0",
		"--metrics-listen", "127.0.0.1:0", "--pods", "verified", "--ttl", "7")
	cmd.Stderr = stderr
	cmd.Stdout = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("dnsconfigurer serve output:\n%s", stderr.String())
		}
	})
	dnsAddr := stderr.waitMatch(t, exited, regexp.MustCompile(`msg="serving DNS".* listen=\[(127\.0\.0\.1:\d+)\]`))
	metricsAddr := stderr.waitMatch(t, exited, regexp.MustCompile(`msg="serving metrics".* listen=(127\.0\.0\.1:\d+)`))
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
	deadline := time.Now().Add(followBound)
	for {
		if code, _ := get("/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 after %v", followBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "\ndnsconfigurer_dnsserver_synced 1\n") {
		t.Errorf("/metrics: no dnsconfigurer_dnsserver_synced 1")
	}

	name := func(s string) string { return s + "." + ns + ".svc." + zone + "." }
	web, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, dnsAddr, name("web"), dns.TypeA, "NOERROR A "+web.Spec.ClusterIP)
	mustAnswer(t, dnsAddr, "_http._tcp."+name("web"), dns.TypeSRV, "NOERROR SRV 0 100 80 "+name("web"))
	if ttl := answerTTL(t, dnsAddr, name("web")); ttl != 7 {
		t.Errorf("TTL %d, want --ttl 7", ttl)
	}
	pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
	after, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "after"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods(ns).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswerWithin(t, catchUpBound, dnsAddr, name("after"), dns.TypeA, "NOERROR A "+after.Spec.ClusterIP)
	waitAnswerWithin(t, catchUpBound, dnsAddr, podName, dns.TypeA, "NXDOMAIN")
	t.Logf("caught up %v after the API server was back", time.Since(up).Round(time.Millisecond))

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("dnsconfigurer serve after SIGTERM: %v", waitErr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("dnsconfigurer serve still running 15s after SIGTERM")
	}
	if strings.Contains(stderr.String(), "record feed stopped") {
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

// syncBuffer is a process's output, written and read concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitMatch waits for re to match the output and returns its first group.
func (b *syncBuffer) waitMatch(t *testing.T, exited <-chan struct{}, re *regexp.Regexp) string {
	t.Helper()
	b.waitCount(t, exited, re, 1, followBound)
	return re.FindStringSubmatch(b.String())[1]
}

// waitCount waits until re matches the output n times, failing if the
// process exits first.
func (b *syncBuffer) waitCount(t *testing.T, exited <-chan struct{}, re *regexp.Regexp, n int, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for len(re.FindAllStringIndex(b.String(), -1)) < n {
		select {
		case <-exited:
			t.Fatalf("dnsconfigurer serve exited before %d × %q", n, re)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d × %q in the output after %v", n, re, bound)
		}
	}
}

// proxy passes TCP connections on to the API server and counts those it
// could not pass on.
type proxy struct {
	addr, target string
	ln           net.Listener
	wg           sync.WaitGroup

	mu       sync.Mutex
	failures int
	conns    map[net.Conn]struct{}
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.conns = nil
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pass(c)
		}()
	}
}

// pass copies between c and a new connection to the target until either
// side closes.
func (p *proxy) pass(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		p.mu.Lock()
		p.failures++
		p.mu.Unlock()
		return
	}
	if !p.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// track remembers c and up for the cleanup, or closes them if the proxy
// is closed.
func (p *proxy) track(c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		up.Close()
		return false
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	return true
}

func (p *proxy) refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failures
}

// waitRefused waits until n connections could not be passed on.
func (p *proxy) waitRefused(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(catchUpBound)
	for p.refused() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections refused after %v, want %d", p.refused(), catchUpBound, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
