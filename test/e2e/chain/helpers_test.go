package chain

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a dnsconfigurer process running in the harness's namespace.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{}
}

// exitedEarly reports whether the process has exited.
func (p *proc) exitedEarly() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// startProc starts the built binary with args inside h's network namespace
// and stops it (SIGTERM, SIGKILL after 10s) on cleanup, logging its output
// when the test failed.
func startProc(t *testing.T, h *containerd.Harness, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, log: &lockedBuffer{}, exited: make(chan struct{})}
	// nsenter execs the binary (it does not fork for a network namespace
	// alone), so the process and its death signal are the binary's.
	p.cmd = h.Command(context.Background(), buildbin.Dnsconfigurer(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The death signal follows the thread that forked, not the process,
	// and h.Do ends the threads it switches into the namespace: a fork on
	// a pooled thread that h.Do later takes would kill the child then. So
	// fork from a thread locked to a goroutine that lives until cleanup.
	started, release := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		started <- p.cmd.Start()
		<-release
	}()
	if err := <-started; err != nil {
		close(release)
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		close(release)
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.log.String())
		}
	})
	return p
}

// nsHTTP is an HTTP client whose connections are opened inside h's network
// namespace, for the servers' /metrics and /readyz on its loopback.
func nsHTTP(h *containerd.Harness) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := h.Do(func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// scrape returns the samples of a Prometheus text exposition, keyed by
// the series as printed ("name{label=\"v\",...}").
func scrape(c *http.Client, addr string) (map[string]float64, error) {
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// waitReady polls GET /readyz on addr (inside the namespace) until it
// answers 200, the process exits or the deadline passes.
func waitReady(t *testing.T, c *http.Client, p *proc, addr string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if p.exitedEarly() {
			t.Fatalf("%s exited: %v\n%s", p.name, p.cmd.ProcessState, p.log.String())
		}
		resp, err := c.Get("http://" + addr + "/readyz")
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		last = fmt.Sprintf("%s: %s", resp.Status, body)
	}
	t.Fatalf("%s not ready on %s: %s\n%s", p.name, addr, last, p.log.String())
}

// counter counts the queries a stub receives, by type.
type counter struct {
	mu sync.Mutex
	n  map[uint16]int
	h  dns.Handler
}

func newCounter(h dns.Handler) *counter { return &counter{n: map[uint16]int{}, h: h} }

func (c *counter) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	c.mu.Lock()
	if len(r.Question) == 1 {
		c.n[r.Question[0].Qtype]++
	}
	c.mu.Unlock()
	c.h.ServeDNS(w, r)
}

// snapshot returns a copy of the counts so far.
func (c *counter) snapshot() map[uint16]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := make(map[uint16]int, len(c.n))
	for k, v := range c.n {
		n[k] = v
	}
	return n
}

// upstreamStub answers the names in records (fully qualified, lower case)
// with their addresses, A or AAAA by family, with TTL 1 so that nothing on
// the path keeps an answer across the resolv.conf rewrite; NXDOMAIN for
// any other name.
func upstreamStub(records map[string][]string) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) != 1 {
			m.Rcode = dns.RcodeFormatError
			_ = w.WriteMsg(m)
			return
		}
		q := r.Question[0]
		addrs, ok := records[strings.ToLower(q.Name)]
		if !ok {
			m.Rcode = dns.RcodeNameError
			soa, _ := dns.NewRR(". 1 IN SOA a.root. b.root. 1 1 1 1 1")
			m.Ns = []dns.RR{soa}
			_ = w.WriteMsg(m)
			return
		}
		for _, a := range addrs {
			ip := net.ParseIP(a)
			hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 1}
			switch {
			case ip.To4() != nil && q.Qtype == dns.TypeA:
				hdr.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip})
			case ip.To4() == nil && q.Qtype == dns.TypeAAAA:
				hdr.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip})
			}
		}
		_ = w.WriteMsg(m)
	})
}

// serveStub serves h on addr (UDP and TCP) on sockets bound inside the
// harness's namespace. A server only answers on the socket it bound, so
// nothing it sends leaves the namespace.
func serveStub(t *testing.T, hs *containerd.Harness, addr string, h dns.Handler) {
	t.Helper()
	srv := &dnsserver.Server{Listen: []string{addr}, Handler: h}
	if err := hs.Do(func() error { return srv.Start(context.Background()) }); err != nil {
		t.Fatalf("serve stub on %s: %v", addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
}

// rendered is `dnsconfigurer render -o json`.
type rendered struct {
	Nameservers []string `json:"nameservers"`
	Searches    []string `json:"searches"`
	Options     []string `json:"options"`
	Hostname    string   `json:"hostname"`
}

func (r rendered) dns() *runtimeapi.DNSConfig {
	return &runtimeapi.DNSConfig{Servers: r.Nameservers, Searches: r.Searches, Options: r.Options}
}

// render runs `dnsconfigurer render` on pod with the node flags given; it
// reads the resolver file each time, as kubelet does for every pod.
func render(t *testing.T, pod *corev1.Pod, nodeFlags ...string) rendered {
	t.Helper()
	p := pod.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	manifest, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildbin.Dnsconfigurer(t), append([]string{"render", "-f", "-", "-o", "json"}, nodeFlags...)...)
	cmd.Stdin = bytes.NewReader(manifest)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render %s: %v\n%s", pod.Name, err, stderr.String())
	}
	var r rendered
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("render %s: %v: %s", pod.Name, err, out)
	}
	return r
}

// kubeletView is the pod as kubelet sees it: kubelet does not know the
// autopath annotation.
func kubeletView(pod *corev1.Pod) *corev1.Pod {
	k := pod.DeepCopy()
	delete(k.Annotations, policy.AnnotationDNSPolicy)
	return k
}
