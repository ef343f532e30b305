package nodelocal

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// Exchanger sends a query upstream (dnsserver.Forwarder implements it).
type Exchanger interface {
	Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
}

// Config tunes the stage. Zero values take the defaults.
type Config struct {
	// ClusterDomain is the cluster zone of autopath names ("cluster.local").
	ClusterDomain string
	// OptionCode is the EDNS0 local option carrying the search list (65001).
	OptionCode uint16
	// MaxTTL caps how long a positive answer is cached (30s).
	MaxTTL time.Duration
	// MaxNegativeTTL caps how long NXDOMAIN and NODATA are cached (5s).
	MaxNegativeTTL time.Duration
	// CacheSize is the most answers kept (10000).
	CacheSize int
	// Timeout bounds one upstream exchange (2s).
	Timeout time.Duration
	// HostSearches returns the node's host search domains, appended to
	// autopath search lists (nil: none).
	HostSearches func() []string
	// Logger (default: discard).
	Logger *slog.Logger
	// Registerer for the metrics (default: none).
	Registerer prometheus.Registerer
}

// Handler is the node-local stage's dns.Handler.
type Handler struct {
	up  Exchanger
	cfg Config
	log *slog.Logger
	m   *metrics

	mu       sync.Mutex
	cache    map[key]entry
	inflight map[key]*call
}

var _ dns.Handler = (*Handler)(nil)

type key struct {
	name   string // lowercase
	qtype  uint16
	qclass uint16
	do     bool
}

type entry struct {
	reply   *dns.Msg // never modified after it is stored
	stored  time.Time
	expires time.Time
}

type call struct {
	done  chan struct{}
	reply *dns.Msg
	err   error
}

// New returns the stage forwarding to up.
func New(up Exchanger, cfg Config) (*Handler, error) {
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.OptionCode == 0 {
		cfg.OptionCode = autopath.DefaultOptionCode
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = 30 * time.Second
	}
	if cfg.MaxNegativeTTL <= 0 {
		cfg.MaxNegativeTTL = 5 * time.Second
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 10000
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
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
	return &Handler{up: up, cfg: cfg, log: log.With("component", "nodelocal"), m: m,
		cache: map[key]entry{}, inflight: map[key]*call{}}, nil
}

// ServeDNS implements dns.Handler.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	reply := h.Answer(context.Background(), req, tcp)
	if err := w.WriteMsg(reply); err != nil {
		h.log.Debug("write reply", "remote", w.RemoteAddr().String(), "err", err)
	}
}

// Answer builds the reply to req, truncated to what the client can receive
// (dnsmsg.Finish; tcp is whether it came over TCP).
func (h *Handler) Answer(ctx context.Context, req *dns.Msg, tcp bool) *dns.Msg {
	opt, rcode := dnsmsg.Check(req)
	if rcode != dns.RcodeSuccess {
		return h.fail(req, rcode, tcp)
	}
	q := req.Question[0]
	k := key{name: strings.ToLower(q.Name), qtype: q.Qtype, qclass: q.Qclass, do: opt != nil && opt.Do()}
	now := time.Now()
	up, age, hit := h.lookup(k, now)
	if hit {
		h.m.hits.Inc()
	} else {
		h.m.misses.Inc()
		var err error
		up, err = h.resolve(ctx, k, q)
		if err != nil {
			h.log.Debug("upstream failed", "name", q.Name, "err", err)
			h.m.failures.Inc()
			return h.fail(req, dns.RcodeServerFailure, tcp)
		}
	}
	return h.build(req, up, age, tcp)
}

func (h *Handler) fail(req *dns.Msg, rcode int, tcp bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(req, rcode)
	m.RecursionAvailable = true
	return dnsmsg.Finish(req, m, tcp)
}

func (h *Handler) lookup(k key, now time.Time) (*dns.Msg, uint32, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.cache[k]
	if !ok {
		return nil, 0, false
	}
	if !now.Before(e.expires) {
		delete(h.cache, k)
		return nil, 0, false
	}
	return e.reply, uint32(now.Sub(e.stored) / time.Second), true
}

// resolve forwards the question once for all concurrent askers.
func (h *Handler) resolve(ctx context.Context, k key, q dns.Question) (*dns.Msg, error) {
	h.mu.Lock()
	if c, ok := h.inflight[k]; ok {
		h.mu.Unlock()
		h.m.coalesced.Inc()
		select {
		case <-c.done:
			return c.reply, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &call{done: make(chan struct{})}
	h.inflight[k] = c
	h.mu.Unlock()

	c.reply, c.err = h.forward(ctx, q, k.do)
	h.mu.Lock()
	delete(h.inflight, k)
	if c.err == nil {
		h.store(k, c.reply, time.Now())
	}
	h.mu.Unlock()
	close(c.done)
	return c.reply, c.err
}

func (h *Handler) forward(ctx context.Context, q dns.Question, do bool) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	m := dnsmsg.Query(q, do)
	if n, ok := autopath.Parse(q.Name, h.cfg.ClusterDomain); ok {
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: h.cfg.OptionCode,
			Data: []byte(autopath.OptionValue(n.Namespace, h.cfg.ClusterDomain, h.cfg.HostSearches()))})
		h.m.options.Inc()
	}
	r, err := h.up.Exchange(ctx, m)
	if err != nil {
		return nil, err
	}
	// The reply's OPT (and with it any echo of the option) is dropped; the
	// client gets its own OPT from build.
	r.Extra = dnsmsg.WithoutOPT(r.Extra)
	return r, nil
}

// store caches r (h.mu held) for as long as its TTLs and the caps allow.
func (h *Handler) store(k key, r *dns.Msg, now time.Time) {
	var ttl time.Duration
	switch {
	case r.Truncated:
		return
	case r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0:
		ttl = h.cfg.MaxTTL
		for _, rr := range r.Answer {
			ttl = min(ttl, time.Duration(rr.Header().Ttl)*time.Second)
		}
	case r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeNameError:
		ttl = h.cfg.MaxNegativeTTL
		for _, rr := range r.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				ttl = min(ttl, time.Duration(min(soa.Hdr.Ttl, soa.Minttl))*time.Second)
			}
		}
	default:
		return // SERVFAIL, REFUSED, ...: never cached
	}
	if ttl <= 0 {
		return
	}
	if len(h.cache) >= h.cfg.CacheSize {
		// Drop expired entries, or any entry when none has expired yet.
		n := 0
		for ck, e := range h.cache {
			if !now.Before(e.expires) || n < len(h.cache)/10+1 {
				delete(h.cache, ck)
				n++
			}
		}
	}
	// Clients never see a TTL longer than the entry lives (nor the upstream's).
	secs := uint32(ttl / time.Second)
	for _, sec := range [][]dns.RR{r.Answer, r.Ns, r.Extra} {
		for _, rr := range sec {
			if rr.Header().Ttl > secs {
				rr.Header().Ttl = secs
			}
		}
	}
	h.cache[k] = entry{reply: r, stored: now, expires: now.Add(ttl)}
}

// build makes the client's reply from the upstream reply: the client's ID
// and question (in its case), TTLs aged, then our OPT when the client sent
// one and truncation to what it can receive (dnsmsg.Finish).
func (h *Handler) build(req, up *dns.Msg, age uint32, tcp bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Rcode = up.Rcode
	m.RecursionAvailable = true
	m.Authoritative = up.Authoritative
	m.AuthenticatedData = up.AuthenticatedData
	qname := req.Question[0].Name
	copyRRs := func(in []dns.RR) []dns.RR {
		if len(in) == 0 {
			return nil
		}
		out := make([]dns.RR, len(in))
		for i, rr := range in {
			c := dns.Copy(rr)
			hdr := c.Header()
			if hdr.Ttl > age {
				hdr.Ttl -= age
			} else {
				hdr.Ttl = 0
			}
			if strings.EqualFold(hdr.Name, qname) {
				hdr.Name = qname
			}
			out[i] = c
		}
		return out
	}
	m.Answer = copyRRs(up.Answer)
	m.Ns = copyRRs(up.Ns)
	m.Extra = copyRRs(up.Extra)
	return dnsmsg.Finish(req, m, tcp)
}

// Len is the number of cached answers.
func (h *Handler) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cache)
}
