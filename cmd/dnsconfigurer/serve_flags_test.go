package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// held is a handler that never answers.
var held = dns.HandlerFunc(func(dns.ResponseWriter, *dns.Msg) {})

// TestServeMaxConcurrent: with --max-concurrent 1 and one query waiting for
// a silent upstream, the next outside query of the same client is shed at
// once (SERVFAIL, counted): the client is over its share and its waiting
// query has not waited half the timeout; with the default it waits for the
// upstream like the first.
func TestServeMaxConcurrent(t *testing.T) {
	testkit.WithFlag(t, "max-concurrent 1", []string{"--max-concurrent", "1"}, func(t *testing.T, args []string, wantShed bool) {
		up := testkit.NewUpstream(t, held, testkit.UDPOnly())
		addr, _ := startServeLog(t, append([]string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects",
			"--upstream", up.Addr, "--metrics-listen", "127.0.0.1:0"}, args...)...)
		metrics := metricsAddr(t)
		first := make(chan error, 1)
		go func() {
			_, err := testkit.Exchange("udp", addr, "held.example.org.", dns.TypeA)
			first <- err
		}()
		testkit.WaitFor(t, 5*time.Second, func() error {
			if m := scrape(t, metrics); m[`dnsconfigurer_forward_in_flight{zone="."}`] != 1 || up.ClientQueries() != 1 {
				return fmt.Errorf("the first query is not waiting for the upstream (asked %d): %v", up.ClientQueries(), m)
			}
			return nil
		})
		start := time.Now()
		r, err := testkit.Exchange("udp", addr, "next.example.org.", dns.TypeA)
		took := time.Since(start)
		if err != nil || r.Rcode != dns.RcodeServerFailure {
			t.Fatalf("second query: %v %v, want SERVFAIL", r, err)
		}
		shed, counted := scrape(t, metrics)[`dnsconfigurer_forward_shed_total{zone="."}`]
		asked := up.ClientQueries()
		t.Logf("second query SERVFAIL after %v; shed_total %v; upstream asked %d", took.Round(time.Millisecond), shed, asked)
		if !counted {
			t.Errorf("no dnsconfigurer_forward_shed_total series")
		}
		if wantShed {
			if shed != 1 || took > time.Second || asked != 1 {
				t.Errorf("want it shed at once: after %v, shed_total %v, upstream asked %d times", took, shed, asked)
			}
		} else if shed != 0 || asked != 2 {
			t.Errorf("want it forwarded: shed_total %v, upstream asked %d times", shed, asked)
		}
		if err := <-first; err != nil {
			t.Errorf("first query: %v", err)
		}
	})
}

// TestServeLoadbalance: by default the records of a headless Service come
// in a rotated order (each first in turn); --loadbalance=false keeps one
// order in every reply.
func TestServeLoadbalance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		firsts int // distinct first records in 6 replies
	}{
		{"default", nil, 3},
		{"loadbalance=false", []string{"--loadbalance=false"}, 1},
		{"loadbalance=true", []string{"--loadbalance=true"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startServe(t, append([]string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects"}, tc.args...)...)
			firsts := map[string]bool{}
			for _, network := range []string{"udp", "tcp"} {
				for range 3 {
					r, err := testkit.Exchange(network, addr, "db.prod.svc.cluster.local.", dns.TypeA)
					if err != nil || len(r.Answer) != 3 {
						t.Fatalf("%s: %v %v, want the 3 ready endpoints", network, r, err)
					}
					firsts[r.Answer[0].(*dns.A).A.String()] = true
				}
			}
			if len(firsts) != tc.firsts {
				t.Errorf("first records %v, want %d distinct", firsts, tc.firsts)
			}
		})
	}
}

// TestServeLogQueries: --log-queries logs a line per query with its name,
// type and rcode; without it no query is logged.
func TestServeLogQueries(t *testing.T) {
	testkit.WithFlag(t, "log-queries", []string{"--log-queries"}, func(t *testing.T, args []string, want bool) {
		addr, log := startServeLog(t, append([]string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects"}, args...)...)
		for _, name := range []string{"web.prod.svc.cluster.local.", "nosuch.prod.svc.cluster.local."} {
			if _, err := testkit.Exchange("udp", addr, name, dns.TypeA); err != nil {
				t.Fatal(err)
			}
		}
		lines := []string{"name=web.prod.svc.cluster.local. type=A rcode=NOERROR", "name=nosuch.prod.svc.cluster.local. type=A rcode=NXDOMAIN"}
		if want {
			testkit.WaitFor(t, 5*time.Second, func() error {
				for _, l := range lines {
					if !strings.Contains(log.String(), l) {
						return fmt.Errorf("log lacks %q:\n%s", l, log.String())
					}
				}
				return nil
			})
		}
		if !want && strings.Contains(log.String(), `msg=query`) {
			t.Fatalf("a query logged without --log-queries:\n%s", log.String())
		}
	})
}

// TestServePrefetch: with --prefetch 1 an answer asked again close to its
// expiry (TTL 2 s) is refreshed in the background (counted); without it the
// refresh is a plain miss after expiry.
func TestServePrefetch(t *testing.T) {
	testkit.WithFlag(t, "prefetch 1", []string{"--prefetch", "1"}, func(t *testing.T, args []string, prefetch bool) {
		up := stubUpstream(t, 2, "192.0.2.7")
		addr, _ := startServeLog(t, append([]string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects",
			"--upstream", up.Addr, "--metrics-listen", "127.0.0.1:0"}, args...)...)
		metrics := metricsAddr(t)
		// Ask until the upstream has been asked a second time: by a
		// prefetch before the answer expires, or by a miss after.
		testkit.WaitEvery(t, 10*time.Second, 20*time.Millisecond, func() error {
			r, err := testkit.Exchange("udp", addr, "popular.example.org.", dns.TypeA)
			if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("popular name: %v %v", r, err)
			}
			if n := up.ClientQueries(); n < 2 {
				return fmt.Errorf("the upstream asked %d times, want a second", n)
			}
			return nil
		})
		n := scrape(t, metrics)[`dnsconfigurer_cache_prefetches_total{server="cluster"}`]
		if (n >= 1) != prefetch {
			t.Errorf("cache_prefetches_total %v, want prefetch %v", n, prefetch)
		}
	})
}

// TestServeReverseZones: with --reverse-zones the reverse names of the
// prefix are answered here, an unknown one NXDOMAIN with the SOA of the
// reverse zone and never forwarded; without it they are forwarded.
func TestServeReverseZones(t *testing.T) {
	testkit.WithFlag(t, "reverse-zones", []string{"--reverse-zones", "10.96.0.0/12,fd00::/64"}, func(t *testing.T, args []string, auth bool) {
		up := stubUpstream(t, 30, "192.0.2.7")
		addr := startServe(t, append([]string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--upstream", up.Addr}, args...)...)
		// A known ClusterIP is the zone's either way.
		r, err := testkit.Exchange("udp", addr, "30.0.96.10.in-addr.arpa.", dns.TypePTR)
		if err != nil || len(r.Answer) != 1 {
			t.Fatalf("known ClusterIP: %v %v", r, err)
		}
		r, err = testkit.Exchange("udp", addr, "99.0.96.10.in-addr.arpa.", dns.TypePTR)
		if err != nil {
			t.Fatal(err)
		}
		if !auth {
			if n := up.ClientQueries(); n != 1 {
				t.Errorf("unknown reverse name: upstream asked %d times, want forwarded once", n)
			}
			return
		}
		var soa *dns.SOA
		if len(r.Ns) == 1 {
			soa, _ = r.Ns[0].(*dns.SOA)
		}
		if r.Rcode != dns.RcodeNameError || !r.Authoritative || soa == nil || soa.Hdr.Name != "10.in-addr.arpa." {
			t.Errorf("unknown reverse name: %v, want an authoritative NXDOMAIN with the SOA of 10.in-addr.arpa.", r)
		}
		if n := up.ClientQueries(); n != 0 {
			t.Errorf("upstream asked %d times for a name of the reverse zones", n)
		}
	})
}
