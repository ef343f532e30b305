package main

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// TestServeReloadUnderLoad reloads the --config file again and again while
// four clients ask an in-cluster name over UDP and a fifth an outside name,
// a fixed number of queries each, one try each (no retry): every query is
// answered, none times out. Each reload changes loadbalance and adds an
// override (seen answered before the next reload), not the forward and
// cache sections: the forwarder and its cache are kept, so the outside
// name stays cached (its upstream asked once) and the forward counters
// carry on.
func TestServeReloadUnderLoad(t *testing.T) {
	// Registered before startServe's: restored after serve has stopped.
	interval := reloadInterval
	t.Cleanup(func() { reloadInterval = interval })
	reloadInterval = 20 * time.Millisecond
	stub := stubUpstream(t, 300, "192.0.2.1")
	up, asked := stub.Addr, stub.AskedFor
	path := filepath.Join(t.TempDir(), "server.yaml")
	write := func(gen int) {
		t.Helper()
		body := exampleConfig(fmt.Sprintf("loadbalance: %v\nforward:\n- zone: .\n  upstreams: [%q]\noverrides:\n", gen%2 == 0, up))
		for g := 0; g <= gen; g++ {
			body += fmt.Sprintf("- name: gen-%d.reload.example\n  addresses: [\"192.0.2.%d\"]\n", g, 100+g%100)
		}
		testkit.WriteAtomic(t, path, body)
	}
	write(0)
	addr := startServe(t, "--listen", "127.0.0.1:0", "--config", path)
	metrics := metricsAddr(t)
	c := &dns.Client{Timeout: time.Second}
	if r, _, err := c.Exchange(new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA), addr); err != nil || len(r.Answer) != 1 {
		t.Fatalf("outside name: %v %v", r, err)
	}
	requestsBefore := scrape(t, metrics)[`dnsconfigurer_forward_requests_total{upstream="`+up+`",zone="."}`]

	n := 2000
	if raceEnabled {
		n = 600
	}
	// The clients ask at least n times each, and on until three reloads
	// were applied: a reload waits for the file watch's debounce, so a
	// fast machine could finish n queries before the third.
	const minReloads = 3
	var enough atomic.Bool
	type tally struct{ sent, ok, wrong, lost int }
	results := make(chan tally, 5)
	load := func(name string, want func(*dns.Msg) bool) {
		var tl tally
		c := &dns.Client{Timeout: time.Second}
		for ; tl.sent < n || !enough.Load(); tl.sent++ {
			r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
			switch {
			case err != nil:
				tl.lost++
				if tl.lost <= 3 {
					t.Errorf("%s: %v", name, err)
				}
			case !want(r):
				tl.wrong++
				if tl.wrong <= 3 {
					t.Errorf("%s: %v", name, r)
				}
			default:
				tl.ok++
			}
		}
		results <- tl
	}
	inCluster := func(r *dns.Msg) bool {
		return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 && r.Answer[0].(*dns.A).A.String() == "10.96.0.30"
	}
	outside := func(r *dns.Msg) bool {
		return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 && r.Answer[0].(*dns.A).A.String() == "192.0.2.1"
	}
	start := time.Now()
	for range 4 {
		go load("web.prod.svc.cluster.local.", inCluster)
	}
	go load("www.example.org.", outside)

	// Reload until the clients are done, each reload seen applied (its
	// override answered) before the next.
	reloads := 0
	var total tally
	for done := 0; done < 5; {
		select {
		case tl := <-results:
			total.sent, total.ok, total.wrong, total.lost = total.sent+tl.sent, total.ok+tl.ok, total.wrong+tl.wrong, total.lost+tl.lost
			done++
			continue
		default:
		}
		gen := reloads + 1
		write(gen)
		name, want := fmt.Sprintf("gen-%d.reload.example.", gen), fmt.Sprintf("192.0.2.%d", 100+gen%100)
		testkit.WaitFor(t, 10*time.Second, func() error {
			// Asked before the reload it is forwarded, and the stub
			// answers 192.0.2.1.
			r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
			if err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != want {
				return fmt.Errorf("reload %d not applied: %s = %v %v, want %s", gen, name, r, err, want)
			}
			return nil
		})
		reloads++
		if reloads >= minReloads {
			enough.Store(true)
		}
	}
	took := time.Since(start)
	m := scrape(t, metrics)
	applied := m[`dnsconfigurer_serve_config_reloads_total{result="applied"}`]
	requestsAfter := m[`dnsconfigurer_forward_requests_total{upstream="`+up+`",zone="."}`]
	t.Logf("%d queries in %v over %d reloads (%v applied): %d answered, %d wrong, %d lost; outside name asked upstream %d times; forward requests_total %v → %v",
		total.sent, took.Round(time.Millisecond), reloads, applied, total.ok, total.wrong, total.lost, asked("www.example.org."), requestsBefore, requestsAfter)
	if total.lost != 0 || total.wrong != 0 || total.ok != total.sent || total.sent < 5*n {
		t.Errorf("%d lost, %d wrong of %d queries (at least %d), want every one answered", total.lost, total.wrong, total.sent, 5*n)
	}
	if reloads < minReloads {
		t.Errorf("only %d reloads while the clients ran, want at least %d", reloads, minReloads)
	}
	if n := asked("www.example.org."); n != 1 {
		t.Errorf("the outside name was asked upstream %d times, want once: the cache is kept when its config is unchanged", n)
	}
	if requestsAfter < requestsBefore {
		t.Errorf("forward requests_total went from %v to %v: the forwarder was replaced", requestsBefore, requestsAfter)
	}
}
