package clusterdns

import (
	"context"

	"github.com/miekg/dns"
)

// Resolve answers one question without writing to the wire: from the cluster
// zone, from the reverse records of the store, from the static records, or
// from upstream. It is the core the wire handler wraps.
func (h *Handler) Resolve(ctx context.Context, q dns.Question) Result {
	lname := lowerFQDN(q.Name)
	return h.resolve(ctx, question{Question: q, lname: lname}, decide(h, h.zone(), q.Qtype, q.Qclass, lname))
}

// resolve answers a as d says. A name under the autopath suffix is
// answered as any other here: autopath itself asks per candidate.
func (h *Handler) resolve(ctx context.Context, a question, d decision) Result {
	if !dns.IsFqdn(a.Name) {
		a.Name += "."
	}
	switch d.route {
	case routeRefused:
		return Result{Rcode: dns.RcodeRefused}
	case routeServfail:
		return Result{Rcode: dns.RcodeServerFailure}
	case routeZone:
		return h.answer(ctx, d.z, a, 0)
	case routeReverseAuth:
		return d.z.reverseAnswer(d.ra, a.Qtype, a.Name, a.lname)
	case routeStatic:
		return staticAnswer(a.Qtype, a.Name, a.lname, d.rrs)
	case routeTemplate:
		return h.templateAnswer(ctx, a, d, true)
	case routeClusterset:
		if reserved(a.lname, d.z.name) {
			return Result{Rcode: dns.RcodeNameError, Ns: d.z.negative(a.lname), Authoritative: true, volatile: true}
		}
		r := h.answer(ctx, d.z, a, 0)
		if r.Rcode == dns.RcodeNameError && h.clusterNamespace(a.lname, d.z.name) {
			// A namespace of the cluster is a name of the zone, imports
			// or not, as CoreDNS has it.
			r.Rcode = dns.RcodeSuccess
		}
		r.volatile = true // not in the reply cache: see clusterset
		return r
	case routeExternal:
		return h.externalAnswer(ctx, d.z, a, d.ext)
	}
	return h.forwardQuestion(ctx, a)
}
