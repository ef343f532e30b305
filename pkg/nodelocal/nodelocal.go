package nodelocal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// Exchanger sends a query upstream (forward.Forwarder implements it).
type Exchanger interface {
	Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
}

// Config tunes the stage. Zero values take the defaults.
type Config struct {
	// ClusterDomain is the cluster zone of autopath names (default
	// v1alpha1.DefaultClusterDomain).
	ClusterDomain string
	// OptionCode is the EDNS0 local option carrying the search list (65001).
	OptionCode uint16
	// Cache configures the answer cache (pkg/dnscache; Server is set to
	// "nodelocal"). Zero values take dnscache's defaults, which are the
	// ServerConfiguration's: 30s and 5s TTL caps (kubeadm's `cache 30`, as
	// the cluster DNS), 32 MiB of answers and 8 MiB of denials;
	// serve-stale and prefetch off.
	Cache dnscache.Config
	// Timeout bounds one upstream exchange (default
	// v1alpha1.DefaultNodeLocalClusterTimeout, 3s: above the longest the
	// cluster DNS takes for a query; serve sets nodeLocal.clusterTimeout).
	Timeout time.Duration
	// HostSearches returns the node's host search domains, appended to
	// autopath search lists (nil: none).
	HostSearches func() []string
	// UDPAnswerLimit cuts an A or AAAA RRset of more than this many
	// records to this many in a UDP reply to a name the cluster DNS
	// answers itself (the cluster zone and autopath names), as the
	// cluster DNS cuts its own (v1alpha1 udpAnswerLimit,
	// dnsmsg.LimitAnswer); 0: off. The stage asks the cluster DNS over
	// TCP, whose answers are whole, so only this stage can cut them.
	UDPAnswerLimit int
	// Logger (default: discard).
	Logger *slog.Logger
	// Registerer for the metrics (default: none).
	Registerer prometheus.Registerer
}

// Handler is the node-local stage's dns.Handler.
type Handler struct {
	up    Exchanger
	cfg   Config
	log   *slog.Logger
	m     *metrics
	cache *dnscache.Cache
	zone  string        // the cluster zone, lowercase with a trailing dot
	cutN  atomic.Uint32 // replies cut to the UDP answer limit
}

var _ dns.Handler = (*Handler)(nil)

// New returns the stage forwarding to up.
func New(up Exchanger, cfg Config) (*Handler, error) {
	if up == nil {
		return nil, errors.New("nodelocal: upstream exchanger is nil")
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = v1alpha1.DefaultClusterDomain
	}
	if cfg.OptionCode == 0 {
		cfg.OptionCode = autopath.DefaultOptionCode
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = v1alpha1.DefaultNodeLocalClusterTimeout.Duration()
	}
	if cfg.HostSearches == nil {
		cfg.HostSearches = func() []string { return nil }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	h := &Handler{up: up, cfg: cfg, log: log.With("component", "nodelocal"), m: m, zone: dns.CanonicalName(cfg.ClusterDomain)}
	cc := cfg.Cache
	cc.Server, cc.Logger = "nodelocal", log
	h.cache, err = dnscache.New(forwarder{h}, cc)
	if err != nil {
		return nil, fmt.Errorf("nodelocal: cache: %w", err)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(h.cache); err != nil {
			return nil, fmt.Errorf("register nodelocal cache metrics: %w", err)
		}
	}
	return h, nil
}

// ServeDNS implements dns.Handler. A UDP reply made from a cached answer
// is kept with it in its finished wire form (dnscache.Keep), for AnswerWire.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	src := w.RemoteAddr()
	_, tcp := src.(*net.TCPAddr)
	// The pod's address: the forwarders share their slots per pod.
	reply, t := h.answer(context.Background(), req, tcp, dnsmsg.Origin{Client: dnsmsg.ClientAddr(src)})
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	b, err := reply.PackBuffer((*bp)[:cap(*bp)])
	if err != nil {
		h.log.Debug("pack reply", "remote", w.RemoteAddr().String(), "err", err)
		return
	}
	if cap(b) <= maxPooled {
		*bp = b
	}
	if !tcp {
		// Kept before the reply leaves: the client's next query finds
		// the wire form.
		h.cache.Keep(t, dnsmsg.Shape(req.IsEdns0()), b)
	}
	if _, err := w.Write(b); err != nil {
		h.log.Debug("write reply", "remote", w.RemoteAddr().String(), "err", err)
	}
}

// maxPooled is the largest packing buffer kept for the next reply (a UDP
// reply is at most dnsmsg.EDNSSize; TCP ones may be bigger).
const maxPooled = 4 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2<<10); return &b }}

// AnswerWire answers a UDP query from its wire form, without unpacking it,
// when it is a plain query (dnsmsg.ParseQuery) whose answer is cached and
// fresh, with the finished reply that ServeDNS kept for a query of its
// shape and its question name as sent: that reply with the query's ID, RD
// and CD bits and the TTLs aged, appended to dst[:0], the same bytes as
// ServeDNS would write. The hit is counted as ServeDNS counts it. It
// returns false for any other query, which ServeDNS then answers.
func (h *Handler) AnswerWire(dst, query []byte) ([]byte, bool) {
	q, ok := dnsmsg.ParseQuery(query)
	if !ok {
		return dst, false
	}
	b, ok := h.cache.AnswerWire(dst, q, q.Shape())
	if ok {
		h.m.hits.inc(q.Qtype)
	}
	return b, ok
}

// Answer builds the reply to req, truncated to what the client can receive
// (dnsmsg.Finish; tcp is whether it came over TCP).
func (h *Handler) Answer(ctx context.Context, req *dns.Msg, tcp bool) *dns.Msg {
	r, _ := h.answer(ctx, req, tcp, dnsmsg.Origin{})
	return r
}

// answer is Answer for a query of client o (the forwarders share their
// slots by o.Client), with the cache's ticket for a reply made from a
// cached answer.
func (h *Handler) answer(ctx context.Context, req *dns.Msg, tcp bool, o dnsmsg.Origin) (*dns.Msg, dnscache.Ticket) {
	if _, rcode := dnsmsg.Check(req); rcode != dns.RcodeSuccess {
		return h.fail(req, rcode, tcp), dnscache.Ticket{}
	}
	a, err := h.cache.AnswerTicket(ctx, req, o)
	r, src, t := a.Msg, a.Source, a.Ticket
	switch src {
	case dnscache.Hit:
		h.m.hits.inc(req.Question[0].Qtype)
	case dnscache.Coalesced:
		h.m.coalesced.Inc()
		h.m.misses.inc(req.Question[0].Qtype)
	default:
		h.m.misses.inc(req.Question[0].Qtype)
	}
	if err != nil {
		h.log.Debug("upstream failed", "name", req.Question[0].Name, "err", err)
		h.m.failures.Inc()
		return h.fail(req, dns.RcodeServerFailure, tcp), dnscache.Ticket{}
	}
	// The cache's reply has req's ID, question and RD and CD bits, and no
	// OPT; an uncached one may carry the upstream's question.
	r.Response = true
	r.Opcode = req.Opcode
	r.RecursionAvailable = true
	if len(r.Question) != 1 || r.Question[0] != req.Question[0] {
		r.Question = []dns.Question{req.Question[0]}
	}
	if h.limitUDP(r, tcp) {
		// Not kept: a kept reply would serve one window until it expires.
		t = dnscache.Ticket{}
	}
	return dnsmsg.Finish(req, r, tcp), t
}

// limitUDP cuts r's answer to the UDP answer limit when it came over UDP
// for a name the cluster DNS answers itself, and reports whether it did.
func (h *Handler) limitUDP(r *dns.Msg, tcp bool) bool {
	n := h.cfg.UDPAnswerLimit
	if tcp || n <= 0 || len(r.Answer) <= n {
		return false
	}
	name := dns.CanonicalName(r.Question[0].Name)
	if !dns.IsSubDomain(h.zone, name) && !dns.IsSubDomain(autopath.Suffix, name) {
		return false
	}
	cut := dnsmsg.LimitAnswer(r.Answer, n, h.cutN.Add(1))
	if len(cut) == len(r.Answer) {
		return false
	}
	r.Answer = cut
	return true
}

func (h *Handler) fail(req *dns.Msg, rcode int, tcp bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(req, rcode)
	m.RecursionAvailable = true
	return dnsmsg.Finish(req, m, tcp)
}

// forwarder is the cache's next step: the query made afresh, with the
// autopath option for autopath names, sent through h.up.
type forwarder struct{ h *Handler }

func (f forwarder) Exchange(ctx context.Context, req *dns.Msg) (*dns.Msg, error) {
	return f.Forward(ctx, req, dnsmsg.Origin{})
}

// Forward is Exchange on behalf of o (forward.Forwarding).
func (f forwarder) Forward(ctx context.Context, req *dns.Msg, o dnsmsg.Origin) (*dns.Msg, error) {
	h := f.h
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	q := req.Question[0]
	do := false
	if opt := req.IsEdns0(); opt != nil {
		do = opt.Do()
	}
	m := dnsmsg.Query(q, do)
	if n, ok := policy.ParseAutopath(q.Name, h.cfg.ClusterDomain); ok {
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: h.cfg.OptionCode,
			Data: []byte(autopath.OptionValue(n.Namespace, h.cfg.ClusterDomain, h.cfg.HostSearches()))})
		h.m.options.Inc()
	}
	// The reply's OPT (and with it any echo of the option) is dropped by
	// the cache; the client gets its own OPT from Answer.
	return forward.Ask(ctx, h.up, m, o)
}

// CheckLoop lets the cache ask h.up whether req came back round a
// forwarding loop (dnscache.LoopChecker): the query sent upstream is made
// afresh without the client's options, but req still carries the loop
// markers it came with.
func (f forwarder) CheckLoop(req *dns.Msg) error {
	if lc, ok := f.h.up.(dnscache.LoopChecker); ok {
		return lc.CheckLoop(req)
	}
	return nil
}

// Len is the number of cached answers.
func (h *Handler) Len() int {
	return h.cache.Len(dnscache.Success) + h.cache.Len(dnscache.Denial)
}

// CacheBytes is the memory the cached answers are accounted for (at most
// Config.Cache.SuccessBytes + DenialBytes).
func (h *Handler) CacheBytes() int64 {
	return h.cache.Bytes(dnscache.Success) + h.cache.Bytes(dnscache.Denial)
}

// Close stops the cache's background refreshes (prefetch) and waits for
// them.
func (h *Handler) Close() { h.cache.Close() }
