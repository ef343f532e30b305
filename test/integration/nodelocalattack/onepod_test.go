package nodelocalattack

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// partlySilent is an upstream on ip (UDP and TCP: the cluster DNS asks a
// TCP client's names over TCP) that answers every name with 192.0.2.1 but
// those under silent.example and <d>-silent.example, which it never
// answers.
func partlySilent(t *testing.T, ip string) string {
	t.Helper()
	up := testkit.NewUpstream(t, testkit.AnswerA(1, "192.0.2.1", func(name string) bool {
		return strings.HasSuffix(strings.ToLower(name), "silent.example.")
	}), testkit.At(ip+":0"))
	return up.Addr
}

// loadFrom is load with queries of qtype() leaving from the address src.
func loadFrom(ctx context.Context, wg *sync.WaitGroup, src, server string, qps int, next func(i int) string, qtype func() uint16, c *tally) {
	wg.Go(func() {
		client := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
		i := 0
		testkit.Every(ctx, time.Second/time.Duration(qps), func() bool {
			m := new(dns.Msg)
			m.SetQuestion(next(i), qtype())
			i++
			wg.Go(func() {
				start := time.Now()
				r, _, err := client.Exchange(m, server)
				c.add(r, err, time.Since(start))
			})
			return true
		})
	})
}

func typeA() uint16 { return dns.TypeA }

// randomType is one of the types a resolver asks, at random: each query
// of a name is then a miss of its own at node-local's cache.
func randomType() uint16 {
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeMX, dns.TypeSRV, dns.TypeCNAME, dns.TypeNS, dns.TypeCAA, dns.TypeHTTPS, dns.TypeSVCB}
	return types[rand.IntN(len(types))]
}

// attackOutcome runs the attack and the other pods' lookups for span
// through node-local and checks that the others lose at most 1 %.
func attackOutcome(t *testing.T, nl *buildbin.Serve, span time.Duration, attack func(ctx context.Context, wg *sync.WaitGroup, c *tally), others map[string]func(i int) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	var wg sync.WaitGroup
	var slow tally
	attack(ctx, &wg, &slow)
	tallies := map[string]*tally{}
	k := 0
	for kind, name := range others {
		tallies[kind] = &tally{}
		k++
		loadFrom(ctx, &wg, fmt.Sprintf("127.0.0.%d", 90+k), nl.DNS, 20, name, typeA, tallies[kind])
	}
	<-ctx.Done()
	wg.Wait()
	t.Logf("the attacking pod: %s", &slow)
	for kind, c := range tallies {
		failed, all := c.failed()
		t.Logf("%s, 20 qps from another pod: %s (%d of %d failed)", kind, c, failed, all)
		if all == 0 || 100*failed > all {
			t.Errorf("%s: %d of %d failed, want at most 1 %%", kind, failed, all)
		}
	}
	for _, name := range []string{"dnsconfigurer_forward_shed_total", "dnsconfigurer_forward_upstream_errors_total", "dnsconfigurer_forward_in_flight"} {
		t.Logf("node-local %s %v", name, nl.Metric(t, name))
	}
}

// TestOnePodKeepsTwiceTheCap (issue 66 row 2): one pod keeps 500 names in
// flight through node-local (250 qps of names over five registrable
// domains whose servers never answer, 2 s each at the cluster DNS): twice
// the cluster DNS's 250 TCP connections per client. Node-local pipelines
// its queries to the cluster DNS over a few connections, so it is never
// refused there, and shares its own slots per pod. The node's other pods'
// cluster names and external names lose at most 1 %. On 8c15235 node-local
// opened a connection per query in flight, the cluster DNS refused those
// past 250, and 17-41 of 100 cluster names and 35-74 of 200 external names
// were SERVFAIL at 150-200 qps.
func TestOnePodKeepsTwiceTheCap(t *testing.T) {
	up := partlySilent(t, "127.0.0.81")
	cluster := buildbin.StartServe(t, writeObjects(t), "127.0.0.82:0", up)
	nl := startNodeLocal(t, "127.0.0.83:0", cluster.DNS)
	attackOutcome(t, nl, 20*time.Second, func(ctx context.Context, wg *sync.WaitGroup, c *tally) {
		loadFrom(ctx, wg, "127.0.0.84", nl.DNS, 250, func(i int) string {
			return fmt.Sprintf("r%x.d%d-silent.example.", rand.Uint64(), i%5)
		}, typeA, c)
	}, map[string]func(i int) string{
		"cluster names":  func(i int) string { return ordinary(i + 1) },
		"external names": func(i int) string { return fmt.Sprintf("www.site%d.example.org.", i) },
	})
	t.Logf("cluster DNS tcp connections refused per client: %v", cluster.Metric(t, "dnsconfigurer_dnsserver_tcp_client_limited_total"))
}

// TestExternalNameRandomTypes (issue 66 row 4): a tenant's ExternalName
// Services to a target whose servers never answer, asked at 50 qps with
// random types through node-local at --max-concurrent 100 (the issue's
// setting): 100 in flight, 2 s each at the cluster DNS. At node-local
// every cluster name was one registrable domain (cluster.local), so on
// 8c15235 they filled its per-domain share and the node's other cluster
// names were SERVFAIL. Shared per pod, the others lose at most 1 %.
func TestExternalNameRandomTypes(t *testing.T) {
	up := partlySilent(t, "127.0.0.85")
	cluster := buildbin.StartServe(t, writeObjects(t), "127.0.0.86:0", up)
	nl := startNodeLocal(t, "127.0.0.87:0", cluster.DNS, "--max-concurrent", "100")
	attackOutcome(t, nl, 20*time.Second, func(ctx context.Context, wg *sync.WaitGroup, c *tally) {
		loadFrom(ctx, wg, "127.0.0.88", nl.DNS, 50, func(i int) string {
			return fmt.Sprintf("ext-%d.attack.svc.cluster.local.", i%externalNames)
		}, randomType, c)
	}, map[string]func(i int) string{
		"cluster names": func(i int) string { return ordinary(i + 1) },
	})
}
