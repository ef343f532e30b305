// Package forwardloop runs two real `dnsconfigurer serve` processes (the
// binary built by test/buildbin, on the example manifests: no API server)
// whose upstreams point at each other, the answer cache on as shipped, and
// asks them questions over UDP and TCP with miekg/dns (issue 26 item 3):
// a looping query is answered SERVFAIL at once, both count the loop on
// /metrics and log it at error level naming the upstream. A chain
// A -> B -> upstream that does not loop answers and counts nothing.
//
//	go test -count=1 -v ./test/integration/forwardloop/
package forwardloop

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// loopAnswerBound is how long a looping query may take: one lap on
// loopback, far under the 2s forwarding timeout it took on a557114.
const loopAnswerBound = 500 * time.Millisecond

// startWait bounds a process's start (the log lines with its addresses).
const startWait = 20 * time.Second

var (
	dnsRe     = regexp.MustCompile(`msg="serving DNS".*listen=\[([0-9.:]+)\]`)
	metricsRe = regexp.MustCompile(`msg="serving metrics".*listen=([0-9.:]+)`)
)

// lockedBuffer is a process's stderr, safe to read while it is written.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// server is one `dnsconfigurer serve` process.
type server struct {
	dns, metrics string
	stderr       *lockedBuffer
}

// startServe runs `dnsconfigurer serve` listening on listen and forwarding
// to upstream, and waits for its DNS and metrics addresses.
func startServe(t *testing.T, bin, listen, upstream string) *server {
	t.Helper()
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", listen, "--objects", "../../../examples/objects",
		"--upstream", upstream, "--metrics-listen", net.JoinHostPort(host, "0"), "--log-format", "text", "--lameduck", "0s")
	s := &server{stderr: &lockedBuffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("serve %s stderr:\n%s", listen, s.stderr.String())
		}
	})
	deadline := time.Now().Add(startWait)
	for {
		out := s.stderr.String()
		if m, mm := dnsRe.FindStringSubmatch(out), metricsRe.FindStringSubmatch(out); m != nil && mm != nil {
			s.dns, s.metrics = m[1], mm[1]
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve %s did not start within %v:\n%s", listen, startWait, out)
		}
		select {
		case <-exited:
			t.Fatalf("serve %s exited:\n%s", listen, s.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// metric is the sum of the series of name on the server's /metrics.
func (s *server) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", s.metrics, line, err)
		}
		sum += v
	}
	return sum
}

// freePort returns a port free for UDP and TCP on host, for a server not
// started yet (another process may take it in between: the test then
// fails to start that server, it does not pass wrongly).
func freePort(t *testing.T, host string) string {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err == nil {
			pc.Close()
			return addr
		}
	}
	t.Fatal("no port free for UDP and TCP")
	return ""
}

// ask sends name A over network and returns the reply and how long it took.
func ask(t *testing.T, network, addr, name string) (*dns.Msg, time.Duration) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	start := time.Now()
	r, _, err := (&dns.Client{Net: network, Timeout: 5 * time.Second}).Exchange(m, addr)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s to %s: %v", network, addr, err)
	}
	return r, took
}

// TestServeForwardingLoop: serve A on 127.0.0.2 forwards to B's address on
// 127.0.0.3 before B is up (A's start-up loop probe gets no reply), then B
// starts forwarding to A. Questions to both over UDP and TCP get SERVFAIL
// within one lap; both count the loop and log it at error level naming the
// upstream, and none says "upstream down". Figures: run with -v.
func TestServeForwardingLoop(t *testing.T) {
	bin := buildbin.Dnsconfigurer(t)
	bAddr := freePort(t, "127.0.0.3")
	a := startServe(t, bin, "127.0.0.2:0", bAddr)
	b := startServe(t, bin, bAddr, a.dns)
	peers := map[*server]string{a: b.dns, b: a.dns}
	for _, s := range []*server{a, b} {
		t.Logf("%s before any question: loops_total %v, loop_detected_total %v", s.dns,
			s.metric(t, "dnsconfigurer_forward_loops_total"), s.metric(t, "dnsconfigurer_forward_loop_detected_total"))
	}
	for i, network := range []string{"udp", "tcp"} {
		for _, s := range []*server{a, b} {
			name := fmt.Sprintf("loop-%d.example.org.", i)
			r, took := ask(t, network, s.dns, name)
			t.Logf("%s to %s: %s after %v; loops_total %v", network, s.dns, dns.RcodeToString[r.Rcode], took.Round(time.Microsecond),
				s.metric(t, "dnsconfigurer_forward_loops_total"))
			if r.Rcode != dns.RcodeServerFailure || took > loopAnswerBound {
				t.Errorf("%s to %s: %s after %v, want SERVFAIL within %v", network, s.dns, dns.RcodeToString[r.Rcode], took, loopAnswerBound)
			}
		}
	}
	for _, s := range []*server{a, b} {
		if v := s.metric(t, "dnsconfigurer_forward_loops_total"); v < 2 {
			t.Errorf("%s: dnsconfigurer_forward_loops_total %v, want at least 2 (its UDP and TCP questions)", s.dns, v)
		}
		if v := s.metric(t, "dnsconfigurer_forward_loop_detected_total"); v != 1 {
			t.Errorf("%s: dnsconfigurer_forward_loop_detected_total %v, want 1", s.dns, v)
		}
		logs := s.stderr.String()
		if !regexp.MustCompile(`level=ERROR msg="forwarding loop: [^"]*".*upstream=` + regexp.QuoteMeta(peers[s])).MatchString(logs) {
			t.Errorf("%s: no error line of the loop naming upstream %s:\n%s", s.dns, peers[s], logs)
		}
		for _, bad := range []string{"upstream down", "up again"} {
			if strings.Contains(logs, bad) {
				t.Errorf("%s logs %q for a loop:\n%s", s.dns, bad, logs)
			}
		}
	}
}

// TestServeChainNoLoop: serve A forwards to serve B, which forwards to a
// plain upstream. Questions to both over UDP and TCP get the upstream's
// answer, and neither counts nor logs a loop.
func TestServeChainNoLoop(t *testing.T) {
	bin := buildbin.Dnsconfigurer(t)
	up := plainUpstream(t)
	b := startServe(t, bin, "127.0.0.3:0", up)
	a := startServe(t, bin, "127.0.0.2:0", b.dns)
	for _, network := range []string{"udp", "tcp"} {
		for _, s := range []*server{a, b} {
			r, took := ask(t, network, s.dns, "chain-"+network+".example.org.")
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Errorf("%s to %s: %v, want the upstream's answer", network, s.dns, r)
			}
			t.Logf("%s to %s: %s after %v", network, s.dns, dns.RcodeToString[r.Rcode], took.Round(time.Microsecond))
		}
	}
	for _, s := range []*server{a, b} {
		for _, name := range []string{"dnsconfigurer_forward_loops_total", "dnsconfigurer_forward_loop_detected_total", "dnsconfigurer_forward_looping_upstreams"} {
			if v := s.metric(t, name); v != 0 {
				t.Errorf("%s: %s %v in a chain without a loop", s.dns, name, v)
			}
		}
		if strings.Contains(s.stderr.String(), "loop") {
			t.Errorf("%s logs a loop in a chain:\n%s", s.dns, s.stderr.String())
		}
	}
}

// plainUpstream answers every question with 192.0.2.8, over UDP and TCP on
// 127.0.0.1.
func plainUpstream(t *testing.T) string {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
			A: net.IPv4(192, 0, 2, 8)}}
		_ = w.WriteMsg(m)
	})
	addr := freePort(t, "127.0.0.1")
	for _, network := range []string{"udp", "tcp"} {
		started := make(chan error, 1)
		srv := &dns.Server{Addr: addr, Net: network, Handler: h, NotifyStartedFunc: func() { started <- nil }}
		go func() { started <- srv.ListenAndServe() }()
		if err := <-started; err != nil {
			t.Fatalf("upstream %s %s: %v", network, addr, err)
		}
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return addr
}
