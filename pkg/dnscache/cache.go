package dnscache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// Exchanger answers a query: the step after the cache (a forwarder).
type Exchanger interface {
	Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
}

// LoopChecker is implemented by a next step that recognises a query that
// went round a forwarding loop back to it (pkg/forward's Forwarder and
// Router): its error for such a query, nil for the others. The cache asks it
// before a miss, so that the query that came back fails at once instead of
// waiting for the identical query in flight, its own one lap earlier, until
// the timeout.
type LoopChecker interface {
	CheckLoop(m *dns.Msg) error
}

// Defaults of Config's zero fields: the ServerConfiguration's cache
// defaults (api/v1alpha1).
var (
	DefaultMaxTTL         = v1alpha1.DefaultMaxTTL.Duration()
	DefaultMaxNegativeTTL = v1alpha1.DefaultMaxNegativeTTL.Duration()
	DefaultStaleTTL       = v1alpha1.DefaultStaleTTL.Duration()
	DefaultPrefetchWindow = v1alpha1.DefaultPrefetchWindow.Duration()
)

// Byte defaults of Config, constants for serve's flags; test/apidefaults
// ties them to v1alpha1.DefaultSuccessBytes and DefaultDenialBytes.
const (
	DefaultSuccessBytes       = 32 << 20
	DefaultDenialBytes        = 8 << 20
	DefaultPrefetchPercentage = v1alpha1.DefaultPrefetchPercentage
)

// EntryOverhead is what a cached answer costs besides its packed bytes and
// its name: the map slot, the entry and its list links.
const EntryOverhead = 256

// MaxPrefetches is the most background refreshes running at once; a popular
// entry due for one while they are all busy is refreshed on a later hit or
// asked again when it expires.
const MaxPrefetches = 4

// MaxFlights is the most distinct questions whose misses are coalesced at
// once; a miss beyond it asks next on its own.
const MaxFlights = 4096

// prefetchTimeout bounds one background refresh (next has its own timeout,
// usually shorter).
const prefetchTimeout = 5 * time.Second

// Config tunes a Cache. Zero values take the defaults.
type Config struct {
	// SuccessBytes bounds the memory held by positive answers (32 MiB),
	// DenialBytes that held by NXDOMAIN and NODATA answers (8 MiB). Each
	// answer is kept packed and counts its size as the runtime allocates
	// it, its name and EntryOverhead; the least recently used answer of the
	// same kind is dropped first, so denials never evict successes. An
	// answer bigger than its whole capacity is returned and not cached.
	SuccessBytes, DenialBytes int64
	// MaxEntries bounds the number of answers of each kind (0: only the
	// bytes bound them).
	MaxEntries int
	// MaxTTL and MinTTL bound how long a positive answer is cached (30 s
	// and none): its lifetime is the smallest TTL of its records, raised to
	// MinTTL and capped at MaxTTL, and no record is served with a TTL
	// longer than that. A lifetime under 1 s is not cached, so a MaxTTL
	// under 1 s turns caching of that kind off.
	MaxTTL, MinTTL time.Duration
	// MaxNegativeTTL and MinNegativeTTL bound how long a denial is cached
	// (5 s and none); its TTL is min(SOA TTL, SOA MINIMUM) (RFC 2308
	// section 5). A denial without an SOA is not cached.
	MaxNegativeTTL, MinNegativeTTL time.Duration
	// ServeStale is how long past its expiry an answer may still be served
	// when next fails, with an error, SERVFAIL or REFUSED (RFC 8767; 0: off,
	// and expired answers are dropped). A stale answer is served with every
	// TTL set to StaleTTL (30 s), and for StaleTTL next is not asked again
	// for it (RFC 8767's failure recheck timer).
	ServeStale, StaleTTL time.Duration
	// Prefetch refreshes popular answers in the background before they
	// expire (off unless Prefetch.Amount > 0).
	Prefetch Prefetch
	// Zones set the TTL bounds, stale serving and prefetch of the names
	// under a zone apart (the longest zone a name is under wins), or turn
	// caching off there: CoreDNS's cache of one server block. The
	// capacities stay shared.
	Zones []Zone
	// Server is the const label "server" of the metrics, so that several
	// caches share one registry.
	Server string
	// Logger (default: discard).
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// Prefetch configures background refreshes (CoreDNS cache's prefetch).
type Prefetch struct {
	// Amount is how many times an answer must be asked within Window to
	// be refreshed (0: never).
	Amount int
	// Window is the period the asks are counted over (1 min).
	Window time.Duration
	// Percentage: an answer is refreshed when its remaining TTL drops under
	// Percentage % of its lifetime, or to 1 s (10; 10 to 90).
	Percentage int
}

// Zone is the cache policy of the names under Zone. A zero field takes
// the default a Config's would (not the Config's value): a zone's policy
// is whole, as a CoreDNS server block's cache is.
type Zone struct {
	// Zone is a domain name ("corp.example"), not the root.
	Zone string
	// Off: answers under the zone are not cached (a CoreDNS server block
	// without cache).
	Off                            bool
	MaxTTL, MinTTL                 time.Duration
	MaxNegativeTTL, MinNegativeTTL time.Duration
	ServeStale, StaleTTL           time.Duration
	Prefetch                       Prefetch
}

// policy is what a cached answer's zone says (the Config's, or a Zone's
// with the Config's values filled in).
type policy struct {
	off                            bool
	maxTTL, minTTL                 time.Duration
	maxNegativeTTL, minNegativeTTL time.Duration
	serveStale, staleTTL           time.Duration
	prefetch                       Prefetch
}

// zonePolicy is a Zone's policy and the suffix that picks it.
type zonePolicy struct {
	zone string // lower case, FQDN
	p    *policy
}

// Kind is the kind of a cached answer.
type Kind uint8

const (
	// Success is an answer with records (NOERROR).
	Success Kind = iota
	// Denial is NXDOMAIN or NODATA (NOERROR without answer records).
	Denial
	// Uncached is anything else: errors, SERVFAIL, REFUSED, other rcodes,
	// truncated replies and replies to another question.
	Uncached
)

var kindNames = [...]string{"success", "denial", "other"}

func (k Kind) String() string { return kindNames[k] }

// Source says where an answer came from.
type Source uint8

const (
	// Miss: asked next.
	Miss Source = iota
	// Hit: from the cache.
	Hit
	// Coalesced: the answer of an identical query already in flight.
	Coalesced
	// Stale: an expired answer served because next failed (RFC 8767).
	Stale
)

func (s Source) String() string {
	return [...]string{"miss", "hit", "coalesced", "stale"}[s]
}

// Cache is a byte-bounded cache of packed answers in front of an Exchanger.
// It is safe for concurrent use.
type Cache struct {
	next  Exchanger
	loops LoopChecker // next's, or nil
	cfg   Config
	// pol is the Config's policy; zones the Zones', longest first.
	pol   *policy
	zones []zonePolicy
	log   *slog.Logger
	now   func() time.Time // the clock; tests replace it
	epoch time.Time
	base  context.Context // of the prefetches, cancelled by Close
	stop  context.CancelFunc
	wg    sync.WaitGroup
	desc  descs

	mu          sync.Mutex
	items       map[key]*entry
	kinds       [2]lru
	flights     map[key]*flight
	prefetching int
	closed      bool

	hits, misses [3]atomic.Uint64 // by Kind (hits: Success, Denial)
	stale        atomic.Uint64
	prefetches   atomic.Uint64
	coalesced    atomic.Uint64
}

// key is what an answer is cached and coalesced under. RD is part of it:
// the next step answers a query without RD from what it holds (a
// recursive upstream's REFUSED, or an empty NOERROR), which must never
// reach a client that asked for recursion (issue 27 item 4).
type key struct {
	name       string // lowercase
	qtype      uint16
	qclass     uint16
	do, cd, rd bool
}

// entry is a cached answer. Times are nanoseconds since Cache.epoch.
type entry struct {
	key        key
	kind       Kind
	prefetch   bool // a refresh is running
	hits       uint32
	ttl        uint32          // lifetime, seconds
	wire       []byte          // the packed reply, TTLs capped, no OPT; never modified
	forms      [MaxForms]*form // the callers' finished replies (Keep), nil-terminated
	cost       int64           // with the forms'
	stored     int64
	expires    int64
	window     int64   // start of the prefetch counting window
	retry      int64   // stale: next is not asked before this
	pol        *policy // its zone's
	prev, next *entry
}

// lru is the list of one kind's entries, most recently used first.
type lru struct {
	root     entry // sentinel
	n        int
	bytes    int64
	capacity int64
	evicted  uint64
}

type flight struct {
	ctx  context.Context // the leader's
	done chan struct{}
	res  result
}

// result is next's answer to a question, shared by the callers of a flight:
// the cached (or cacheable) reply packed, or next's reply (read only).
type result struct {
	wire   []byte
	msg    *dns.Msg
	err    error
	kind   Kind
	failed bool // an error, SERVFAIL or REFUSED: stale answers may be served
}

// New returns a cache in front of next.
func New(next Exchanger, cfg Config) (*Cache, error) {
	if next == nil {
		return nil, errors.New("dnscache: next exchanger is nil")
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	c := &Cache{next: next, cfg: cfg, log: log.With("component", "dnscache", "server", cfg.Server), now: now,
		items: map[key]*entry{}, flights: map[key]*flight{}, desc: newDescs(cfg.Server)}
	c.loops, _ = next.(LoopChecker)
	c.epoch = c.now()
	c.base, c.stop = context.WithCancel(context.Background())
	for i := range c.kinds {
		l := &c.kinds[i]
		l.root.prev, l.root.next = &l.root, &l.root
	}
	c.kinds[Success].capacity = cfg.SuccessBytes
	c.kinds[Denial].capacity = cfg.DenialBytes
	c.pol = &policy{maxTTL: cfg.MaxTTL, minTTL: cfg.MinTTL, maxNegativeTTL: cfg.MaxNegativeTTL, minNegativeTTL: cfg.MinNegativeTTL,
		serveStale: cfg.ServeStale, staleTTL: cfg.StaleTTL, prefetch: cfg.Prefetch}
	for _, z := range cfg.Zones {
		zp, err := c.zone(z)
		if err != nil {
			return nil, err
		}
		c.zones = append(c.zones, zp)
	}
	sort.SliceStable(c.zones, func(i, j int) bool { return len(c.zones[i].zone) > len(c.zones[j].zone) })
	return c, nil
}

// zone is z's policy: its values, with the defaults of a Config for the
// ones unset (not the Config's own values), checked as a Config's are.
func (c *Cache) zone(z Zone) (zonePolicy, error) {
	name := strings.ToLower(dns.Fqdn(z.Zone))
	if _, ok := dns.IsDomainName(name); !ok || name == "." {
		return zonePolicy{}, fmt.Errorf("dnscache: zone %q: not a domain name below the root", z.Zone)
	}
	cfg := Config{SuccessBytes: 1, DenialBytes: 1, MaxTTL: z.MaxTTL, MinTTL: z.MinTTL, MaxNegativeTTL: z.MaxNegativeTTL,
		MinNegativeTTL: z.MinNegativeTTL, ServeStale: z.ServeStale, StaleTTL: z.StaleTTL, Prefetch: z.Prefetch}
	if err := cfg.defaults(); err != nil {
		return zonePolicy{}, fmt.Errorf("zone %s: %w", name, err)
	}
	return zonePolicy{zone: name, p: &policy{off: z.Off, maxTTL: cfg.MaxTTL, minTTL: cfg.MinTTL, maxNegativeTTL: cfg.MaxNegativeTTL,
		minNegativeTTL: cfg.MinNegativeTTL, serveStale: cfg.ServeStale, staleTTL: cfg.StaleTTL, prefetch: cfg.Prefetch}}, nil
}

// policyOf is the policy of name (lower case, FQDN).
func (c *Cache) policyOf(name string) *policy {
	for _, z := range c.zones {
		if name == z.zone || strings.HasSuffix(name, z.zone) && name[len(name)-len(z.zone)-1] == '.' {
			return z.p
		}
	}
	return c.pol
}

// MaxTTL is the longest TTL the cache serves an answer for name (a
// domain name in any case, FQDN) with: the maxTTL of its zone, or of the
// Config. ok is false where answers under name are not cached.
func (c *Cache) MaxTTL(name string) (d time.Duration, ok bool) {
	p := c.policyOf(strings.ToLower(name))
	return p.maxTTL, !p.off && p.maxTTL >= time.Second
}

func (cfg *Config) defaults() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"SuccessBytes", cfg.SuccessBytes}, {"DenialBytes", cfg.DenialBytes}, {"MaxEntries", int64(cfg.MaxEntries)},
		{"MaxTTL", int64(cfg.MaxTTL)}, {"MinTTL", int64(cfg.MinTTL)},
		{"MaxNegativeTTL", int64(cfg.MaxNegativeTTL)}, {"MinNegativeTTL", int64(cfg.MinNegativeTTL)},
		{"ServeStale", int64(cfg.ServeStale)}, {"StaleTTL", int64(cfg.StaleTTL)},
		{"Prefetch.Amount", int64(cfg.Prefetch.Amount)}, {"Prefetch.Window", int64(cfg.Prefetch.Window)},
		{"Prefetch.Percentage", int64(cfg.Prefetch.Percentage)},
	} {
		if f.v < 0 {
			return fmt.Errorf("dnscache: %s is negative (%d)", f.name, f.v)
		}
	}
	if cfg.SuccessBytes == 0 {
		cfg.SuccessBytes = DefaultSuccessBytes
	}
	if cfg.DenialBytes == 0 {
		cfg.DenialBytes = DefaultDenialBytes
	}
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.MaxNegativeTTL == 0 {
		cfg.MaxNegativeTTL = DefaultMaxNegativeTTL
	}
	if cfg.StaleTTL == 0 {
		cfg.StaleTTL = DefaultStaleTTL
	}
	if cfg.Prefetch.Window == 0 {
		cfg.Prefetch.Window = DefaultPrefetchWindow
	}
	if cfg.Prefetch.Percentage == 0 {
		cfg.Prefetch.Percentage = DefaultPrefetchPercentage
	}
	// A cap under 1 s caches nothing of that kind (lifetimes under 1 s are
	// not cached): a way to turn the cache off for tests and debugging.
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"MaxTTL", cfg.MaxTTL}, {"MaxNegativeTTL", cfg.MaxNegativeTTL}} {
		if f.v < 0 {
			return fmt.Errorf("dnscache: %s is %v, want a positive duration", f.name, f.v)
		}
	}
	if cfg.StaleTTL < time.Second {
		return fmt.Errorf("dnscache: StaleTTL is %v, want at least 1s", cfg.StaleTTL)
	}
	switch {
	case cfg.MinTTL > cfg.MaxTTL:
		return fmt.Errorf("dnscache: MinTTL %v is over MaxTTL %v", cfg.MinTTL, cfg.MaxTTL)
	case cfg.MinNegativeTTL > cfg.MaxNegativeTTL:
		return fmt.Errorf("dnscache: MinNegativeTTL %v is over MaxNegativeTTL %v", cfg.MinNegativeTTL, cfg.MaxNegativeTTL)
	case cfg.MaxTTL > 1<<31*time.Second || cfg.MaxNegativeTTL > 1<<31*time.Second:
		return fmt.Errorf("dnscache: MaxTTL %v or MaxNegativeTTL %v is over the largest DNS TTL (2^31 s)", cfg.MaxTTL, cfg.MaxNegativeTTL)
	case cfg.Prefetch.Percentage < 10 || cfg.Prefetch.Percentage > 90:
		return fmt.Errorf("dnscache: Prefetch.Percentage is %d, want 10 to 90", cfg.Prefetch.Percentage)
	}
	return nil
}

// Exchange answers m from the cache or asks next (once for all identical
// queries in flight). The reply has m's ID, question, RD and CD bits, its
// TTLs aged by the time the answer has been cached, and no OPT: the caller
// adds its own.
func (c *Cache) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	return c.Forward(ctx, m, dnsmsg.Origin{})
}

// Forward is Exchange for a query asked by o: what next asks for it, it
// asks with o when next takes it (forward.Forwarding).
func (c *Cache) Forward(ctx context.Context, m *dns.Msg, o dnsmsg.Origin) (*dns.Msg, error) {
	a, err := c.AnswerTicket(ctx, m, o)
	return a.Msg, err
}

// Answer is Exchange, and says where the reply came from.
func (c *Cache) Answer(ctx context.Context, m *dns.Msg) (*dns.Msg, Source, error) {
	a, err := c.AnswerTicket(ctx, m, dnsmsg.Origin{})
	return a.Msg, a.Source, err
}

// Answered is AnswerTicket's reply: the message, where it came from and,
// for a Hit, the Ticket with which the caller may Keep the finished reply
// it makes of it (the zero Ticket otherwise).
type Answered struct {
	Msg    *dns.Msg
	Source Source
	Ticket Ticket
}

// AnswerTicket is Forward, saying where the reply came from, with the
// Ticket of a Hit.
func (c *Cache) AnswerTicket(ctx context.Context, m *dns.Msg, o dnsmsg.Origin) (Answered, error) {
	if m == nil || len(m.Question) != 1 {
		n := 0
		if m != nil {
			n = len(m.Question)
		}
		return Answered{Source: Miss}, fmt.Errorf("dnscache: query has %d questions, want 1", n)
	}
	q := m.Question[0]
	k := key{name: strings.ToLower(q.Name), qtype: q.Qtype, qclass: q.Qclass, cd: m.CheckingDisabled, rd: m.RecursionDesired}
	if opt := m.IsEdns0(); opt != nil {
		k.do = opt.Do()
	}
	now := c.nanos()

	c.mu.Lock()
	e := c.items[k]
	var stale []byte
	var stalePol *policy
	if e != nil {
		switch {
		case now < e.expires:
			wire, age, kind := e.wire, uint32((now-e.stored)/int64(time.Second)), e.kind
			c.touch(e)
			refresh := c.duePrefetch(e, now)
			c.mu.Unlock()
			c.hits[kind].Add(1)
			if refresh {
				go c.refresh(k, m.Copy(), e)
			}
			r, err := c.reply(m, wire, age, -1)
			return Answered{Msg: r, Source: Hit, Ticket: Ticket{e: e, age: age}}, err
		case now < e.expires+int64(e.pol.serveStale):
			stale, stalePol = e.wire, e.pol
			if now < e.retry {
				c.mu.Unlock()
				return c.serveStale(m, stale, stalePol)
			}
		default:
			c.unlink(e)
		}
	}
	c.mu.Unlock()

	var res result
	src := Miss
	if err := c.checkLoop(m); err != nil {
		res = result{err: err, kind: Uncached, failed: true}
	} else {
		res, src = c.resolve(ctx, o, k, m)
	}
	c.misses[res.kind].Add(1)
	if res.failed && stale != nil {
		c.mu.Lock()
		if e := c.items[k]; e != nil && !(now < e.expires) {
			e.retry = now + int64(e.pol.staleTTL)
		}
		c.mu.Unlock()
		return c.serveStale(m, stale, stalePol)
	}
	switch {
	case res.err != nil:
		return Answered{Source: src}, res.err
	case res.wire != nil:
		r, err := c.reply(m, res.wire, 0, -1)
		return Answered{Msg: r, Source: src}, err
	}
	r := res.msg.Copy()
	r.Id = m.Id
	return Answered{Msg: r, Source: src}, nil
}

// checkLoop is next's LoopChecker's verdict on m (nil without one).
func (c *Cache) checkLoop(m *dns.Msg) error {
	if c.loops == nil {
		return nil
	}
	return c.loops.CheckLoop(m)
}

func (c *Cache) serveStale(m *dns.Msg, wire []byte, pol *policy) (Answered, error) {
	c.stale.Add(1)
	r, err := c.reply(m, wire, 0, int64(pol.staleTTL/time.Second))
	return Answered{Msg: r, Source: Stale}, err
}

func (c *Cache) nanos() int64 { return int64(c.now().Sub(c.epoch)) }

// reply unpacks a cached answer for m: m's ID, question and flags, owner
// names equal to the question but for case in the question's case, TTLs
// aged by age seconds, or all set to fixed when it is not negative.
func (c *Cache) reply(m *dns.Msg, wire []byte, age uint32, fixed int64) (*dns.Msg, error) {
	r := new(dns.Msg)
	if err := r.Unpack(wire); err != nil {
		return nil, fmt.Errorf("dnscache: unpack cached answer: %w", err)
	}
	r.Id = m.Id
	r.RecursionDesired = m.RecursionDesired
	r.CheckingDisabled = m.CheckingDisabled
	r.Compress = true
	qname := m.Question[0].Name
	if len(r.Question) == 1 {
		r.Question[0] = m.Question[0]
	}
	for _, sec := range [3][]dns.RR{r.Answer, r.Ns, r.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			switch {
			case fixed >= 0:
				h.Ttl = uint32(fixed)
			case h.Ttl > age:
				h.Ttl -= age
			default:
				h.Ttl = 0
			}
			if h.Name != qname && strings.EqualFold(h.Name, qname) {
				h.Name = qname
			}
		}
	}
	return r, nil
}

// resolve asks next once for all concurrent askers of k.
func (c *Cache) resolve(ctx context.Context, o dnsmsg.Origin, k key, m *dns.Msg) (result, Source) {
	c.mu.Lock()
	f, ok := c.flights[k]
	if ok && f.ctx.Err() == nil {
		c.mu.Unlock()
		c.coalesced.Add(1)
		select {
		case <-f.done:
		case <-ctx.Done():
			return result{err: ctx.Err(), kind: Uncached, failed: true}, Coalesced
		}
		if f.res.err == nil || f.ctx.Err() == nil || ctx.Err() != nil {
			return f.res, Coalesced
		}
		// The leader's caller went away before next answered: ask again.
		return c.fetch(ctx, o, k, m), Miss
	}
	if len(c.flights) >= MaxFlights {
		c.mu.Unlock()
		return c.fetch(ctx, o, k, m), Miss
	}
	f = &flight{ctx: ctx, done: make(chan struct{})}
	c.flights[k] = f
	c.mu.Unlock()

	f.res = c.fetch(ctx, o, k, m)
	c.mu.Lock()
	if c.flights[k] == f {
		delete(c.flights, k)
	}
	c.mu.Unlock()
	close(f.done)
	return f.res, Miss
}

// fetch asks next and caches what it may.
func (c *Cache) fetch(ctx context.Context, o dnsmsg.Origin, k key, m *dns.Msg) result {
	// On behalf of the query that missed, when next takes an Origin.
	r, err := forward.Ask(ctx, c.next, m, o)
	if err == nil && r == nil {
		err = errors.New("dnscache: next returned no reply and no error")
	}
	if err != nil {
		return result{err: err, kind: Uncached, failed: true}
	}
	r.Extra = withoutOPT(r.Extra)
	pol := c.policyOf(k.name)
	kind, lifetime := c.classify(m, r, pol)
	if kind == Uncached {
		return result{msg: r, kind: Uncached, failed: r.Rcode == dns.RcodeServerFailure || r.Rcode == dns.RcodeRefused}
	}
	secs := uint32(lifetime / time.Second)
	floor := uint32(pol.minTTL / time.Second)
	if kind == Denial {
		floor = uint32(pol.minNegativeTTL / time.Second)
	}
	for _, sec := range [3][]dns.RR{r.Answer, r.Ns, r.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if soa, ok := rr.(*dns.SOA); ok && kind == Denial {
				h.Ttl = min(h.Ttl, soa.Minttl)
			}
			h.Ttl = min(max(h.Ttl, floor), secs)
		}
	}
	r.Compress = true
	wire, err := r.Pack()
	if err != nil {
		c.log.Debug("reply not cached: pack", "name", m.Question[0].Name, "err", err)
		return result{msg: r, kind: Uncached}
	}
	// Pack may return a buffer bigger than the message: keep just the bytes.
	wire = append(make([]byte, 0, len(wire)), wire...)
	c.store(k, kind, wire, secs, pol)
	return result{wire: wire, kind: kind}
}

// classify returns the kind of r, the reply to m, and how long pol lets
// it be cached (Uncached and 0 when it may not).
func (c *Cache) classify(m, r *dns.Msg, pol *policy) (Kind, time.Duration) {
	if pol.off {
		return Uncached, 0
	}
	q := m.Question[0]
	switch {
	case r.Truncated, len(r.Question) != 1, r.Opcode != dns.OpcodeQuery,
		q.Qtype == dns.TypeAXFR, q.Qtype == dns.TypeIXFR,
		r.Question[0].Qtype != q.Qtype, r.Question[0].Qclass != q.Qclass,
		!strings.EqualFold(r.Question[0].Name, q.Name):
		return Uncached, 0
	}
	var kind Kind
	var ttl time.Duration
	switch {
	case r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0:
		kind, ttl = Success, pol.maxTTL
		for _, sec := range [3][]dns.RR{r.Answer, r.Ns, r.Extra} {
			for _, rr := range sec {
				ttl = min(ttl, time.Duration(rr.Header().Ttl)*time.Second)
			}
		}
		ttl = min(max(ttl, pol.minTTL), pol.maxTTL)
	case r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeNameError:
		soa := false
		kind, ttl = Denial, pol.maxNegativeTTL
		for _, rr := range r.Ns {
			if s, ok := rr.(*dns.SOA); ok {
				soa = true
				ttl = min(ttl, time.Duration(min(s.Hdr.Ttl, s.Minttl))*time.Second)
			}
		}
		if !soa {
			return Uncached, 0 // RFC 2308 section 5
		}
		ttl = min(max(ttl, pol.minNegativeTTL), pol.maxNegativeTTL)
	default:
		return Uncached, 0
	}
	if ttl < time.Second {
		return Uncached, 0
	}
	return kind, ttl
}

// store caches wire under k for secs seconds, under pol.
func (c *Cache) store(k key, kind Kind, wire []byte, secs uint32, pol *policy) {
	cost := int64(allocSize(len(wire))+len(k.name)) + EntryOverhead
	now := c.nanos()
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.items[k]; old != nil {
		c.unlink(old)
	}
	l := &c.kinds[kind]
	if cost > l.capacity {
		l.evicted++
		return
	}
	for l.n > 0 && (l.bytes+cost > l.capacity || (c.cfg.MaxEntries > 0 && l.n >= c.cfg.MaxEntries)) {
		c.unlink(l.root.prev)
		l.evicted++
	}
	e := &entry{key: k, kind: kind, ttl: secs, wire: wire, cost: cost, stored: now,
		expires: now + int64(secs)*int64(time.Second), window: now, pol: pol}
	c.items[k] = e
	e.prev, e.next = &l.root, l.root.next
	e.prev.next, e.next.prev = e, e
	l.n++
	l.bytes += cost
}

// touch makes e the most recently used of its kind (c.mu held).
func (c *Cache) touch(e *entry) {
	l := &c.kinds[e.kind]
	if l.root.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = &l.root, l.root.next
	e.prev.next, e.next.prev = e, e
}

// unlink drops e (c.mu held).
func (c *Cache) unlink(e *entry) {
	l := &c.kinds[e.kind]
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	delete(c.items, e.key)
	l.n--
	l.bytes -= e.cost
}

// duePrefetch counts a hit on e and says whether to refresh it now; it then
// takes a prefetch slot (c.mu held).
func (c *Cache) duePrefetch(e *entry, now int64) bool {
	p := e.pol.prefetch
	if p.Amount == 0 || e.prefetch {
		return false
	}
	if now-e.window > int64(p.Window) {
		e.window, e.hits = now, 0
	}
	e.hits++
	left := e.expires - now
	if int(e.hits) < p.Amount || (left*100 >= int64(e.ttl)*int64(time.Second)*int64(p.Percentage) && left > int64(time.Second)) ||
		c.prefetching >= MaxPrefetches || c.closed {
		return false
	}
	e.prefetch = true
	c.prefetching++
	c.wg.Add(1)
	return true
}

// refresh asks next for k again in the background (a prefetch slot taken).
func (c *Cache) refresh(k key, m *dns.Msg, e *entry) {
	defer c.wg.Done()
	c.prefetches.Add(1)
	ctx, cancel := context.WithTimeout(c.base, prefetchTimeout)
	res, _ := c.resolve(ctx, dnsmsg.Origin{}, k, m) // a prefetch: no client
	cancel()
	if res.err != nil {
		c.log.Debug("prefetch failed", "name", m.Question[0].Name, "err", res.err)
	}
	c.mu.Lock()
	c.prefetching--
	e.prefetch = false
	c.mu.Unlock()
}

// Close stops prefetching and waits for the refreshes running; the cache
// keeps answering.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
}

// Len is the number of cached answers of kind k.
func (c *Cache) Len(k Kind) int {
	n, _ := c.size(k)
	return n
}

// Bytes is the memory the cached answers of kind k are accounted for (at
// most their capacity).
func (c *Cache) Bytes(k Kind) int64 {
	_, b := c.size(k)
	return b
}

// size is Len and Bytes of kind k, both 0 for an unknown kind.
func (c *Cache) size(k Kind) (n int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k > Denial {
		return 0, 0
	}
	return c.kinds[k].n, c.kinds[k].bytes
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

// withoutOPT returns rrs without OPT records (an upstream's OPT, its
// cookies and echoed options are never cached nor returned).
func withoutOPT(rrs []dns.RR) []dns.RR {
	var out []dns.RR
	copied := false
	for i, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			if !copied {
				out, copied = append(make([]dns.RR, 0, len(rrs)), rrs[:i]...), true
			}
			continue
		}
		if copied {
			out = append(out, rr)
		}
	}
	if !copied {
		return rrs
	}
	return out
}
