package clusterdns

import (
	"context"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
	"github.com/miekg/dns"
)

// anyRR is the minimal answer to ANY for an existing name (RFC 8482): the
// CNAME of an alias, else a synthesized HINFO "RFC8482" "".
func anyRR(owner, cname string, ttl uint32) dns.RR {
	if cname != "" {
		return cnameRR(owner, cname, ttl)
	}
	return &dns.HINFO{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: ttl}, Cpu: "RFC8482"}
}

// staticAnswer answers from static records: authoritative, never cached,
// the owners in the question's case.
func staticAnswer(qtype uint16, owner, lname string, rrs []dns.RR) Result {
	r := Result{Rcode: dns.RcodeSuccess, Authoritative: true, volatile: true}
	if qtype == dns.TypeANY {
		var ttl uint32
		if len(rrs) > 0 {
			ttl = rrs[0].Header().Ttl
		}
		r.Answer = []dns.RR{anyRR(owner, "", ttl)}
		return r
	}
	if owner == lname {
		r.Answer = clip(rrs)
		return r
	}
	r.Answer = make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		if rr.Header().Name == lname {
			rr = dns.Copy(rr)
			rr.Header().Name = owner
		}
		r.Answer[i] = rr
	}
	return r
}

func (z *zone) negative(name string) []dns.RR {
	if rz := reverseZone(name); rz != "" {
		return []dns.RR{soaRR(rz, z.name, z.ttl, z.snap.Serial)}
	}
	return z.soa
}

// answer answers from the zone. owner is the name as asked (its case is
// echoed), lname its lowercase form.
func (h *Handler) answer(ctx context.Context, z *zone, qtype uint16, owner, lname string, depth int) Result {
	n, ok := z.snap.Lookup(lname)
	if !ok {
		if r, ok := h.insecurePod(z, qtype, owner, lname); ok {
			return r
		}
		return Result{Rcode: dns.RcodeNameError, Ns: z.negative(lname), Authoritative: true}
	}
	if qtype == dns.TypeANY {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{anyRR(owner, n.CNAME(), n.TTL)}, Authoritative: true}
	}
	if n.CNAME() != "" && qtype != dns.TypeCNAME {
		return h.chase(ctx, z, qtype, cnameRR(owner, n.CNAME(), n.TTL), n.CNAME(), depth)
	}
	ans := z.records(owner, lname, n, qtype)
	if len(ans) == 0 {
		return Result{Rcode: dns.RcodeSuccess, Ns: z.negative(lname), Authoritative: true}
	}
	var extra []dns.RR
	var deps []string
	if qtype == dns.TypeSRV {
		extra = z.srvExtra(n.SRV())
		for _, s := range n.SRV() {
			deps = append(deps, s.Target)
		}
	}
	return Result{Rcode: dns.RcodeSuccess, Answer: clip(ans), Extra: clip(extra), Authoritative: true, deps: deps}
}

// chase answers for an ExternalName: the CNAME, then the target's records,
// followed inside the zone or asked upstream.
func (h *Handler) chase(ctx context.Context, z *zone, qtype uint16, cname dns.RR, target string, depth int) Result {
	if inZone(target, z.name) && !delegated(h, target) {
		if depth >= maxChase {
			return Result{Rcode: dns.RcodeServerFailure}
		}
		r := h.answer(ctx, z, qtype, target, target, depth+1)
		if r.Rcode == dns.RcodeServerFailure {
			return r
		}
		r.Answer = append([]dns.RR{cname}, r.Answer...)
		r.deps = append(r.deps, target)
		return r
	}
	if h.fwd == nil {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{cname}, Authoritative: true}
	}
	r := h.forwardQuestion(ctx, dns.Question{Name: target, Qtype: qtype, Qclass: dns.ClassINET})
	if r.Rcode == dns.RcodeServerFailure || r.Rcode == dns.RcodeRefused {
		// The client can still chase the CNAME itself.
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{cname}, Authoritative: true, Forwarded: true}
	}
	r.Answer = append([]dns.RR{cname}, r.Answer...)
	r.Forwarded = true
	return r
}

// insecurePod answers <dashed-ip>.<ns>.pod.<zone> in the insecure pod mode:
// any well-formed IP in an exposed namespace.
func (h *Handler) insecurePod(z *zone, qtype uint16, owner, lname string) (Result, bool) {
	if z.snap.Options.Pods != store.PodsInsecure {
		return Result{}, false
	}
	suffix := ".pod." + z.name
	if !strings.HasSuffix(lname, suffix) {
		return Result{}, false
	}
	rest := lname[:len(lname)-len(suffix)]
	i := strings.IndexByte(rest, '.')
	if i <= 0 || strings.IndexByte(rest[i+1:], '.') >= 0 {
		return Result{}, false
	}
	if !z.snap.NamespaceExposed(rest[i+1:]) {
		return Result{}, false
	}
	ip, ok := store.ParseDashedIP(rest[:i])
	if !ok {
		return Result{}, false
	}
	if qtype == dns.TypeANY {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{anyRR(owner, "", z.ttl)}, Authoritative: true}, true
	}
	if (qtype == dns.TypeA && ip.Is4()) || (qtype == dns.TypeAAAA && ip.Is6()) {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{addrRR(owner, ip, z.ttl)}, Authoritative: true}, true
	}
	return Result{Rcode: dns.RcodeSuccess, Ns: z.soa, Authoritative: true}, true
}

// fill puts a Result into a reply.
func fill(m *dns.Msg, r Result) {
	m.Rcode = r.Rcode
	m.Authoritative = r.Authoritative
	m.Answer, m.Ns, m.Extra = r.Answer, r.Ns, r.Extra
}
