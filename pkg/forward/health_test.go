package forward_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// isProbe reports whether req is a health probe (". IN NS").
func isProbe(req *dns.Msg) bool {
	return req.Question[0].Name == "." && req.Question[0].Qtype == dns.TypeNS
}

// healthy is the upstream_healthy series of addr.
func healthy(t *testing.T, reg *prometheus.Registry, addr string) float64 {
	t.Helper()
	return testkit.Gather(t, reg)[`dnsconfigurer_forward_upstream_healthy{upstream="`+addr+`",zone="."}`]
}

// waitHealthy waits for the upstream_healthy series of addr to be want.
func waitHealthy(t *testing.T, reg *prometheus.Registry, addr string, want float64) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, func() error {
		if h := healthy(t, reg, addr); h != want {
			return fmt.Errorf("upstream %s healthy %v, want %v", addr, h, want)
		}
		return nil
	})
}

// TestHealthRules: a failed query only triggers a health probe; the probe
// (". IN NS", any reply healthy) decides whether the upstream is down; and
// with every upstream down a query is still sent to one of them.
func TestHealthRules(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cases := []struct {
		name string
		// answers decides whether the stub answers req while the test
		// runs its failing queries.
		answers func(req *dns.Msg) bool
		// down: the upstream must be marked down.
		down bool
	}{
		// Names under one zone whose servers drop queries: the upstream
		// answers its probe and must stay in rotation.
		{"silent zone, probe answered", func(req *dns.Msg) bool {
			return !strings.HasSuffix(req.Question[0].Name, ".silent.example.")
		}, false},
		// An upstream that answers nothing, its probe included.
		{"nothing answered", func(*dns.Msg) bool { return false }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var alive atomic.Bool
			var probes atomic.Int64
			up := runStub(t, func(req *dns.Msg) []*dns.Msg {
				if isProbe(req) {
					probes.Add(1)
				}
				if alive.Load() || tc.answers(req) {
					return []*dns.Msg{answer(req)}
				}
				return nil
			})
			f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: timeout, HealthCheck: 20 * time.Millisecond})
			reg := testkit.Registry(t, f)
			f.Start(context.Background())
			for i := range 3 * forward.DefaultMaxFails {
				if _, err := ask(f, context.Background(), fmt.Sprintf("n%d.silent.example.", i)); err == nil {
					t.Fatalf("query %d answered, want a timeout", i)
				}
				// Each failure asks for a probe; wait for it before the
				// next failure.
				want := int64(i + 1)
				testkit.WaitFor(t, 5*time.Second, func() error {
					if n := probes.Load(); n < want {
						return fmt.Errorf("%d health probes after %d failures", n, want)
					}
					return nil
				})
			}
			if tc.down {
				waitHealthy(t, reg, up.Addr, 0)
				// Still asked, not failed at once: the query reaches the
				// upstream and waits for its timeout.
				allDown := func() float64 { return testkit.Gather(t, reg)[`dnsconfigurer_forward_all_down_total{zone="."}`] }
				before, downBefore := asked(up), allDown()
				start := time.Now()
				if _, err := ask(f, context.Background(), "down.example.org."); err == nil {
					t.Fatal("answered by a silent upstream")
				}
				if took := time.Since(start); asked(up) != before+1 || took < timeout/2 {
					t.Errorf("with every upstream down: %d queries sent, failed after %v; want 1, at the timeout", asked(up)-before, took)
				}
				if n := allDown() - downBefore; n != 1 {
					t.Errorf("all_down_total grew by %v, want 1", n)
				}
				alive.Store(true)
				waitHealthy(t, reg, up.Addr, 1)
			} else if h := healthy(t, reg, up.Addr); h != 1 {
				t.Fatalf("upstream_healthy %v after %d timeouts on a silent zone, want 1 (its probe is answered)", h, 3*forward.DefaultMaxFails)
			}
			if r, err := ask(f, context.Background(), "www.example.org."); err != nil || len(r.Answer) != 1 {
				t.Fatalf("an ordinary name: %v %v", r, err)
			}
		})
	}
}

// TestDeadSocket: an upstream whose socket is closed fails fast (ICMP port
// unreachable) and the next upstream answers; its probes fail too, and once
// down it is no longer asked.
func TestDeadSocket(t *testing.T) {
	dead := testkit.RefusedAddr(t)
	good := testkit.NewUpstream(t, answering, testkit.UDPOnly())
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{dead, good.Addr}, Policy: forward.PolicySequential, HealthCheck: 20 * time.Millisecond})
	reg := testkit.Registry(t, f)
	f.Start(context.Background())
	for i := range 5 {
		start := time.Now()
		if r, err := ask(f, context.Background(), "www.example.org."); err != nil || len(r.Answer) != 1 {
			t.Fatalf("query %d: %v %v", i, r, err)
		} else if took := time.Since(start); took > time.Second {
			t.Errorf("query %d took %v", i, took)
		}
	}
	waitHealthy(t, reg, dead, 0)
	errs := testkit.Gather(t, reg)[`dnsconfigurer_forward_upstream_errors_total{upstream="`+dead+`",zone="."}`]
	for range 5 {
		if _, err := ask(f, context.Background(), "www.example.org."); err != nil {
			t.Fatal(err)
		}
	}
	if n := testkit.Gather(t, reg)[`dnsconfigurer_forward_upstream_errors_total{upstream="`+dead+`",zone="."}`]; n != errs {
		t.Errorf("dead upstream asked while down: errors %v, then %v", errs, n)
	}
	if n := asked(good); n != 10 {
		t.Errorf("good upstream asked %d times, want 10", n)
	}
}

// TestSlowUpstreams: N = 1-3 upstreams that all answer in 1.2s, under the
// default 2s timeout, answer every query and stay in rotation (on 4a5a5e7
// each got 1/N of the timeout and the probe 1s: N = 2 failed nearly all).
func TestSlowUpstreams(t *testing.T) {
	const delay = 1200 * time.Millisecond
	for n := 1; n <= 3; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var addrs forward.StaticUpstreams
			for range n {
				// The upstream's latency, not synchronisation.
				addrs = append(addrs, testkit.NewUpstream(t, answering, testkit.UDPOnly(), testkit.Delay(delay)).Addr)
			}
			f := newForwarder(t, forward.Config{Upstreams: addrs, HealthCheck: 20 * time.Millisecond})
			reg := testkit.Registry(t, f)
			f.Start(context.Background())
			// Three rounds of 10 concurrent queries: a round after an
			// upstream was marked down would show it.
			var failed atomic.Int64
			for round := range 3 {
				var wg sync.WaitGroup
				for i := range 10 {
					wg.Go(func() {
						if r, err := ask(f, context.Background(), fmt.Sprintf("r%d-%d.example.org.", round, i)); err != nil || len(r.Answer) != 1 {
							failed.Add(1)
							t.Logf("round %d query %d: %v", round, i, err)
						}
					})
				}
				wg.Wait()
			}
			if n := failed.Load(); n != 0 {
				t.Errorf("%d of 30 queries failed with upstreams answering in %v", n, delay)
			}
			for _, a := range addrs {
				if h := healthy(t, reg, a); h != 1 {
					t.Errorf("upstream %s healthy %v, want 1", a, h)
				}
			}
		})
	}
}

// TestSourcePorts: every UDP query leaves from a fresh source port (RFC
// 5452 §9.2). 1,000 queries on 4a5a5e7 used one pooled socket.
func TestSourcePorts(t *testing.T) {
	up := testkit.NewUpstream(t, answering, testkit.UDPOnly())
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}})
	const n = 1000
	for i := range n {
		if _, err := ask(f, context.Background(), fmt.Sprintf("q%d.example.org.", i)); err != nil {
			t.Fatal(err)
		}
	}
	ports := clients(up)
	t.Logf("%d queries, %d distinct source ports", n, ports)
	// Random ports from Linux's ~28,000 ephemeral ones: about 982
	// distinct expected for 1,000 draws.
	if ports < 900 {
		t.Errorf("%d distinct source ports for %d queries, want at least 900", ports, n)
	}
}
