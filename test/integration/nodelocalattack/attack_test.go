// Package nodelocalattack runs the cluster DNS (`dnsconfigurer serve` on
// manifests, no API server) behind node-local (`serve --mode node-local`,
// not transparent, on loopback), both the binary built by test/buildbin,
// and floods node-local with names that are slow at the cluster DNS
// (issue 27 item 3): a tenant's ExternalName Services pointing under a
// zone whose upstream never answers, and random names under that zone,
// asked plainly and through autopath. Node-local waits for the cluster DNS
// longer than the cluster DNS waits for any name, so a slow name is that
// name's answer from the cluster DNS, never node-local's timeout toward
// it, and ordinary cluster names keep their answers. With
// nodeLocal.clusterTimeout forced to 1 s (below the cluster DNS's 2 s,
// which validation now refuses) two in three slow names timed out at
// node-local and were its own SERVFAIL; the health probes (issue 27 item
// 1) still kept ordinary names at 0.
//
//	go test -count=1 -v ./test/integration/nodelocalattack/
package nodelocalattack

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// The objects: ordinary Services in prod, and the tenant's ExternalNames
// in attack, each to its own name under the silent zone.
const (
	services      = 400
	externalNames = 300
	silentZone    = "silent.example."
)

// writeObjects writes the manifests of the cluster DNS and returns their
// directory.
func writeObjects(t *testing.T) string {
	t.Helper()
	target := func(k int) string { return fmt.Sprintf("t%d.%s", k, strings.TrimSuffix(silentZone, ".")) }
	return buildbin.Objects(t, buildbin.ClusterIPServices("prod", services)+buildbin.ExternalNames("attack", externalNames, target))
}

// silentUpstream is a UDP upstream on ip that answers no query: the
// servers of the silent zone, and of every other name the cluster DNS
// forwards.
func silentUpstream(t *testing.T, ip string) string {
	t.Helper()
	up := testkit.NewUpstream(t, testkit.Silent, testkit.UDPOnly(), testkit.At(ip+":0"))
	t.Cleanup(func() { t.Logf("the silent upstream read %d queries", up.Count()) })
	return up.Addr
}

// startNodeLocal runs `serve --mode node-local` on listen in front of the
// cluster DNS at cluster, every name to it (--resolv-conf "").
func startNodeLocal(t *testing.T, listen, cluster string, extra ...string) *buildbin.Serve {
	t.Helper()
	return buildbin.StartServeArgs(t, listen, append([]string{"--mode", "node-local", "--cluster-upstream", cluster, "--resolv-conf", ""}, extra...)...)
}

// tally counts the outcomes of a kind of query: rcodes, and no reply
// within the client's 5 s (glibc's wait before it retries).
type tally struct {
	mu      sync.Mutex
	rcodes  map[int]int
	noReply int
	slowest time.Duration
}

func (c *tally) add(r *dns.Msg, err error, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rcodes == nil {
		c.rcodes = map[int]int{}
	}
	if err != nil {
		c.noReply++
		return
	}
	c.rcodes[r.Rcode]++
	c.slowest = max(c.slowest, took)
}

// failed is the queries answered SERVFAIL or not at all, and all of them.
func (c *tally) failed() (failed, all int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.rcodes {
		all += n
	}
	return c.rcodes[dns.RcodeServerFailure] + c.noReply, all + c.noReply
}

func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for rc, n := range c.rcodes {
		parts = append(parts, fmt.Sprintf("%s %d", dns.RcodeToString[rc], n))
	}
	return fmt.Sprintf("%s, no reply %d, slowest reply %v", strings.Join(parts, ", "), c.noReply, c.slowest.Round(time.Millisecond))
}

// load sends qps queries a second, names from next, to server over UDP
// until ctx ends, each on its own goroutine, and counts the outcomes.
func load(ctx context.Context, wg *sync.WaitGroup, server string, qps int, next func(i int) string, c *tally) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		client := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		i := 0
		testkit.Every(ctx, time.Second/time.Duration(qps), func() bool {
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				m := new(dns.Msg)
				m.SetQuestion(name, dns.TypeA)
				start := time.Now()
				r, _, err := client.Exchange(m, server)
				c.add(r, err, time.Since(start))
			}(next(i))
			i++
			return true
		})
	}()
}

// ordinary is the i-th ordinary cluster name: a prod Service, plainly or
// through autopath (the first candidate answers from the zone). Each is
// asked again only after its 5 s TTL, so node-local asks the cluster DNS.
func ordinary(i int) string {
	k := i % services
	if i%2 == 0 {
		return fmt.Sprintf("svc-%d.prod.svc.cluster.local.", k)
	}
	return fmt.Sprintf("svc-%d.search.prod.cluster.local.ap.k8s.io.", k)
}

// attack is the i-th attack name, in turn: an ExternalName to the silent
// zone, a random name under it through autopath (the tenant's namespace's
// candidates are NXDOMAIN, then the name itself is forwarded), and a
// random name under it asked plainly.
func attack(i int) string {
	r := rand.Uint64()
	switch i % 3 {
	case 0:
		return fmt.Sprintf("ext-%d.attack.svc.cluster.local.", (i/3)%externalNames)
	case 1:
		return fmt.Sprintf("r%x.%ssearch.attack.cluster.local.ap.k8s.io.", r, silentZone)
	}
	return fmt.Sprintf("r%x.%s", r, silentZone)
}

// TestSlowNamesThroughNodeLocal: 20 qps of ordinary cluster names through
// node-local for 5 s, then for 20 s beside 50 qps of names slow at the
// cluster DNS. Node-local's exchanges with the cluster DNS never time out
// (none failed, no health probe failed, the cluster DNS never down), the
// slow names get the cluster DNS's own answers, and the ordinary names'
// SERVFAIL (or no reply) moves by at most 1 point: 0 in fact. Figures: -v.
func TestSlowNamesThroughNodeLocal(t *testing.T) {
	silent := silentUpstream(t, "127.0.0.31")
	cluster := buildbin.StartServe(t, writeObjects(t), "127.0.0.32:0", silent)
	nl := startNodeLocal(t, "127.0.0.33:0", cluster.DNS)
	warm, err := testkit.Exchange("udp", nl.DNS, "svc-0.prod.svc.cluster.local.", dns.TypeA)
	if err != nil || warm.Rcode != dns.RcodeSuccess || len(warm.Answer) != 1 {
		t.Fatalf("node-local does not answer an ordinary name: %v %v", warm, err)
	}

	const (
		baseline    = 5 * time.Second
		attackFor   = 20 * time.Second
		ordinaryQPS = 20
		attackQPS   = 50
	)
	var before, during, slow tally
	var wg sync.WaitGroup
	n := 1 // svc-0 is cached
	ctx, cancel := context.WithTimeout(context.Background(), baseline)
	load(ctx, &wg, nl.DNS, ordinaryQPS, func(i int) string { return ordinary(n + i) }, &before)
	<-ctx.Done()
	cancel()
	wg.Wait()
	n += ordinaryQPS * int(baseline/time.Second)

	ctx, cancel = context.WithTimeout(context.Background(), attackFor)
	defer cancel()
	load(ctx, &wg, nl.DNS, attackQPS, attack, &slow)
	load(ctx, &wg, nl.DNS, ordinaryQPS, func(i int) string { return ordinary(n + i) }, &during)
	<-ctx.Done()
	wg.Wait() // every query answered or given up (5 s)

	t.Logf("ordinary names, %d qps, %v alone: %s", ordinaryQPS, baseline, &before)
	t.Logf("ordinary names, %d qps, %v beside the attack: %s", ordinaryQPS, attackFor, &during)
	t.Logf("attack, %d qps of names slow at the cluster DNS: %s", attackQPS, &slow)
	metrics := map[string]float64{}
	for _, name := range []string{"dnsconfigurer_forward_upstream_errors_total", "dnsconfigurer_forward_healthcheck_failures_total",
		"dnsconfigurer_forward_all_down_total", "dnsconfigurer_forward_upstream_healthy", "dnsconfigurer_nodelocal_upstream_failures_total"} {
		metrics[name] = nl.Metric(t, name)
		t.Logf("node-local %s %v", name, metrics[name])
	}

	f0, n0 := before.failed()
	f1, n1 := during.failed()
	if n0 == 0 || n1 == 0 {
		t.Fatalf("no ordinary queries sent: %d before, %d during", n0, n1)
	}
	p0, p1 := 100*float64(f0)/float64(n0), 100*float64(f1)/float64(n1)
	t.Logf("ordinary SERVFAIL or no reply: %d/%d (%.1f %%) alone, %d/%d (%.1f %%) beside the attack", f0, n0, p0, f1, n1, p1)
	if f0 > 0 || f1 > 0 || p1-p0 > 1 {
		t.Errorf("ordinary names failed: %.1f %% alone, %.1f %% beside the attack; want 0 (at most +1 point)", p0, p1)
	}
	// The mechanism: node-local never gave up on the cluster DNS.
	for _, name := range []string{"dnsconfigurer_forward_upstream_errors_total", "dnsconfigurer_forward_healthcheck_failures_total",
		"dnsconfigurer_forward_all_down_total", "dnsconfigurer_nodelocal_upstream_failures_total"} {
		if metrics[name] != 0 {
			t.Errorf("node-local %s = %v, want 0: an exchange with the cluster DNS timed out", name, metrics[name])
		}
	}
	if metrics["dnsconfigurer_forward_upstream_healthy"] != 1 {
		t.Errorf("node-local's cluster DNS upstream healthy = %v, want 1", metrics["dnsconfigurer_forward_upstream_healthy"])
	}
	if _, all := slow.failed(); all == 0 || slow.noReply > 0 {
		t.Errorf("attack queries: %s; want every one answered (by the cluster DNS)", &slow)
	}
}
