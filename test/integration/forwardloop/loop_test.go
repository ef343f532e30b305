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
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// loopAnswerBound is how long a looping query may take: one lap on
// loopback, far under the 2s forwarding timeout it took on a557114.
const loopAnswerBound = 500 * time.Millisecond

// server is one `dnsconfigurer serve` process.
type server = buildbin.Serve

// startServe runs `dnsconfigurer serve` listening on listen and forwarding
// to upstream, and waits for its DNS and metrics addresses.
func startServe(t *testing.T, listen, upstream string) *server {
	t.Helper()
	return buildbin.StartServe(t, "../../../examples/objects", listen, upstream)
}

// ask sends name A over network and returns the reply and how long it took.
func ask(t *testing.T, network, addr, name string) (*dns.Msg, time.Duration) {
	t.Helper()
	start := time.Now()
	r, err := testkit.Exchange(network, addr, name, dns.TypeA)
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
// upstream, and once B serves none says "upstream down" (a refusal before
// that may rightly mark B down; then "up again" is allowed). Figures: run
// with -v.
func TestServeForwardingLoop(t *testing.T) {
	buildbin.Dnsconfigurer(t) // built, or the test skipped, before its stubs start
	bAddr := testkit.FreeAddr(t, "127.0.0.3")
	a := startServe(t, "127.0.0.2:0", bAddr)
	b := startServe(t, bAddr, a.DNS)
	// Until B serves, A's queries to it are refused: A may rightly mark it
	// down then (a slow start on a loaded machine), and up again once B
	// answers. Only what A logs after B serves is the loop's doing.
	before := map[*server]int{a: len(a.Output.String())}
	peers := map[*server]string{a: b.DNS, b: a.DNS}
	for _, s := range []*server{a, b} {
		t.Logf("%s before any question: loops_total %v, loop_detected_total %v", s.DNS,
			s.Metric(t, "dnsconfigurer_forward_loops_total"), s.Metric(t, "dnsconfigurer_forward_loop_detected_total"))
	}
	for i, network := range []string{"udp", "tcp"} {
		for _, s := range []*server{a, b} {
			name := fmt.Sprintf("loop-%d.example.org.", i)
			r, took := ask(t, network, s.DNS, name)
			t.Logf("%s to %s: %s after %v; loops_total %v", network, s.DNS, dns.RcodeToString[r.Rcode], took.Round(time.Microsecond),
				s.Metric(t, "dnsconfigurer_forward_loops_total"))
			if r.Rcode != dns.RcodeServerFailure || took > loopAnswerBound {
				t.Errorf("%s to %s: %s after %v, want SERVFAIL within %v", network, s.DNS, dns.RcodeToString[r.Rcode], took, loopAnswerBound)
			}
		}
	}
	for _, s := range []*server{a, b} {
		if v := s.Metric(t, "dnsconfigurer_forward_loops_total"); v < 2 {
			t.Errorf("%s: dnsconfigurer_forward_loops_total %v, want at least 2 (its UDP and TCP questions)", s.DNS, v)
		}
		if v := s.Metric(t, "dnsconfigurer_forward_loop_detected_total"); v != 1 {
			t.Errorf("%s: dnsconfigurer_forward_loop_detected_total %v, want 1", s.DNS, v)
		}
		logs := s.Output.String()
		if !regexp.MustCompile(`level=ERROR msg="forwarding loop: [^"]*".*upstream=` + regexp.QuoteMeta(peers[s])).MatchString(logs) {
			t.Errorf("%s: no error line of the loop naming upstream %s:\n%s", s.DNS, peers[s], logs)
		}
		early, late := logs[:before[s]], logs[before[s]:]
		bad := []string{"upstream down"}
		if !strings.Contains(early, "upstream down") {
			bad = append(bad, "up again")
		}
		for _, b := range bad {
			if strings.Contains(late, b) {
				t.Errorf("%s logs %q for a loop:\n%s", s.DNS, b, logs)
			}
		}
	}
}

// TestServeChainNoLoop: serve A forwards to serve B, which forwards to a
// plain upstream. Questions to both over UDP and TCP get the upstream's
// answer, and neither counts nor logs a loop.
func TestServeChainNoLoop(t *testing.T) {
	buildbin.Dnsconfigurer(t) // built, or the test skipped, before its stubs start
	up := plainUpstream(t)
	b := startServe(t, "127.0.0.3:0", up)
	a := startServe(t, "127.0.0.2:0", b.DNS)
	for _, network := range []string{"udp", "tcp"} {
		for _, s := range []*server{a, b} {
			r, took := ask(t, network, s.DNS, "chain-"+network+".example.org.")
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Errorf("%s to %s: %v, want the upstream's answer", network, s.DNS, r)
			}
			t.Logf("%s to %s: %s after %v", network, s.DNS, dns.RcodeToString[r.Rcode], took.Round(time.Microsecond))
		}
	}
	for _, s := range []*server{a, b} {
		for _, name := range []string{"dnsconfigurer_forward_loops_total", "dnsconfigurer_forward_loop_detected_total", "dnsconfigurer_forward_looping_upstreams"} {
			if v := s.Metric(t, name); v != 0 {
				t.Errorf("%s: %s %v in a chain without a loop", s.DNS, name, v)
			}
		}
		if strings.Contains(s.Output.String(), "loop") {
			t.Errorf("%s logs a loop in a chain:\n%s", s.DNS, s.Output.String())
		}
	}
}

// plainUpstream answers every question with 192.0.2.8, over UDP and TCP on
// 127.0.0.1.
func plainUpstream(t *testing.T) string {
	t.Helper()
	return testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, r *dns.Msg) {
		r.Answer = []dns.RR{testkit.A(q.Name, 30, "192.0.2.8")}
	})).Addr
}
