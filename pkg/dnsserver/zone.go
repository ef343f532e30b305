package dnsserver

import (
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/store"
)

// zone is the view of one store.Snapshot the handler answers from: the
// snapshot, the zone SOA, and the cache of packed replies made from this
// snapshot (see wireCache). Records are built from the snapshot's nodes when
// a reply is not cached, so the server holds the record data once.
type zone struct {
	snap *store.Snapshot
	name string // lowercase, trailing dot
	ttl  uint32
	soa  []dns.RR // the zone SOA, for the authority section of negatives
	wire wireCache
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

// appendA appends A records for addrs with one allocation for the records
// and one for the addresses.
func appendA(rrs []dns.RR, owner string, addrs []netip.Addr, ttl uint32) []dns.RR {
	if len(addrs) == 0 {
		return rrs
	}
	recs := make([]dns.A, len(addrs))
	ips := make([]byte, 4*len(addrs))
	for i, a := range addrs {
		b := a.As4()
		ip := ips[4*i : 4*i+4 : 4*i+4]
		copy(ip, b[:])
		recs[i] = dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: ip}
		rrs = append(rrs, &recs[i])
	}
	return rrs
}

// appendAAAA is appendA for IPv6.
func appendAAAA(rrs []dns.RR, owner string, addrs []netip.Addr, ttl uint32) []dns.RR {
	if len(addrs) == 0 {
		return rrs
	}
	recs := make([]dns.AAAA, len(addrs))
	ips := make([]byte, 16*len(addrs))
	for i, a := range addrs {
		b := a.As16()
		ip := ips[16*i : 16*i+16 : 16*i+16]
		copy(ip, b[:])
		recs[i] = dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: ip}
		rrs = append(rrs, &recs[i])
	}
	return rrs
}

func appendSRV(rrs []dns.RR, owner string, srvs []store.SRV, ttl uint32) []dns.RR {
	if len(srvs) == 0 {
		return rrs
	}
	recs := make([]dns.SRV, len(srvs))
	for i, s := range srvs {
		recs[i] = dns.SRV{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl},
			Priority: s.Priority, Weight: s.Weight, Port: s.Port, Target: s.Target}
		rrs = append(rrs, &recs[i])
	}
	return rrs
}

func appendPTR(rrs []dns.RR, owner string, ptrs []string, ttl uint32) []dns.RR {
	for _, p := range ptrs {
		rrs = append(rrs, &dns.PTR{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: p})
	}
	return rrs
}

func appendTXT(rrs []dns.RR, owner string, txt []string, ttl uint32) []dns.RR {
	if len(txt) == 0 {
		return rrs
	}
	return append(rrs, &dns.TXT{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttl}, Txt: txt})
}

func cnameRR(owner, target string, ttl uint32) dns.RR {
	return &dns.CNAME{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: target}
}

// records builds the records of type t (or all of them for ANY) of node n,
// owned by owner (the question name as asked, so its case is echoed).
func (z *zone) records(owner, lname string, n *store.Node, t uint16) []dns.RR {
	var rrs []dns.RR
	apex := lname == z.name
	all := t == dns.TypeANY
	if all || t == dns.TypeSOA {
		if apex {
			soa := *z.soa[0].(*dns.SOA)
			soa.Hdr.Name = owner
			rrs = append(rrs, &soa)
		}
	}
	if (all || t == dns.TypeNS) && apex {
		rrs = append(rrs, &dns.NS{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: z.ttl}, Ns: nsName(z.name)})
	}
	if all || t == dns.TypeA {
		rrs = appendA(rrs, owner, n.A, n.TTL)
	}
	if all || t == dns.TypeAAAA {
		rrs = appendAAAA(rrs, owner, n.AAAA, n.TTL)
	}
	if all || t == dns.TypeSRV {
		rrs = appendSRV(rrs, owner, n.SRV, n.TTL)
	}
	if all || t == dns.TypePTR {
		rrs = appendPTR(rrs, owner, n.PTR, n.TTL)
	}
	if all || t == dns.TypeTXT {
		rrs = appendTXT(rrs, owner, n.TXT, n.TTL)
	}
	if (all || t == dns.TypeCNAME) && n.CNAME != "" {
		rrs = append(rrs, cnameRR(owner, n.CNAME, n.TTL))
	}
	return rrs
}

// srvExtra is the additional section of an SRV answer: the addresses of the
// targets, once each.
func (z *zone) srvExtra(srvs []store.SRV) []dns.RR {
	var extra []dns.RR
	for i, s := range srvs {
		dup := false
		for _, p := range srvs[:i] {
			if p.Target == s.Target {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		if tn, ok := z.snap.Lookup(s.Target); ok {
			extra = appendA(extra, s.Target, tn.A, tn.TTL)
			extra = appendAAAA(extra, s.Target, tn.AAAA, tn.TTL)
		}
	}
	return extra
}

func newZone(snap *store.Snapshot) *zone {
	z := &zone{snap: snap, name: snap.Zone, ttl: snap.Options.TTL}
	z.soa = []dns.RR{soaRR(z.name, z.name, z.ttl, snap.Serial)}
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
