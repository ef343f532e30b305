package attack

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// The UDP shapes fill a forwarder's slots with names that are slow to
// answer: names whose servers never answer, spread over domains and
// reverse zones, ExternalNames to such names, and random types.

// udpFlood sends rate queries a second to addr, from one socket on each
// of a's addresses in turn, next drawing the name and type; replies are
// read and dropped.
func udpFlood(ctx context.Context, a *attack, addr string, rate int, next func(r *rand.Rand) (string, uint16)) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		a.st.broken("resolve %s: %v", addr, err)
		return
	}
	var conns []*net.UDPConn
	var wg sync.WaitGroup
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	for _, src := range a.from {
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: src.AsSlice()}, raddr)
		if err != nil {
			a.st.failed.Add(1)
			continue
		}
		conns = append(conns, c)
		wg.Go(func() {
			buf := make([]byte, 65535)
			for {
				if _, err := c.Read(buf); err != nil && !isRefused(err) {
					return
				}
			}
		})
	}
	if len(conns) == 0 {
		return
	}
	r, i := a.rand(0), 0
	testkit.Every(ctx, time.Second/time.Duration(rate), func() bool {
		name, qtype := next(r)
		if _, err := conns[i%len(conns)].Write(packed(r, name, qtype)); err != nil {
			a.st.failed.Add(1)
		} else {
			a.st.sent.Add(1)
		}
		i++
		return true
	})
}

// isRefused reports an ICMP port unreachable read back on a UDP socket.
func isRefused(err error) bool { return strings.Contains(err.Error(), "connection refused") }

// clusterName is a Service of prod: a name the cluster DNS answers.
func clusterName(r *rand.Rand) string {
	return fmt.Sprintf("svc-%d.prod.svc.cluster.local.", r.IntN(services))
}

// silentDomains draws n registrable domains whose servers never answer.
func silentDomains(r *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-silent.%s", letters(r, between(r, 3, 10)), pick(r, "com", "net", "org", "io", "co.uk", "example"))
	}
	return out
}

// someName draws a name of kind: cluster, silent (under one of domains),
// missing (NXDOMAIN in the cluster zone), external (answered upstream),
// or mixed.
func someName(r *rand.Rand, kind string, domains []string) string {
	if kind == "mixed" {
		kind = pick(r, "cluster", "silent", "missing", "external")
	}
	switch kind {
	case "cluster":
		return clusterName(r)
	case "silent":
		return fmt.Sprintf("r%x.%s.", r.Uint32(), pick(r, domains...))
	case "missing":
		return fmt.Sprintf("nx%x.prod.svc.cluster.local.", r.Uint32())
	}
	return fmt.Sprintf("a%x.attack-%s.example.org.", r.Uint32(), letters(r, 4))
}

// silentSpread: names whose servers never answer, spread over 1-40
// random registrable domains.
type silentSpread struct {
	to      target
	rate    int
	domains []string
	qtypes  string
}

func drawSilentSpread(r *rand.Rand) params {
	return silentSpread{to: drawTarget(r), rate: between(r, 50, maxRate), domains: silentDomains(r, between(r, 1, 40)), qtypes: pick(r, "A", "A+AAAA", "random")}
}

func (p silentSpread) String() string {
	return fmt.Sprintf("%s, %d qps over %d domains (%s...), types %s", p.to, p.rate, len(p.domains), p.domains[0], p.qtypes)
}

func (p silentSpread) run(ctx context.Context, e *env, a *attack) {
	udpFlood(ctx, a, e.addr(p.to), p.rate, func(r *rand.Rand) (string, uint16) {
		return someName(r, "silent", p.domains), someType(r, p.qtypes)
	})
}

// someType draws a query type of kind: A, A+AAAA, common or random (any
// 16-bit type, meta types included).
func someType(r *rand.Rand, kind string) uint16 {
	switch kind {
	case "A":
		return dns.TypeA
	case "A+AAAA":
		return pick(r, dns.TypeA, dns.TypeAAAA)
	case "common":
		return pick(r, dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeTXT, dns.TypeMX, dns.TypeSRV, dns.TypeANY, dns.TypeHTTPS, dns.TypePTR, dns.TypeNS, dns.TypeSOA)
	}
	if r.IntN(4) == 0 {
		return pick(r, dns.TypeANY, dns.TypeAXFR, dns.TypeIXFR, dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, dns.TypeMAILA, 0, 65535)
	}
	return uint16(r.Uint32())
}

// reverseZones: PTR names under 1-40 random reverse zones, in-addr.arpa
// /16s or ip6.arpa /32s, whose servers never answer.
type reverseZones struct {
	to    target
	rate  int
	v6    bool
	zones []string
}

func drawReverseZones(r *rand.Rand) params {
	p := reverseZones{to: drawTarget(r), rate: between(r, 50, maxRate), v6: r.IntN(2) == 0}
	for range between(r, 1, 40) {
		if p.v6 {
			var b strings.Builder
			for range 8 {
				fmt.Fprintf(&b, "%x.", r.IntN(16))
			}
			p.zones = append(p.zones, reverse(b.String())+"ip6.arpa.")
		} else {
			// Public /16s: not the cluster's 10/8 nor loopback.
			p.zones = append(p.zones, fmt.Sprintf("%d.%d.in-addr.arpa.", r.IntN(256), pick(r, between(r, 11, 126), between(r, 128, 168), between(r, 173, 191), between(r, 193, 223))))
		}
	}
	return p
}

// reverse reverses the labels of "a.b.c." to "c.b.a.".
func reverse(s string) string {
	labels := strings.Split(strings.TrimSuffix(s, "."), ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	return strings.Join(labels, ".") + "."
}

func (p reverseZones) String() string {
	return fmt.Sprintf("%s, %d qps over %d zones (%s...)", p.to, p.rate, len(p.zones), p.zones[0])
}

func (p reverseZones) run(ctx context.Context, e *env, a *attack) {
	udpFlood(ctx, a, e.addr(p.to), p.rate, func(r *rand.Rand) (string, uint16) {
		zone := pick(r, p.zones...)
		if p.v6 {
			var b strings.Builder
			for range 24 {
				fmt.Fprintf(&b, "%x.", r.IntN(16))
			}
			return b.String() + zone, dns.TypePTR
		}
		return fmt.Sprintf("%d.%d.%s", r.IntN(256), r.IntN(256), zone), dns.TypePTR
	})
}

// externalNameFlood: the tenant's ExternalNames to silent targets, through
// node-local, plainly or by autopath, with common or random types.
type externalNameFlood struct {
	rate     int
	names    int
	autopath bool
	qtypes   string
}

func drawExternalNames(r *rand.Rand) params {
	return externalNameFlood{rate: between(r, 10, 150), names: between(r, 1, externalNames), autopath: r.IntN(3) == 0,
		qtypes: pick(r, "A", "common", "random")}
}

func (p externalNameFlood) String() string {
	return fmt.Sprintf("node-local, %d qps over %d ExternalNames, autopath %v, types %s", p.rate, p.names, p.autopath, p.qtypes)
}

func (p externalNameFlood) run(ctx context.Context, e *env, a *attack) {
	udpFlood(ctx, a, e.addr(toNodeLocal), p.rate, func(r *rand.Rand) (string, uint16) {
		k := r.IntN(p.names)
		if p.autopath {
			return fmt.Sprintf("ext-%d.search.tenant.cluster.local.ap.k8s.io.", k), someType(r, p.qtypes)
		}
		return fmt.Sprintf("ext-%d.tenant.svc.cluster.local.", k), someType(r, p.qtypes)
	})
}

// randomQtypes: any 16-bit type (meta types included) on cluster,
// missing, silent and external names.
type randomQtypes struct {
	to    target
	rate  int
	names string
}

func drawRandomQtypes(r *rand.Rand) params {
	return randomQtypes{to: drawTarget(r), rate: between(r, 20, maxRate), names: pick(r, "cluster", "missing", "silent", "external", "mixed")}
}

func (p randomQtypes) String() string {
	return fmt.Sprintf("%s, %d qps, %s names", p.to, p.rate, p.names)
}

func (p randomQtypes) run(ctx context.Context, e *env, a *attack) {
	domains := silentDomains(a.rand(-1), 4)
	udpFlood(ctx, a, e.addr(p.to), p.rate, func(r *rand.Rand) (string, uint16) {
		return someName(r, p.names, domains), someType(r, "random")
	})
}
