// Package forwardfair runs a real `dnsconfigurer serve` (the binary built by
// test/buildbin, on the example manifests) in front of stub upstreams on
// loopback and checks how the forwarder shares its slots and when it
// gives up (issue 55):
//
//   - row 3 (issue 66 row 4): names whose servers never answer, from one
//     address, over one domain or many, hold no more than what no one else
//     asks for: --max-concurrent is shared per client address, the oldest
//     query of the client holding the most gives way, and every other
//     external name keeps its answer;
//
//   - row 8: with --failfast-all-unhealthy-upstreams and every upstream down
//     by its health probes, a new name is SERVFAIL within 300 ms.
//
//     go test -count=1 -v ./test/integration/forwardfair/
package forwardfair

import (
	"context"
	"fmt"
	"net"
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
	return testkit.NewUpstream(t, testkit.AnswerA(1, "192.0.2.1", func(name string) bool {
		return silent != "" && strings.HasSuffix(strings.ToLower(name), silent)
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

// silentName is the i-th name of a shape whose servers never answer (the
// stub's silent set, silentFor): names spread over spread domains, reverse
// /16s or ip6.arpa /32s.
func silentName(shape string, i, spread int) string {
	d := i % spread
	switch shape {
	case "reverse /16s":
		return fmt.Sprintf("%d.%d.%d.10.in-addr.arpa.", i%250, i/250%250, d)
	case "ip6.arpa /32s":
		return fmt.Sprintf("%x.%x.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.%x.0.0.0.8.b.d.0.ip6.arpa.", i%16, i/16%16, d%16)
	}
	return fmt.Sprintf("r%d.d%d-silent.example.", i, d) // registrable: d<d>-silent.example
}

// silentFor: the stub never answers the silent names of every shape.
func silentFor(name string) bool {
	for _, z := range []string{"-silent.example.", ".10.in-addr.arpa.", ".8.b.d.0.ip6.arpa."} {
		if strings.HasSuffix(name, z) {
			return true
		}
	}
	return false
}

// from is a UDP client whose queries leave from the address src.
func from(src string) *dns.Client {
	return &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
}

// TestSilentNamesKeepTheirShare (issue 66 row 4; issue 55 row 3 before
// it): --max-concurrent 100, and names whose servers never answer asked at
// 75 qps (2 s each: 1.5 times the cap in flight) over one domain, 11, 20,
// 11 reverse /16s or 11 ip6.arpa /32s, beside 20 qps of ordinary external
// names from another address, or from the same one (node-local at the
// cluster DNS is one address for all its pods), for 10 s. At most 1 % of
// the ordinary names fail. With the per-domain cap (8c15235) the spread
// shapes filled the cap: 50-83 of 160 ordinary names failed.
func TestSilentNamesKeepTheirShare(t *testing.T) {
	up := testkit.NewUpstream(t, testkit.AnswerA(1, "192.0.2.1", func(name string) bool { return silentFor(strings.ToLower(name)) }),
		testkit.UDPOnly(), testkit.At("127.0.0.71:0"))
	srv := buildbin.StartServeArgs(t, "127.0.0.72:0", "--objects", objects, "--upstream", up.Addr, "--max-concurrent", "100")
	for _, tc := range []struct {
		shape  string
		spread int
		same   bool
	}{
		{"domains", 1, false},
		{"domains", 11, false},
		{"domains", 20, false},
		{"reverse /16s", 11, false},
		{"ip6.arpa /32s", 11, false},
		{"domains", 20, true},
	} {
		t.Run(fmt.Sprintf("%s=%d,same=%v", tc.shape, tc.spread, tc.same), func(t *testing.T) {
			const span = 10 * time.Second
			shed0 := srv.Metric(t, "dnsconfigurer_forward_shed_total")
			ctx, cancel := context.WithTimeout(context.Background(), span)
			defer cancel()
			var wg sync.WaitGroup
			var silent, ordinary outcomes
			send := func(client *dns.Client, qps int, name func(i int) string, o *outcomes) {
				wg.Go(func() {
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
			ordinaryFrom := "127.0.0.74"
			if tc.same {
				ordinaryFrom = "127.0.0.73"
			}
			send(from("127.0.0.73"), 75, func(i int) string { return silentName(tc.shape, i, tc.spread) }, &silent)
			send(from(ordinaryFrom), 20, func(i int) string { return fmt.Sprintf("www.site%d.example.org.", i) }, &ordinary)
			<-ctx.Done()
			wg.Wait()
			shed := srv.Metric(t, "dnsconfigurer_forward_shed_total") - shed0
			t.Logf("silent names, 75 qps: %s; shed_total +%v", &silent, shed)
			t.Logf("ordinary names, 20 qps: %s", &ordinary)
			ordinary.mu.Lock()
			all, failed := ordinary.ok+ordinary.fail+ordinary.silent, ordinary.fail+ordinary.silent
			ordinary.mu.Unlock()
			if all == 0 || 100*failed > all {
				t.Errorf("%d of %d ordinary names failed, want at most 1 %%", failed, all)
			}
			if shed == 0 {
				t.Error("no silent name was shed: the test did not reach the cap")
			}
		})
	}
}

// TestFailFastAllUnhealthy (row 8): the only upstream is silent; once its
// health probes have taken it down, a new name is SERVFAIL within 300 ms
// with --failfast-all-unhealthy-upstreams, and waits the forward timeout
// (2 s) without.
func TestFailFastAllUnhealthy(t *testing.T) {
	testkit.WithFlag(t, "failfast", []string{"--failfast-all-unhealthy-upstreams"}, func(t *testing.T, args []string, fast bool) {
		up := testkit.NewUpstream(t, testkit.Silent, testkit.UDPOnly(), testkit.At("127.0.0.73:0"))
		srv := buildbin.StartServeArgs(t, "127.0.0.74:0", append([]string{"--objects", objects, "--upstream", up.Addr}, args...)...)
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
			if fast && took > 300*time.Millisecond {
				t.Errorf("new name %d: answered after %v, want within 300 ms", i, took)
			}
			if !fast && took < time.Second {
				t.Errorf("new name %d: answered after %v, want the upstream asked until its timeout", i, took)
			}
		}
	})
}
