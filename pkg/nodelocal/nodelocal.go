package nodelocal

import (
	"container/list"
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
	// CacheBytes bounds the memory the cached answers hold (32 MiB): each
	// answer is kept packed and counts its size as allocated plus
	// EntryOverhead. The least recently used answers are dropped first; an
	// answer bigger than the whole bound is not cached.
	CacheBytes int64
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
	cache    map[key]*list.Element // of *entry
	lru      list.List             // front: most recently used
	bytes    int64                 // sum of the entries' cost
	inflight map[key]*call
}

// DefaultCacheBytes is Config.CacheBytes's default.
const DefaultCacheBytes = 32 << 20

// EntryOverhead is what a cached answer costs besides its packed bytes and
// its name: the map slot, the list element and the entry.
const EntryOverhead = 256

var _ dns.Handler = (*Handler)(nil)

type key struct {
	name   string // lowercase
	qtype  uint16
	qclass uint16
	do     bool
}

type entry struct {
	key     key
	wire    []byte // the packed reply, TTLs capped; never modified
	cost    int64
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
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultCacheBytes
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
		cache: map[key]*list.Element{}, inflight: map[key]*call{}}, nil
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
	if wire, age, hit := h.lookup(k, now); hit {
		up := new(dns.Msg)
		if err := up.Unpack(wire); err == nil {
			h.m.hits.Inc()
			return h.build(req, up, age, tcp, true)
		}
	}
	h.m.misses.Inc()
	up, err := h.resolve(ctx, k, q)
	if err != nil {
		h.log.Debug("upstream failed", "name", q.Name, "err", err)
		h.m.failures.Inc()
		return h.fail(req, dns.RcodeServerFailure, tcp)
	}
	return h.build(req, up, 0, tcp, false)
}

func (h *Handler) fail(req *dns.Msg, rcode int, tcp bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(req, rcode)
	m.RecursionAvailable = true
	return dnsmsg.Finish(req, m, tcp)
}

// lookup returns the packed reply cached for k and its age in seconds.
func (h *Handler) lookup(k key, now time.Time) ([]byte, uint32, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	el, ok := h.cache[k]
	if !ok {
		return nil, 0, false
	}
	e := el.Value.(*entry)
	if !now.Before(e.expires) {
		h.remove(el)
		return nil, 0, false
	}
	h.lru.MoveToFront(el)
	return e.wire, uint32(now.Sub(e.stored) / time.Second), true
}

// remove drops a cached entry (h.mu held).
func (h *Handler) remove(el *list.Element) {
	e := h.lru.Remove(el).(*entry)
	delete(h.cache, e.key)
	h.bytes -= e.cost
	h.m.bytes.Set(float64(h.bytes))
	h.m.entries.Set(float64(len(h.cache)))
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
	// Clients never see a TTL longer than the entry lives (nor the upstream's).
	secs := uint32(ttl / time.Second)
	for _, sec := range [][]dns.RR{r.Answer, r.Ns, r.Extra} {
		for _, rr := range sec {
			if rr.Header().Ttl > secs {
				rr.Header().Ttl = secs
			}
		}
	}
	compress := r.Compress
	r.Compress = true
	packed, err := r.Pack()
	r.Compress = compress
	if err != nil {
		return
	}
	wire := append(make([]byte, 0, len(packed)), packed...)
	cost := int64(allocSize(len(wire))+len(k.name)) + EntryOverhead
	if cost > h.cfg.CacheBytes {
		h.m.evictions.Inc()
		return
	}
	if el, ok := h.cache[k]; ok {
		h.remove(el)
	}
	for len(h.cache) > 0 && (len(h.cache) >= h.cfg.CacheSize || h.bytes+cost > h.cfg.CacheBytes) {
		h.remove(h.lru.Back())
		h.m.evictions.Inc()
	}
	e := &entry{key: k, wire: wire, cost: cost, stored: now, expires: now.Add(ttl)}
	h.cache[k] = h.lru.PushFront(e)
	h.bytes += cost
	h.m.bytes.Set(float64(h.bytes))
	h.m.entries.Set(float64(len(h.cache)))
}

// allocSize is an upper bound of the memory the Go runtime allocates for n
// bytes: small objects are rounded up to a size class (at most 12.5% more),
// large ones to whole 8 KiB pages.
func allocSize(n int) int {
	if n <= 32<<10 {
		return n + n/8 + 16
	}
	return (n + 8<<10 - 1) &^ (8<<10 - 1)
}

// build makes the client's reply from the upstream reply: the client's ID
// and question (in its case), TTLs aged, then our OPT when the client sent
// one and truncation to what it can receive (dnsmsg.Finish). The records of
// up are copied unless owned (up is then used up).
func (h *Handler) build(req, up *dns.Msg, age uint32, tcp, owned bool) *dns.Msg {
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
			c := rr
			if !owned {
				c = dns.Copy(rr)
			}
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

// CacheBytes is the memory the cached answers are accounted for (at most
// Config.CacheBytes).
func (h *Handler) CacheBytes() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bytes
}
