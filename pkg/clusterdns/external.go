package clusterdns

import (
	"context"
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// external answers Services' external IPs under outside zones, as
// CoreDNS's k8s_external: <svc>.<ns>.<zone> from the Service's external
// node (store.Snapshot.External), the SOA and NS at the zone's apex.
type external struct {
	zones       []string // lowercase, trailing dot, longest first
	apex        string   // lowercase, no trailing dot
	ttl         uint32
	fallThrough bool // NXDOMAIN goes upstream instead
}

// WithExternal answers the names of zones as CoreDNS's k8s_external with
// its apex and ttl options; fallThrough forwards a name CoreDNS's would
// pass on (NXDOMAIN). No zones is none.
func WithExternal(zones []string, apex string, ttl uint32, fallThrough bool) Option {
	return func(h *Handler) {
		if len(zones) == 0 {
			return
		}
		x := &external{apex: strings.ToLower(strings.TrimSuffix(apex, ".")), ttl: ttl, fallThrough: fallThrough}
		for _, z := range zones {
			x.zones = append(x.zones, dns.Fqdn(strings.ToLower(z)))
		}
		slices.SortFunc(x.zones, func(a, b string) int { return len(b) - len(a) })
		h.ext = x
	}
}

// zoneOf is the external zone of lname (lowercase), "" when none.
func (x *external) zoneOf(lname string) string {
	for _, z := range x.zones {
		if inZone(lname, z) {
			return z
		}
	}
	return ""
}

// join is name (no trailing dot) under zone (with one).
func join(name, zone string) string {
	if zone == "." {
		return name + "."
	}
	return name + "." + zone
}

func (x *external) soa(zn string, serial uint32) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: zn, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: x.ttl},
		Ns:      "ns1." + join(x.apex, zn),
		Mbox:    "hostmaster." + join(x.apex, zn),
		Serial:  serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  x.ttl,
	}
}

// externalAnswer answers a under the external zone zn, as CoreDNS's
// k8s_external ServeDNS, apex.go and kubernetes' External. Its answers
// are not cached: a Service's change retires its cluster name only.
func (h *Handler) externalAnswer(ctx context.Context, z *zone, a question, zn string) Result {
	x := h.ext
	soa := x.soa(zn, z.snap.Serial)
	r := Result{Authoritative: true, volatile: true}
	nodata := func(rcode int) Result {
		r.Rcode, r.Ns = rcode, []dns.RR{soa}
		return r
	}
	if a.lname == zn {
		switch a.Qtype {
		case dns.TypeSOA:
			r.Answer = []dns.RR{soa}
		case dns.TypeNS:
			ns := &dns.NS{Hdr: dns.RR_Header{Name: zn, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: x.ttl}, Ns: soa.Ns}
			r.Answer = []dns.RR{ns}
		default:
			r.Ns = []dns.RR{soa}
		}
		return r
	}
	base := strings.TrimSuffix(strings.TrimSuffix(a.lname, zn), ".")
	if inZone(a.lname, join(x.apex, zn)) {
		// The apex's names: ns1.<apex> has this server's addresses in
		// CoreDNS; it has none here.
		if n := dns.CountLabel(base); n == 1 || (n == 2 && strings.HasPrefix(base, "ns1.")) {
			return nodata(dns.RcodeSuccess)
		}
		return nodata(dns.RcodeNameError)
	}
	svc, rcode := externalServices(z.snap, base)
	if len(svc.ips) == 0 {
		if rcode == dns.RcodeNameError && x.fallThrough && h.fwd != nil {
			return h.forwardQuestion(ctx, a)
		}
		return nodata(rcode)
	}
	switch a.Qtype {
	case dns.TypeA, dns.TypeAAAA:
		for _, ip := range svc.ips {
			if ip.Is4() == (a.Qtype == dns.TypeA) {
				r.Answer = append(r.Answer, addrRR(a.Name, ip, x.ttl))
			}
		}
	case dns.TypeSRV:
		r.Answer, r.Extra = x.srv(a.Name, join(svc.name, zn), svc)
	}
	if len(r.Answer) == 0 {
		r.Ns = []dns.RR{soa}
	}
	return r
}

// extServices is what a name under an external zone matched: a Service's
// name (<svc>.<ns>), its external IPs (each once) and the ports the name
// selects.
type extServices struct {
	name  string
	ips   []netip.Addr
	ports []uint16
}

// externalServices parses base, a name relative to its external zone
// ([endpoint.|_port._proto.]svc.ns), as kubernetes' External: the
// Service's addresses and ports, or the rcode of none.
func externalServices(snap *store.Snapshot, base string) (extServices, int) {
	segs := dns.SplitDomainName(base)
	last := len(segs) - 1
	ns := segs[last]
	if !snap.HasNamespace(ns) {
		return extServices{}, dns.RcodeNameError
	}
	if last--; last < 0 {
		return extServices{}, dns.RcodeSuccess
	}
	name := segs[last]
	var port, proto string
	switch last--; last {
	case 0: // an endpoint label, which only the headless option reads
		last--
	case 1:
		proto, port = strings.TrimPrefix(segs[1], "_"), strings.TrimPrefix(segs[0], "_")
		last -= 2
	}
	n, ok := snap.External(name, ns)
	if last != -1 || !ok {
		return extServices{}, dns.RcodeNameError
	}
	out := extServices{name: name + "." + ns}
	for _, p := range n.SRV() {
		pname, pproto, _ := strings.Cut(p.Target, ".")
		if (port == "" || port == pname[1:]) && (proto == "" || proto == pproto[1:]) {
			out.ports = append(out.ports, p.Port)
		}
	}
	if len(out.ports) == 0 {
		return extServices{}, dns.RcodeNameError
	}
	for _, ip := range append(n.A(), n.AAAA()...) {
		if !slices.Contains(out.ips, ip) {
			out.ips = append(out.ips, ip)
		}
	}
	return out, dns.RcodeSuccess
}

// srv is the SRV answer of s for owner, each port once with the target
// name <svc>.<ns>.<zone> and its addresses in the extra section, as
// k8s_external's srv: the weight splits 100 over every address and port.
func (x *external) srv(owner, target string, s extServices) (ans, extra []dns.RR) {
	weight := uint16(math.Floor(100.0 / float64(len(s.ips)*len(s.ports))))
	weight = max(weight, 1)
	var seen []uint16
	for _, p := range s.ports {
		if slices.Contains(seen, p) {
			continue
		}
		seen = append(seen, p)
		ans = append(ans, &dns.SRV{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: x.ttl},
			Weight: weight, Port: p, Target: target})
	}
	for _, ip := range s.ips {
		extra = append(extra, addrRR(target, ip, x.ttl))
	}
	return ans, extra
}
