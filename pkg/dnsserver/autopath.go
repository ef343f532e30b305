package dnsserver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// autopathExpander is server-side search expansion (KEP "DNS Autopath in
// PodSpec") for names under "search.<ns>.<zone>.ap.k8s.io".
type autopathExpander struct {
	code     uint16
	sourceIP bool
	zone     string // cluster zone without trailing dot
	exp      prometheus.Counter
	hits     *prometheus.CounterVec
	misses   prometheus.Counter
	formErr  prometheus.Counter
}

// WithAutopath answers names under the ap.k8s.io suffix by server-side
// search expansion: the search list comes from the EDNS0 local option with
// code (autopath.DefaultOptionCode when 0), or is derived from the name. Its
// metrics are registered on reg (nil: none).
func WithAutopath(code uint16, reg prometheus.Registerer) (Option, error) {
	if code == 0 {
		code = autopath.DefaultOptionCode
	}
	a := &autopathExpander{code: code,
		exp: prometheus.NewCounter(prometheus.CounterOpts{Name: "dnsconfigurer_dnsserver_autopath_expansions_total",
			Help: "Autopath queries expanded on the server."}),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dnsconfigurer_dnsserver_autopath_hits_total",
			Help: "Autopath expansions answered, by the position of the name that answered (0 = first search domain; the last position is the name itself)."}, []string{"position"}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{Name: "dnsconfigurer_dnsserver_autopath_misses_total",
			Help: "Autopath expansions where every name was NXDOMAIN."}),
		formErr: prometheus.NewCounter(prometheus.CounterOpts{Name: "dnsconfigurer_dnsserver_autopath_bad_options_total",
			Help: "Autopath queries rejected with FORMERR for an invalid search-list option."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{a.exp, a.hits, a.misses, a.formErr} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register autopath metrics: %w", err)
			}
		}
	}
	return func(h *Handler) {
		a.zone = strings.TrimSuffix(h.zoneName, ".")
		h.ap = a
	}, nil
}

// WithAutopathBySource also expands plain queries from known pod IPs (CoreDNS's
// "autopath @kubernetes"): a query for "<name>.<ns>.svc.<zone>" from a pod of
// namespace ns is answered for the first of "<name>.<each search>" and
// "<name>." that exists. It needs WithAutopath before it and pods verified.
// Known weakness: a pod IP reused by a pod of another namespace before the
// watch delivers the change expands with the old namespace's search list.
func WithAutopathBySource() Option {
	return func(h *Handler) {
		if h.ap != nil {
			h.ap.sourceIP = true
		}
	}
}

// bySource answers req from its source address when it is a first search
// query of a known pod; ok is false otherwise (the normal path answers).
func (a *autopathExpander) answerBySource(ctx context.Context, h *Handler, src net.Addr, req *dns.Msg, tcp bool) (*dns.Msg, bool) {
	if _, rcode := dnsmsg.Check(req); rcode != dns.RcodeSuccess {
		return nil, false
	}
	var ip netip.Addr
	switch a := src.(type) {
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	}
	z := h.zone()
	if z == nil || !ip.IsValid() {
		return nil, false
	}
	ns, ok := z.snap.PodNamespace(ip)
	if !ok {
		return nil, false
	}
	q := req.Question[0]
	suffix := "." + policy.NamespaceSearch(ns, a.zone) + "."
	if len(q.Name) <= len(suffix) || !strings.EqualFold(q.Name[len(q.Name)-len(suffix):], suffix) {
		return nil, false
	}
	base := q.Name[:len(q.Name)-len(suffix)] + "."
	r := a.search(ctx, h, q, base, policy.ClusterSearches(ns, a.zone, nil), z.ttl)
	if r.Rcode == dns.RcodeNameError {
		r.Ns = z.negative(lowerFQDN(q.Name))
	}
	// The first candidate is the asked name itself: no CNAME to itself.
	if len(r.Answer) > 0 {
		if c, isCNAME := r.Answer[0].(*dns.CNAME); isCNAME && strings.EqualFold(c.Target, q.Name) {
			r.Answer = r.Answer[1:]
		}
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = h.fwd != nil
	fill(m, r)
	return dnsmsg.Finish(req, m, tcp), true
}

// owns reports a name under the autopath suffix: such names are always
// answered here, never forwarded.
func (a *autopathExpander) owns(name string) bool {
	return len(name) >= len(autopath.Suffix) &&
		strings.EqualFold(name[len(name)-len(autopath.Suffix):], autopath.Suffix) &&
		(len(name) == len(autopath.Suffix) || name[len(name)-len(autopath.Suffix)-1] == '.')
}

// expand answers an autopath question: the first name of the search list
// (then the name itself) whose answer is not NXDOMAIN, behind a CNAME from
// the asked name.
func (a *autopathExpander) expand(ctx context.Context, h *Handler, req *dns.Msg) Result {
	q := req.Question[0]
	ttl := uint32(5)
	z := h.zone()
	if z != nil {
		ttl = z.ttl
	}
	neg := func() Result {
		return Result{Rcode: dns.RcodeNameError, Authoritative: true, Ns: []dns.RR{soaRR(autopath.Suffix, h.zoneName, ttl, 1)}}
	}
	n, ok := autopath.Parse(q.Name, a.zone)
	if !ok {
		return neg()
	}
	var searches []string
	found := false
	if opt := req.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if l, isLocal := o.(*dns.EDNS0_LOCAL); isLocal && l.Code == a.code {
				list, err := autopath.ParseOption(l.Data)
				if err != nil {
					a.formErr.Inc()
					h.log.DebugContext(ctx, "bad autopath option", "name", q.Name, "err", err)
					return Result{Rcode: dns.RcodeFormatError}
				}
				searches, found = list, true
				break
			}
		}
	}
	if !found {
		searches = policy.ClusterSearches(n.Namespace, a.zone, nil)
	}
	return a.search(ctx, h, q, n.Base, searches, ttl)
}

// search tries base under each search domain, then base itself, and answers
// with the first that is not NXDOMAIN behind a CNAME from q.Name.
func (a *autopathExpander) search(ctx context.Context, h *Handler, q dns.Question, base string, searches []string, ttl uint32) Result {
	a.exp.Inc()
	servfail := false
	forwarded := false
	for i, c := range autopath.Candidates(base, searches) {
		r := h.Resolve(ctx, dns.Question{Name: c, Qtype: q.Qtype, Qclass: q.Qclass})
		forwarded = forwarded || r.Forwarded
		switch r.Rcode {
		case dns.RcodeNameError:
			continue
		case dns.RcodeServerFailure:
			servfail = true
			continue
		}
		a.hits.WithLabelValues(strconv.Itoa(i)).Inc()
		cname := &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: c}
		ans := make([]dns.RR, 0, len(r.Answer)+1)
		ans = append(append(ans, cname), r.Answer...)
		return Result{Rcode: r.Rcode, Answer: ans, Ns: r.Ns, Extra: r.Extra, Authoritative: r.Authoritative, Forwarded: true}
	}
	a.misses.Inc()
	if servfail {
		return Result{Rcode: dns.RcodeServerFailure, Forwarded: forwarded}
	}
	return Result{Rcode: dns.RcodeNameError, Authoritative: true, Ns: []dns.RR{soaRR(autopath.Suffix, h.zoneName, ttl, 1)}}
}
