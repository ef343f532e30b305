package clusterdns

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// Bounds of one autopath expansion, whatever the search list: at most
// autopathMaxForwards candidates are asked upstream (the others are answered
// from the zone, or not tried), and the expansion ends within
// autopathDeadline (2.5 s: below node-local's timeout toward the cluster
// DNS, so a slow name through autopath is this server's SERVFAIL, never
// node-local's timeout; the rule is api/v1alpha1's).
const (
	autopathMaxForwards = 8
	autopathDeadline    = v1alpha1.AutopathDeadline
)

// candidateResolver is the zone side of autopath: the one method the
// expander calls. The Handler implements it.
type candidateResolver interface {
	// resolveCandidate answers q as Resolve does, for the client at from
	// placed at c: with the variant of its name for c, and asking upstream
	// on behalf of from. With localOnly it answers only what needs no
	// upstream, and reports upstream true, having asked nothing, for the
	// rest.
	resolveCandidate(ctx context.Context, q dns.Question, from candidateClient, localOnly bool) (r Result, upstream bool)
}

// candidateClient is who autopath expands a query for: its Origin and its
// place.
type candidateClient struct {
	from dnsmsg.Origin
	topo topology.Client
}

// autopathExpander is server-side search expansion (KEP "DNS Autopath in
// PodSpec") for names under "search.<ns>.<zone>.ap.k8s.io". It reaches the
// zone through a candidateResolver only; the handler builds the messages.
type autopathExpander struct {
	code     uint16
	sourceIP bool
	zone     string // cluster zone without trailing dot
	nsTail   string // what follows a namespace in a first search step: ".svc.<zone>."
	log      *slog.Logger
	exp      prometheus.Counter
	hits     *prometheus.CounterVec
	misses   prometheus.Counter
	formErr  prometheus.Counter
	cut      prometheus.Counter
}

// WithAutopath answers names under the ap.k8s.io suffix by server-side
// search expansion: the search list comes from the EDNS0 local option with
// code (autopath.DefaultOptionCode when 0), or is derived from the name. Its
// metrics are registered on reg (nil: none).
func WithAutopath(code uint16, reg prometheus.Registerer) (Option, error) {
	if code == 0 {
		code = autopath.DefaultOptionCode
	}
	a, err := prom.New(reg, "dnsserver", func(s *prom.Set) *autopathExpander {
		return &autopathExpander{code: code,
			exp: s.Counter("autopath_expansions_total", "Autopath queries expanded on the server."),
			hits: s.CounterVec("autopath_hits_total",
				"Autopath expansions answered, by the position of the name that answered (0 = first search domain; the last position is the name itself).",
				"position"),
			misses:  s.Counter("autopath_misses_total", "Autopath expansions where every name was NXDOMAIN."),
			formErr: s.Counter("autopath_bad_options_total", "Autopath queries rejected with FORMERR for an invalid search-list option."),
			cut: s.Counter("autopath_truncated_total",
				"Autopath expansions that left search domains untried because more than 8 names needed forwarding."),
		}
	})
	if err != nil {
		return nil, fmt.Errorf("register autopath metrics: %w", err)
	}
	return func(h *Handler) {
		a.zone = strings.TrimSuffix(h.zoneName, ".")
		a.nsTail = policy.NamespaceSearch("", a.zone) + "."
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

// firstStep returns the namespace of the pod at ip when lname, asked by
// it, is a first search step "<name>.<ns>.svc.<zone>." that autopath
// answers by source (WithAutopathBySource); false otherwise.
func (a *autopathExpander) firstStep(z *zone, ip netip.Addr, lname string) (string, bool) {
	if z == nil || !ip.IsValid() {
		return "", false
	}
	ns, ok := z.snap.PodNamespace(ip)
	if !ok {
		return "", false
	}
	n := len(lname) - len(a.nsTail) - len(ns) // where "<ns>" starts
	if n < 2 || !strings.HasSuffix(lname, a.nsTail) || lname[n-1] != '.' || lname[n:n+len(ns)] != ns {
		return "", false
	}
	return ns, true
}

// bySource expands q, a first search step of a pod (firstStep), each
// candidate with its variant for the pod c. ttl is the zone's.
func (a *autopathExpander) bySource(ctx context.Context, zr candidateResolver, qq question, c client, ttl uint32) Result {
	q := qq.Question
	cut := len(c.ns) + len(a.nsTail) // "<ns>.svc.<zone>." and the dot before
	base := q.Name[:len(q.Name)-cut]
	r := a.search(ctx, zr, q, base, policy.ClusterSearches(c.ns, a.zone, nil), candidateClient{qq.from, c.topo}, ttl)
	// The first candidate is the asked name itself: no CNAME to itself.
	if len(r.Answer) > 0 {
		if cn, isCNAME := r.Answer[0].(*dns.CNAME); isCNAME && strings.EqualFold(cn.Target, q.Name) {
			r.Answer = r.Answer[1:]
		}
	}
	return r
}

// expand answers an autopath question: the first name of the search list
// (then the name itself) whose answer is not NXDOMAIN, behind a CNAME from
// the asked name, each candidate with its variant for client c. ttl is
// the zone's.
func (a *autopathExpander) expand(ctx context.Context, zr candidateResolver, req *dns.Msg, from dnsmsg.Origin, c topology.Client, ttl uint32) Result {
	q := req.Question[0]
	n, ok := policy.ParseAutopath(q.Name, a.zone)
	if !ok {
		return a.negative(ttl)
	}
	var searches []string
	found := false
	if opt := req.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if l, isLocal := o.(*dns.EDNS0_LOCAL); isLocal && l.Code == a.code {
				list, err := autopath.ParseOption(l.Data)
				if err != nil {
					a.formErr.Inc()
					a.log.DebugContext(ctx, "bad autopath option", "name", q.Name, "err", err)
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
	return a.search(ctx, zr, q, n.Base, searches, candidateClient{from, c}, ttl)
}

// negative is an autopath name's NXDOMAIN: the autopath suffix's SOA.
func (a *autopathExpander) negative(ttl uint32) Result {
	return Result{Rcode: dns.RcodeNameError, Authoritative: true, Ns: []dns.RR{soaRR(autopath.Suffix, a.zone+".", ttl, 1)}}
}

// How search gets the answer of one candidate.
const (
	candLocal   = iota // from the zone, inline (free)
	candForward        // costs an upstream query: asked in parallel
	candSkip           // over the budget: not tried
)

// search tries base under each search domain, then base itself, and answers
// with the first that is not NXDOMAIN behind a CNAME from q.Name.
//
// The work is bounded: candidates answered from the zone cost nothing and
// are resolved first, in order, up to the first that answers; of the
// candidates before it that cost an upstream query (names outside the zone,
// and ExternalNames that point outside it), the name itself and the first
// others up to autopathMaxForwards in all are asked in parallel, the rest
// are not tried, as if the search list ended before them. The answer is
// then chosen in search-list order, so it is the one asking the same
// candidates one after another gives. The whole expansion ends within
// autopathDeadline; a candidate still unanswered then counts as SERVFAIL.
func (a *autopathExpander) search(ctx context.Context, zr candidateResolver, q dns.Question, base string, searches []string, client candidateClient, ttl uint32) Result {
	a.exp.Inc()
	ctx, cancel := context.WithTimeout(ctx, autopathDeadline)
	defer cancel()
	cands := autopath.Candidates(base, searches)
	qs := make([]dns.Question, len(cands))
	plan := make([]int, len(cands))
	local := make([]Result, len(cands))
	end := len(cands) // candidates from end on are never needed
	for i, c := range cands {
		qs[i] = dns.Question{Name: c, Qtype: q.Qtype, Qclass: q.Qclass}
		r, upstream := zr.resolveCandidate(ctx, qs[i], client, true)
		if upstream {
			plan[i] = candForward
			continue
		}
		local[i] = r
		if rc := local[i].Rcode; rc != dns.RcodeNameError && rc != dns.RcodeServerFailure {
			end = i + 1
			break
		}
	}
	budget := autopathMaxForwards
	if last := len(cands) - 1; end == len(cands) && plan[last] == candForward {
		budget-- // the name itself is always tried
	}
	pending := make([]chan Result, end)
	for i := range end {
		if plan[i] != candForward {
			continue
		}
		if i < len(cands)-1 {
			if budget == 0 {
				plan[i] = candSkip
				continue
			}
			budget--
		}
		ch := make(chan Result, 1)
		pending[i] = ch
		go func(q dns.Question) {
			r, _ := zr.resolveCandidate(ctx, q, client, false)
			ch <- r
		}(qs[i])
	}
	if slices.Contains(plan[:end], candSkip) {
		a.cut.Inc()
	}

	servfail := false
	forwarded := false
	for i := range end {
		var r Result
		switch plan[i] {
		case candSkip:
			continue
		case candLocal:
			r = local[i]
		case candForward:
			select {
			case r = <-pending[i]:
			case <-ctx.Done():
				r = Result{Rcode: dns.RcodeServerFailure, Forwarded: true}
			}
		}
		forwarded = forwarded || r.Forwarded
		switch r.Rcode {
		case dns.RcodeNameError:
			continue
		case dns.RcodeServerFailure:
			servfail = true
			continue
		}
		a.hits.WithLabelValues(strconv.Itoa(i)).Inc()
		cname := &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: cands[i]}
		ans := make([]dns.RR, 0, len(r.Answer)+1)
		ans = append(append(ans, cname), r.Answer...)
		return Result{Rcode: r.Rcode, Answer: ans, Ns: r.Ns, Extra: r.Extra, Authoritative: r.Authoritative, Forwarded: true}
	}
	a.misses.Inc()
	if servfail {
		return Result{Rcode: dns.RcodeServerFailure, Forwarded: forwarded}
	}
	return a.negative(ttl)
}

// resolveCandidate implements candidateResolver, autopath's one door to the
// zone: Resolve, or with localOnly only what asks no upstream. Each
// candidate is rewritten as the client's own question for it would be.
func (h *Handler) resolveCandidate(ctx context.Context, q dns.Question, c candidateClient, localOnly bool) (Result, bool) {
	asked := q.Name
	failed := func(err error) (Result, bool) { // a rewrite made an invalid name
		h.log.DebugContext(ctx, "rewrite", "name", asked, "err", err)
		return Result{Rcode: dns.RcodeServerFailure}, false
	}
	z := h.zone()
	a := question{Question: q, lname: lowerFQDN(q.Name), from: c.from}
	d := decide(h, z, q.Qtype, q.Qclass, a.lname)
	var rev *reversal
	if d.rewrite {
		rv, err := h.rw.rewrite(a.lname)
		if err != nil {
			return failed(err)
		}
		if rv != nil {
			a.Name, a.lname, rev = rv.name(), rv.name(), rv
			d = decide(h, z, q.Qtype, q.Qclass, a.lname)
		}
	}
	if localOnly && h.costsUpstream(a, d) {
		return Result{}, true
	}
	if d.route == routeZone {
		a.variant = d.z.variantFor(a.lname, c.topo)
	}
	r := h.resolve(ctx, a, d)
	if rev != nil {
		var err error
		if r, err = rev.result(r); err != nil {
			return failed(err)
		}
	}
	return r, false
}

// costsUpstream reports whether resolving q as d says asks an upstream: a
// name the handler forwards, or a zone name whose CNAME chain
// (ExternalName) leaves the zone (Resolve's chase).
func (h *Handler) costsUpstream(q question, d decision) bool {
	switch {
	case h.fwd == nil:
		return false
	case d.route == routeForward || d.route == routeAutopath:
		return true
	case d.route != routeZone || q.Qtype == dns.TypeCNAME || q.Qtype == dns.TypeANY:
		return false
	}
	name := q.lname
	for range maxChase + 1 {
		n, ok := d.z.snap.Lookup(name)
		if !ok || n.CNAME() == "" {
			return false
		}
		if !inZone(n.CNAME(), d.z.name) || delegated(h, n.CNAME()) {
			return true
		}
		name = n.CNAME()
	}
	return false
}

// autopathTTL is the TTL of autopath's CNAME and SOA: the zone's, or 5 s
// before the first sync.
func (h *Handler) autopathTTL() uint32 {
	if z := h.zone(); z != nil {
		return z.ttl
	}
	return 5
}
