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
	names map[string]rrNode
	soa   []dns.RR // the zone SOA, for the authority section of negatives
	wire  wireCache
}

// rrNode holds the records of one name, grouped by type, and the additional
// records of its SRV answer. It is kept small (one name of a 10,000-Service
// cluster costs a map slot and these 64 bytes) because a cluster has tens of
// thousands of names.
type rrNode struct {
	rrs    []dns.RR
	extra  []dns.RR
	target string // the CNAME target (lowercase fqdn), "" without a CNAME
}

// of returns the records of type t: a clipped subslice, so that an append
// copies.
func (n *rrNode) of(t uint16) []dns.RR {
	i := 0
	for i < len(n.rrs) && n.rrs[i].Header().Rrtype != t {
		i++
	}
	j := i
	for j < len(n.rrs) && n.rrs[j].Header().Rrtype == t {
		j++
	}
	return n.rrs[i:j:j]
}

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
	z := &zone{snap: snap, name: snap.Zone, ttl: snap.Options.TTL, names: make(map[string]rrNode, snap.Counts.Names)}
	z.soa = []dns.RR{soaRR(z.name, z.name, z.ttl, snap.Serial)}
	snap.Names(func(name string, n *store.Node) {
		rn := rrNode{target: n.CNAME}
		size := len(n.A) + len(n.AAAA) + len(n.PTR) + len(n.SRV)
		if len(n.TXT) > 0 {
			size++
		}
		if n.CNAME != "" {
			size++
		}
		if size > 0 {
			rn.rrs = make([]dns.RR, 0, size)
		}
		for _, a := range n.A {
			rn.rrs = append(rn.rrs, addrRR(name, a, n.TTL))
		}
		for _, a := range n.AAAA {
			rn.rrs = append(rn.rrs, addrRR(name, a, n.TTL))
		}
		for _, p := range n.PTR {
			rn.rrs = append(rn.rrs, &dns.PTR{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: n.TTL}, Ptr: p})
		}
		if len(n.TXT) > 0 {
			rn.rrs = append(rn.rrs, &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: n.TTL}, Txt: n.TXT})
		}
		if n.CNAME != "" {
			rn.rrs = append(rn.rrs, &dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: n.TTL}, Target: n.CNAME})
		}
		for _, s := range n.SRV {
			rn.rrs = append(rn.rrs, &dns.SRV{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: n.TTL},
				Priority: s.Priority, Weight: s.Weight, Port: s.Port, Target: s.Target})
		}
		if name == z.name {
			rn.rrs = append(rn.rrs, z.soa[0],
				&dns.NS{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: z.ttl}, Ns: nsName(z.name)})
		}
		z.names[name] = rn
	})
	// Additional section of SRV answers: the addresses of the targets, once
	// each.
	for name, rn := range z.names {
		srv := rn.of(dns.TypeSRV)
		if len(srv) == 0 {
			continue
		}
		seen := make(map[string]struct{}, len(srv))
		for _, r := range srv {
			t := r.(*dns.SRV).Target
			if _, dup := seen[t]; dup {
				continue
			}
			seen[t] = struct{}{}
			if tn, ok := z.names[t]; ok {
				rn.extra = append(rn.extra, tn.of(dns.TypeA)...)
				rn.extra = append(rn.extra, tn.of(dns.TypeAAAA)...)
			}
		}
		rn.extra = clip(rn.extra)
		z.names[name] = rn
	}
	return z
}

func clip(rrs []dns.RR) []dns.RR { return rrs[:len(rrs):len(rrs)] }

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
