// Package forwardfair runs a real `dnsconfigurer serve` (the binary built by
// test/buildbin, on the example manifests) in front of stub upstreams on
// loopback and checks how the forwarder shares its slots and when it
// gives up (issue 55):
//
//   - row 3: the names of one domain whose servers never answer fill at
//     most --max-concurrent-per-domain of the --max-concurrent slots, and
//     every other external name keeps its answer;
//
//   - row 8: with --failfast-all-unhealthy-upstreams and every upstream down
//     by its health probes, a new name is SERVFAIL within 300 ms.
//
//     go test -count=1 -v ./test/integration/forwardfair/
package forwardfair

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

const objects = "../../../examples/objects"

// stub answers every name with 192.0.2.1, but never a name under silent.
func stub(t *testing.T, at, silent string) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		if silent != "" && strings.HasSuffix(strings.ToLower(req.Question[0].Name), silent) {
			return
		}
		r := new(dns.Msg)
		r.SetReply(req)
		r.RecursionAvailable = true
		if req.Question[0].Qtype == dns.TypeA {
			r.Answer = []dns.RR{testkit.A(req.Question[0].Name, 1, "192.0.2.1")}
		}
		_ = w.WriteMsg(r)
	}), testkit.UDPOnly(), testkit.At(at))
}

// outcomes counts the answers of a kind of query.
type outcomes struct {
	mu               sync.Mutex
	ok, fail, silent int
}

func (o *outcomes) add(r *dns.Msg, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err != nil:
		o.silent++
	case r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0:
		o.ok++
	default:
		o.fail++
	}
}

func (o *outcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("%d answered, %d SERVFAIL or other, %d no reply", o.ok, o.fail, o.silent)
}

// TestSilentDomainKeepsItsShare (row 3): --max-concurrent 100 (so 10 per
// domain), 100 qps of random names under a domain whose servers never
// answer (2 s each: 200 would be in flight) and 20 qps of ordinary external
// names, for 15 s. At most 1 % of the ordinary names fail; on 66f333f the
// silent names held all 100 slots and 141-160 of 160 ordinary names were
// SERVFAIL at once.
func TestSilentDomainKeepsItsShare(t *testing.T) {
	up := stub(t, "127.0.0.71:0", "silent.example.")
	srv := buildbin.StartServeArgs(t, "127.0.0.72:0", "--objects", objects, "--upstream", up.Addr, "--max-concurrent", "100")
	const span = 15 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	var wg sync.WaitGroup
	var silent, ordinary outcomes
	send := func(qps int, name func(i int) string, o *outcomes) {
		wg.Go(func() {
			client := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
			i := 0
			testkit.Every(ctx, time.Second/time.Duration(qps), func() bool {
				n := name(i)
				i++
				wg.Go(func() {
					r, _, err := client.Exchange(new(dns.Msg).SetQuestion(n, dns.TypeA), srv.DNS)
					o.add(r, err)
				})
				return true
			})
		})
	}
	send(100, func(i int) string { return fmt.Sprintf("r%d.silent.example.", i) }, &silent)
	send(20, func(i int) string { return fmt.Sprintf("www.site%d.example.org.", i) }, &ordinary)
	<-ctx.Done()
	wg.Wait()
	shed := srv.Metric(t, "dnsconfigurer_forward_domain_shed_total")
	t.Logf("silent domain, 100 qps: %s; domain_shed_total %v", &silent, shed)
	t.Logf("ordinary names, 20 qps: %s", &ordinary)
	ordinary.mu.Lock()
	all, failed := ordinary.ok+ordinary.fail+ordinary.silent, ordinary.fail+ordinary.silent
	ordinary.mu.Unlock()
	if all == 0 || 100*failed > all {
		t.Errorf("%d of %d ordinary names failed, want at most 1 %%", failed, all)
	}
	if shed == 0 {
		t.Error("no silent name was shed for its domain: the test did not reach the bound")
	}
}

// TestFailFastAllUnhealthy (row 8): the only upstream is silent; once its
// health probes have taken it down, a new name is SERVFAIL within 300 ms
// with --failfast-all-unhealthy-upstreams, and waits the forward timeout
// (2 s) without.
func TestFailFastAllUnhealthy(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		fast bool
	}{
		{"failfast", []string{"--failfast-all-unhealthy-upstreams"}, true},
		{"default", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := testkit.NewUpstream(t, testkit.Silent, testkit.UDPOnly(), testkit.At("127.0.0.73:0"))
			srv := buildbin.StartServeArgs(t, "127.0.0.74:0", append([]string{"--objects", objects, "--upstream", up.Addr}, tc.args...)...)
			client := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
			// A failed query asks for the health probes, which decide.
			if r, _, err := client.Exchange(new(dns.Msg).SetQuestion("first.example.org.", dns.TypeA), srv.DNS); err == nil && r.Rcode == dns.RcodeSuccess {
				t.Fatal("the silent upstream answered")
			}
			testkit.WaitEqual(t, 15*time.Second, "upstream healthy", func() float64 {
				return srv.Metric(t, "dnsconfigurer_forward_upstream_healthy")
			}, 0)
			for i := range 5 {
				begin := time.Now()
				r, _, err := client.Exchange(new(dns.Msg).SetQuestion(fmt.Sprintf("new%d.example.org.", i), dns.TypeA), srv.DNS)
				took := time.Since(begin)
				if err != nil {
					t.Fatalf("new name %d: %v", i, err)
				}
				t.Logf("new name %d: %s after %v", i, dns.RcodeToString[r.Rcode], took.Round(time.Millisecond))
				if r.Rcode != dns.RcodeServerFailure {
					t.Errorf("new name %d: %s, want SERVFAIL", i, dns.RcodeToString[r.Rcode])
				}
				if tc.fast && took > 300*time.Millisecond {
					t.Errorf("new name %d: answered after %v, want within 300 ms", i, took)
				}
				if !tc.fast && took < time.Second {
					t.Errorf("new name %d: answered after %v, want the upstream asked until its timeout", i, took)
				}
			}
		})
	}
}
