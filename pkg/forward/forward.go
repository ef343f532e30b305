package forward

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// UpstreamSource gives the current upstream servers, as "host:port" or bare
// addresses (port 53), plain or after TLSPrefix (ParseUpstream).
type UpstreamSource interface {
	Upstreams() []string
}

// StaticUpstreams is a fixed upstream list (--upstream). For
// --upstream-resolv-conf, serve adapts a pkg/hostresolv watcher.
type StaticUpstreams []string

// Upstreams implements UpstreamSource.
func (s StaticUpstreams) Upstreams() []string { return s }

// logEvery is how often forward errors are logged per upstream at most.
const logEvery = 10 * time.Second

// Forwarder sends queries to upstream servers; README.md gives its
// behaviour and limits. Its methods are safe for concurrent use.
type Forwarder struct {
	cfg    Config
	self   []netip.AddrPort
	m      *metrics
	log    *slog.Logger
	shares *shares
	// sessions resumes the TLS sessions of tls:// upstreams.
	sessions tls.ClientSessionCache
	next     atomic.Uint32
	marker   [8]byte
	// strayLog limits the lines of loops that name no current upstream.
	strayLog rateLimit
	now      func() time.Time // the clock of the log rate limits

	// cur is the upstream list last read from the source; listMu
	// serialises its rebuilds.
	cur    atomic.Pointer[upstreamList]
	listMu sync.Mutex

	// probe is the current loop probe round (nil before the first).
	probe atomic.Pointer[probeRound]

	mu      sync.Mutex
	flights map[string]*flight

	started atomic.Bool // health checking runs (Start or Run)
	// kick wakes the background work for a health probe of an upstream
	// a query failed with.
	kick   chan struct{}
	bgMu   sync.Mutex
	bgStop context.CancelFunc
	bgDone chan struct{}
	closed bool

	shed, loops, loopDetected, allDown, coalesced atomic.Uint64
}

// upstreamList is the parsed upstream list of one source reading.
type upstreamList struct {
	raw []string    // as the source gave it
	ups []*upstream // usable ones: parsed, not self, deduplicated
}

// New returns a Forwarder configured by cfg, or an error naming the first
// bad fields. Call Start (or Run) for health checks and loop probes, and
// Close when done.
func New(cfg Config) (*Forwarder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	f := &Forwarder{
		cfg:      cfg,
		m:        newMetrics(cfg.Zone),
		log:      cfg.Logger.With("zone", cfg.Zone),
		shares:   newShares(cfg.MaxConcurrent),
		sessions: tls.NewLRUClientSessionCache(64),
		flights:  map[string]*flight{},
		kick:     make(chan struct{}, 1),
		now:      time.Now,
	}
	for i, l := range cfg.Self {
		ap, err := parseListen(l)
		if err != nil {
			return nil, fmt.Errorf("forward config: Self[%d] %q: %w", i, l, err)
		}
		f.self = append(f.self, ap)
	}
	if _, err := crand.Read(f.marker[:]); err != nil {
		return nil, fmt.Errorf("loop marker: %w", err)
	}
	f.cur.Store(&upstreamList{})
	return f, nil
}

// ParseAddrPort parses "ip", "ip:port" or "[ip]:port" (port 53 by default).
func ParseAddrPort(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), 53), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", port, err)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}

// parseListen parses a listen address: ParseAddrPort's forms, and ":port"
// (every address, as "0.0.0.0:port").
func parseListen(s string) (netip.AddrPort, error) {
	if host, port, err := net.SplitHostPort(s); err == nil && host == "" {
		return ParseAddrPort(net.JoinHostPort(netip.IPv4Unspecified().String(), port))
	}
	return ParseAddrPort(s)
}

// isSelf reports whether up is one of the server's own addresses.
func (f *Forwarder) isSelf(up netip.AddrPort) bool {
	for _, l := range f.self {
		if selfReason(l, up) != "" {
			return true
		}
	}
	return false
}

// SelfReason says why up is taken for the server listening on listen
// (addresses as Config.Self), or "" when it is not.
func SelfReason(up netip.AddrPort, listen []string) string {
	for _, s := range listen {
		l, err := parseListen(s)
		if err != nil {
			continue
		}
		if why := selfReason(l, up); why != "" {
			return why
		}
	}
	return ""
}

// selfReason is the one rule of what is the server itself. Only the same
// address, or any address under a listen on every address, is: a loopback
// upstream beside a loopback listen address is another socket
// (systemd-resolved's 127.0.0.53 beside 127.0.0.1), and if it loops back
// the loop marker finds it.
func selfReason(l, up netip.AddrPort) string {
	if l.Port() != up.Port() {
		return ""
	}
	switch {
	case l.Addr() == up.Addr():
		return fmt.Sprintf("it is the listen address %s: this server would forward to itself", l)
	case l.Addr().IsUnspecified() && (up.Addr().IsLoopback() || up.Addr().IsUnspecified()):
		return fmt.Sprintf("the listen address %s takes port %d of every address, loopback included: this server would forward to itself", l, up.Port())
	}
	return ""
}

// list returns the upstreams of the source's current list, rebuilding the
// list when the source changed: upstreams still listed keep their state,
// the others' connections are closed and their series dropped.
func (f *Forwarder) list() *upstreamList {
	raw := f.cfg.Upstreams.Upstreams()
	if l := f.cur.Load(); slices.Equal(l.raw, raw) {
		return l
	}
	f.listMu.Lock()
	defer f.listMu.Unlock()
	old := f.cur.Load()
	if slices.Equal(old.raw, raw) {
		return old
	}
	byKey := map[string]*upstream{}
	for _, u := range old.ups {
		byKey[u.key()] = u
	}
	nl := &upstreamList{raw: slices.Clone(raw)}
	// seen: one upstream per address and port, over TLS or not.
	seen := map[string]bool{}
	kept := map[*upstream]bool{}
	for _, s := range raw {
		ap, isTLS, err := ParseUpstream(s)
		if err != nil || f.isSelf(ap) || seen[ap.String()] {
			continue
		}
		name := ap.String()
		seen[name] = true
		key := name
		if isTLS {
			key = TLSPrefix + name
		}
		u := byKey[key]
		if u == nil {
			u = &upstream{name: name, mark: f.newMark()}
			if isTLS {
				u.tls = f.upstreamTLS(ap)
			}
		}
		kept[u] = true
		// A new list is probed again for loops.
		u.looping.Store(false)
		u.loopSeen.Store(false)
		nl.ups = append(nl.ups, u)
	}
	for _, u := range old.ups {
		if !kept[u] {
			u.udp.close()
			u.tcp.close()
			if !seen[u.name] {
				f.m.forget(u.name)
			}
		}
	}
	f.bgMu.Lock()
	if f.closed {
		for _, u := range nl.ups {
			u.udp.close()
			u.tcp.close()
		}
	}
	f.bgMu.Unlock()
	f.cur.Store(nl)
	// The background work probes a new list for loops at once.
	select {
	case f.kick <- struct{}{}:
	default:
	}
	return nl
}

// Upstreams returns the usable upstreams, "ip:port" (over TLS or not, as
// CoreDNS names them), self excluded, in the configured order (the ones
// found to loop back included).
func (f *Forwarder) Upstreams() []string {
	var out []string
	for _, u := range f.list().ups {
		out = append(out, u.name)
	}
	return out
}

type answeredKey struct{}

// WithAnswered makes Exchange call fn with the upstream ("ip:port") whose
// reply it returns, before it returns (node-local counts its answers by
// the upstream's topology zone).
func WithAnswered(ctx context.Context, fn func(upstream string)) context.Context {
	return context.WithValue(ctx, answeredKey{}, fn)
}

func answered(ctx context.Context, upstream string) {
	if fn, _ := ctx.Value(answeredKey{}).(func(string)); fn != nil && upstream != "" {
		fn(upstream)
	}
}

// Exchange is Forward for the zero Origin.
func (f *Forwarder) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	return f.Forward(ctx, m, dnsmsg.Origin{})
}

// Forward sends m (which it does not modify), asked by o, to the upstreams
// and returns the first reply, or an error: ErrNoUpstream, ErrOverloaded
// (its slot was given to a newer query: shares), ErrLoop, or the
// upstreams' errors (Rcode maps each to the rcode to answer). The slots
// are shared per o.Client; o.TCP asks over TCP (unless Config.PreferUDP).
// It returns within Config.Timeout, or sooner when ctx ends.
func (f *Forwarder) Forward(ctx context.Context, m *dns.Msg, o dnsmsg.Origin) (*dns.Msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := f.CheckLoop(m); err != nil {
		return nil, err
	}
	ups, err := f.pick()
	if err != nil {
		return nil, err
	}
	ob := f.prepare(m)
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	r, err := f.coalesce(ctx, o, ups, ob)
	if r != nil {
		r.Id = m.Id
	}
	return r, err
}

// coalesce asks the upstreams for ob, or joins the flight of an identical
// question (ob.key, "" for none) and shares its reply. Only a query that
// asks the upstreams takes a slot; one that joins a flight waits on it.
func (f *Forwarder) coalesce(ctx context.Context, o dnsmsg.Origin, ups []*upstream, ob outbound) (*dns.Msg, error) {
	tcp := f.cfg.ForceTCP || (o.TCP && !f.cfg.PreferUDP)
	key := ob.key
	if key == "" {
		l, ok := f.take(ctx, o.Client, ob.msg)
		if !ok {
			return nil, &shedError{rcode: f.cfg.ShedRcode}
		}
		defer l.release()
		a, err := f.exchange(l.ctx, ups, ob, tcp)
		return f.outcome(l.ctx, a, err)
	}
	if tcp {
		key += "\x00tcp"
	}

	f.mu.Lock()
	// A flight whose caller has gone (an autopath candidate made useless
	// by an earlier one, a shed query) is ending: it is not joined.
	if fl, ok := f.flights[key]; ok && fl.ctx.Err() == nil {
		fl.waiters++
		f.mu.Unlock()
		f.coalesced.Add(1)
		select {
		case <-fl.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if fl.err != nil {
			return nil, fl.err
		}
		answered(ctx, fl.from)
		return fl.reply.Copy(), nil
	}
	l, ok := f.take(ctx, o.Client, ob.msg)
	if !ok {
		f.mu.Unlock()
		return nil, &shedError{rcode: f.cfg.ShedRcode}
	}
	defer l.release()
	fl := &flight{ctx: l.ctx, done: make(chan struct{})}
	f.flights[key] = fl
	f.mu.Unlock()

	a, err := f.exchange(l.ctx, ups, ob, tcp)
	r, err := f.outcome(l.ctx, a, err)
	from := a.from
	f.mu.Lock()
	if f.flights[key] == fl {
		delete(f.flights, key)
	}
	shared := fl.waiters > 0
	f.mu.Unlock()
	fl.reply, fl.from, fl.err = r, from, err
	if shared && err == nil {
		// The waiters copy fl.reply; the caller gets its own copy to
		// modify.
		r = r.Copy()
	}
	close(fl.done)
	return r, err
}

// lease is a slot taken for an exchange: its context ends when the slot
// is given to a newer query; release frees the slot.
type lease struct {
	ctx     context.Context
	release func()
}

// take takes a slot of the client's share (shares) for an exchange of
// ctx. ok is false when the client is over its share and the domain of m's
// name holds the most of it: the query is shed at once.
func (f *Forwarder) take(ctx context.Context, client netip.Addr, m *dns.Msg) (_ lease, ok bool) {
	dom := ""
	if len(m.Question) > 0 {
		dom = DomainOf(m.Question[0].Name)
	}
	ctx, shed := context.WithCancelCause(ctx)
	sl, took := f.shares.take(client, dom, shed)
	if sl == nil || took {
		f.shed.Add(1)
	}
	if sl == nil {
		shed(nil)
		return lease{}, false
	}
	return lease{ctx: ctx, release: func() {
		f.shares.release(sl)
		shed(nil)
	}}, true
}

// outcome is an exchange's result: ErrOverloaded when its slot was given
// to a newer query. An answer is reported to WithAnswered's function.
func (f *Forwarder) outcome(ctx context.Context, a upAnswer, err error) (*dns.Msg, error) {
	if err != nil {
		if errors.Is(context.Cause(ctx), errShed) {
			return nil, &shedError{rcode: f.cfg.ShedRcode}
		}
		return nil, err
	}
	answered(ctx, a.from)
	return a.msg, nil
}

// upAnswer is an upstream's reply and the upstream ("ip:port").
type upAnswer struct {
	msg  *dns.Msg
	from string
}

// flight is an exchange in progress that identical queries wait for.
type flight struct {
	ctx     context.Context // the leader's
	done    chan struct{}
	waiters int // under Forwarder.mu
	reply   *dns.Msg
	from    string // the upstream that answered
	err     error
}

// pick returns the upstreams to try, in the policy's order: the healthy
// ones that do not loop. When every usable one is down it returns one of
// them at random (as CoreDNS): a health probe that failed is no proof that
// the next query will, and failing fast would turn a probe's bad luck into
// everyone's SERVFAIL. It fails with ErrNoUpstream when none is usable.
func (f *Forwarder) pick() ([]*upstream, error) {
	all := f.list().ups
	ups := make([]*upstream, 0, len(all))
	var usable []*upstream
	for _, u := range all {
		if u.looping.Load() {
			continue
		}
		usable = append(usable, u)
		if !u.down.Load() {
			ups = append(ups, u)
		}
	}
	switch {
	case len(usable) == 0:
		return nil, ErrNoUpstream
	case len(ups) == 0:
		f.allDown.Add(1)
		if f.cfg.FailFastAllUnhealthy {
			return nil, ErrAllDown
		}
		return []*upstream{usable[rand.IntN(len(usable))]}, nil
	}
	switch f.cfg.Policy {
	case PolicyRandom:
		rand.Shuffle(len(ups), func(i, j int) { ups[i], ups[j] = ups[j], ups[i] })
	case PolicyRoundRobin:
		start := int(f.next.Add(1)-1) % len(ups)
		ups = append(ups[start:], ups[:start]...)
	}
	return ups, nil
}

// exchange tries each upstream in turn (tryBudget shares the time left);
// ob's loop marker gets the upstream's.
func (f *Forwarder) exchange(ctx context.Context, ups []*upstream, ob outbound, tcp bool) (upAnswer, error) {
	var errs []error
	for i, u := range ups {
		ob.mark.Data = u.mark
		r, err := f.attempt(ctx, u, ob.msg, tcp, len(ups)-i)
		if err == nil {
			return upAnswer{msg: r, from: u.name}, nil
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			// The client went away: not the upstream's fault.
			return upAnswer{}, ctx.Err()
		}
		f.failed(u, err)
		errs = append(errs, fmt.Errorf("upstream %q: %w", u.name, err))
		if ctx.Err() != nil {
			break
		}
	}
	return upAnswer{}, errors.Join(errs...)
}

// failed counts a failed exchange with u and asks for a health probe of it
// (while health checks run): the probe, not the query, decides whether u
// is down. A name whose servers drop queries times out on a healthy
// upstream; counting that against the upstream would let any client take
// every upstream out of rotation. It logs at most once per logEvery.
func (f *Forwarder) failed(u *upstream, err error) {
	f.m.errors.WithLabelValues(u.name).Inc()
	if f.cfg.MaxFails > 0 && f.started.Load() && !u.suspect.Swap(true) {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
	if ok, suppressed := u.logged.allow(f.now(), logEvery); ok {
		f.log.Warn("forward failed", "upstream", u.name, "err", err, "suppressed", suppressed)
	}
}

// tryBudget is the time a try gets when left upstreams (this one included)
// share remaining: all of it for the last, else 7/8 of it. A slow but
// alive upstream has nearly the whole timeout to answer (1.75s of 2s); the
// others get what is left, and an upstream that does not answer at all is
// found by its health probe and skipped.
func tryBudget(remaining time.Duration, left int) time.Duration {
	if left <= 1 {
		return remaining
	}
	return remaining - remaining/8
}

// attempt asks one upstream within tryBudget of the time left in ctx: over
// TLS when it is a tls:// upstream, over TCP when tcp, else over UDP and
// then TCP when the reply was truncated.
func (f *Forwarder) attempt(ctx context.Context, u *upstream, m *dns.Msg, tcp bool, left int) (*dns.Msg, error) {
	if d, ok := ctx.Deadline(); ok && left > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, tryBudget(time.Until(d), left))
		defer cancel()
	}
	if !tcp && u.tls == nil {
		r, err := f.query(ctx, u, m, false)
		if !errors.Is(err, errTruncated) {
			return r, err
		}
	}
	return f.query(ctx, u, m, true)
}

// outbound is the query the forwarder sends for a client's: prepare's.
type outbound struct {
	msg  *dns.Msg
	mark *dns.EDNS0_LOCAL
	key  string
}

// prepare returns the query to send for m: a shallow copy whose OPT
// advertises dnsmsg.EDNSSize and carries, of m's options, only the loop
// markers and Config.RelayOptions (relayed), then our loop marker, mark
// (its Data is set per upstream). key identifies the question and the
// relayed options for coalescing ("" for a query with other than one
// question).
func (f *Forwarder) prepare(m *dns.Msg) outbound {
	code := f.cfg.LoopOptionCode
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(dnsmsg.EDNSSize)
	extra := make([]dns.RR, 0, len(m.Extra)+1)
	var k []byte
	if len(m.Question) == 1 {
		q := m.Question[0]
		k = append(k, strings.ToLower(q.Name)...)
		k = append(k, 0, byte(q.Qtype>>8), byte(q.Qtype), byte(q.Qclass>>8), byte(q.Qclass), boolByte(m.RecursionDesired), boolByte(m.CheckingDisabled), byte(m.Opcode))
	}
	for _, rr := range m.Extra {
		o, ok := rr.(*dns.OPT)
		if !ok {
			extra = append(extra, rr)
			k = nil // TSIG and the like: not coalesced
			continue
		}
		opt.Hdr.Ttl = o.Hdr.Ttl // extended rcode, version, DO
		opt.SetUDPSize(dnsmsg.EDNSSize)
		for _, e := range o.Option {
			if !f.relayed(e.Option()) {
				// Client subnet, cookies, NSID, padding, keepalive and the
				// like: of this hop, or tailoring an answer cached for
				// everyone (issue 27 item 5).
				continue
			}
			opt.Option = append(opt.Option, e)
			if k != nil && e.Option() != code {
				v := e.String()
				k = append(k, byte(e.Option()>>8), byte(e.Option()), byte(len(v)>>8), byte(len(v)))
				k = append(k, v...)
			}
		}
	}
	if k != nil {
		k = append(k, 0xff, byte(opt.Hdr.Ttl>>24), byte(opt.Hdr.Ttl>>16), byte(opt.Hdr.Ttl>>8), byte(opt.Hdr.Ttl))
	}
	mark := &dns.EDNS0_LOCAL{Code: code}
	opt.Option = append(opt.Option, mark)
	up := new(dns.Msg)
	*up = *m
	// A random ID of our own: a reply that guessed the client's does not
	// match, and neither does a late reply on a pooled socket.
	up.Id = dns.Id()
	up.Extra = append(extra, opt)
	return outbound{msg: up, mark: mark, key: string(k)}
}

// relayed reports whether a client's EDNS0 option of this code is sent
// upstream: loop markers and Config.RelayOptions.
func (f *Forwarder) relayed(code uint16) bool {
	return code == f.cfg.LoopOptionCode || slices.Contains(f.cfg.RelayOptions, code)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
