package clusterdns

import (
	"context"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/template"
)

// templates are the handler's templates and the cap of their TTLs.
type templates struct {
	set *template.Set
	// maxTTL is the cap for a name, as cappedStatic's; nil: none.
	maxTTL func(name string) (time.Duration, bool)
}

// match is the templates' outcome for a question (template.Set.Match).
func (t *templates) match(lname string, qtype, qclass uint16) (template.Match, template.Outcome) {
	return t.set.Match(lname, qtype, qclass)
}

// WithTemplates answers the questions the templates of s match
// (template.Set.Match) before the cluster zone, the static records and
// the forwarders, as CoreDNS's plugin order puts template before hosts,
// kubernetes and forward; a rewrite renames first, and autopath's
// candidates are matched too. A name outside the templates' zones costs
// no pattern. maxTTL (nil: none) caps the records' TTLs per name, as
// CoreDNS's cache plugin caps a template's answer in its block. A nil s
// is none.
func WithTemplates(s *template.Set, maxTTL func(name string) (time.Duration, bool)) Option {
	return func(h *Handler) {
		if s != nil {
			h.tpl = &templates{set: s, maxTTL: maxTTL}
		}
	}
}

// templateAnswer answers a from the template d matched: authoritative,
// cached with the zone's replies unless a record reads the client or the
// message (templates are static). As CoreDNS's, a CNAME answered for an
// A or AAAA question is followed once, by the routing of its target.
func (h *Handler) templateAnswer(ctx context.Context, a question, d decision, chase bool) Result {
	tq := template.Question{Name: a.lname, Question: a.Question}
	if a.from.Client.IsValid() {
		tq.Remote = a.from.Client.String()
	}
	if d.tm.Volatile() {
		// A record reads the message: the question's, as no message
		// travels this far.
		tq.Msg = new(dns.Msg)
		tq.Msg.Question = []dns.Question{a.Question}
	}
	ta, err := d.tm.Answer(tq)
	if err != nil {
		h.log.Debug("template", "name", a.Name, "err", err)
		return Result{Rcode: dns.RcodeServerFailure}
	}
	r := Result{Rcode: ta.Rcode, Answer: ta.Answer, Ns: ta.Ns, Extra: ta.Extra, volatile: ta.Volatile}
	if ta.Rcode == dns.RcodeServerFailure {
		return Result{Rcode: dns.RcodeServerFailure}
	}
	r.Authoritative = true
	h.tpl.capTTL(a.lname, r.Answer, r.Ns, r.Extra)
	if !chase || (a.Qtype != dns.TypeA && a.Qtype != dns.TypeAAAA) {
		return r
	}
	n := len(r.Answer)
	for _, rr := range r.Answer[:n] {
		c, ok := rr.(*dns.CNAME)
		if !ok {
			continue
		}
		t := question{Question: dns.Question{Name: c.Target, Qtype: a.Qtype, Qclass: a.Qclass}, lname: lowerFQDN(c.Target), from: a.from}
		td := decide(h, h.zone(), t.Qtype, t.Qclass, t.lname)
		var up Result
		if td.route == routeTemplate {
			up = h.templateAnswer(ctx, t, td, false)
		} else {
			up = h.resolve(ctx, t, td)
		}
		r.Answer = append(r.Answer, up.Answer...)
		r.Forwarded = r.Forwarded || up.Forwarded
		r.volatile = r.volatile || up.volatile
		r.deps = append(append(r.deps, t.lname), up.deps...)
	}
	return r
}

// capTTL lowers the TTLs of sections, records of one answer made for it,
// to the cap for lname.
func (t *templates) capTTL(lname string, sections ...[]dns.RR) {
	if t.maxTTL == nil {
		return
	}
	d, ok := t.maxTTL(lname)
	if !ok {
		return
	}
	limit := uint32(d / time.Second)
	for _, rrs := range sections {
		for _, rr := range rrs {
			if h := rr.Header(); h.Ttl > limit {
				h.Ttl = limit
			}
		}
	}
}
