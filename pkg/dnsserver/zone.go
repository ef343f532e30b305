package dnsserver

import (
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/store"
)

// zone is a store.Snapshot compiled into ready-made resource records, so
// that the query path only looks a name up and slices prebuilt records. The
// records are shared by every answer and must never be modified.
type zone struct {
	snap  *store.Snapshot
	name  string // lowercase, trailing dot
	ttl   uint32
	names map[string]*rrNode
	soa   []dns.RR // the zone SOA, for the authority section of negatives
	apex  *rrNode
}

// rrNode holds the records of one name, each slice clipped so that an
// append copies.
type rrNode struct {
	a, aaaa, srv, srvExtra, ptr, txt, cname, soa, ns []dns.RR
	// target is the CNAME target (lowercase fqdn).
	target string
}

func clip(rrs []dns.RR) []dns.RR { return rrs[:len(rrs):len(rrs)] }

// nsName is the name server of the zone in its SOA and NS records, as
// CoreDNS.
func nsName(zone string) string { return "ns.dns." + zone }

func soaRR(owner, zoneName string, ttl, serial uint32) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: owner, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      nsName(zoneName),
		Mbox:    "hostmaster." + zoneName,
		Serial:  serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  ttl,
	}
}

func addrRR(owner string, a netip.Addr, ttl uint32) dns.RR {
	if a.Is4() {
		b := a.As4()
		return &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IP(b[:])}
	}
	b := a.As16()
	return &dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: net.IP(b[:])}
}

func compile(snap *store.Snapshot) *zone {
	z := &zone{snap: snap, name: snap.Zone, ttl: snap.Options.TTL, names: make(map[string]*rrNode, snap.Counts.Names)}
	z.soa = []dns.RR{soaRR(z.name, z.name, z.ttl, snap.Serial)}
	snap.Names(func(name string, n *store.Node) {
		rn := &rrNode{target: n.CNAME}
		for _, a := range n.A {
			rn.a = append(rn.a, addrRR(name, a, n.TTL))
		}
		for _, a := range n.AAAA {
			rn.aaaa = append(rn.aaaa, addrRR(name, a, n.TTL))
		}
		for _, p := range n.PTR {
			rn.ptr = append(rn.ptr, &dns.PTR{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: n.TTL}, Ptr: p})
		}
		if len(n.TXT) > 0 {
			rn.txt = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: n.TTL}, Txt: n.TXT}}
		}
		if n.CNAME != "" {
			rn.cname = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: n.TTL}, Target: n.CNAME}}
		}
		for _, s := range n.SRV {
			rn.srv = append(rn.srv, &dns.SRV{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: n.TTL},
				Priority: s.Priority, Weight: s.Weight, Port: s.Port, Target: s.Target})
		}
		if name == z.name {
			rn.soa = z.soa
			rn.ns = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: z.ttl}, Ns: nsName(z.name)}}
			z.apex = rn
		}
		z.names[name] = rn
	})
	// Additional section of SRV answers: the addresses of the targets, once
	// each.
	for _, rn := range z.names {
		if len(rn.srv) == 0 {
			continue
		}
		seen := make(map[string]struct{}, len(rn.srv))
		for _, r := range rn.srv {
			t := r.(*dns.SRV).Target
			if _, dup := seen[t]; dup {
				continue
			}
			seen[t] = struct{}{}
			if tn, ok := z.names[t]; ok {
				rn.srvExtra = append(rn.srvExtra, tn.a...)
				rn.srvExtra = append(rn.srvExtra, tn.aaaa...)
			}
		}
	}
	for _, rn := range z.names {
		rn.a, rn.aaaa, rn.srv, rn.srvExtra = clip(rn.a), clip(rn.aaaa), clip(rn.srv), clip(rn.srvExtra)
		rn.ptr, rn.txt, rn.cname = clip(rn.ptr), clip(rn.txt), clip(rn.cname)
	}
	return z
}

// inZone reports whether the lowercase fqdn name is the zone or below it.
func inZone(name, zone string) bool {
	return name == zone || (len(name) > len(zone) && name[len(name)-len(zone)-1] == '.' && strings.HasSuffix(name, zone))
}

// reverse zones answered from the store (names not found are forwarded, as
// CoreDNS's default "kubernetes cluster.local in-addr.arpa ip6.arpa {
// fallthrough in-addr.arpa ip6.arpa }").
const (
	reverse4 = "in-addr.arpa."
	reverse6 = "ip6.arpa."
)

func reverseZone(name string) string {
	switch {
	case inZone(name, reverse4):
		return reverse4
	case inZone(name, reverse6):
		return reverse6
	}
	return ""
}
