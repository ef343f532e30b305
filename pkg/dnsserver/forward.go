package dnsserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// UpstreamSource gives the current upstream servers, as "host:port" or bare
// addresses (port 53).
type UpstreamSource interface {
	Upstreams() []string
}

// StaticUpstreams is a fixed upstream list (--upstream). For
// --upstream-resolv-conf, serve adapts a pkg/hostresolv watcher.
type StaticUpstreams []string

// Upstreams implements UpstreamSource.
func (s StaticUpstreams) Upstreams() []string { return s }

// ErrNoUpstream is returned when no usable upstream is configured.
var ErrNoUpstream = errors.New("dnsserver: no upstream server")

// ErrOverloaded is returned at once, without asking anyone, when
// MaxInFlight queries are already waiting for an upstream.
var ErrOverloaded = errors.New("dnsserver: too many forwarded queries in flight")

// ErrLoop is returned for a query that carries this Forwarder's own loop
// marker (it went round a forwarding loop and came back) or the markers of
// more than MaxHops forwarders.
var ErrLoop = errors.New("dnsserver: forwarding loop")

const (
	// DefaultForwardTimeout bounds one Exchange, every upstream and the TCP
	// retry included.
	DefaultForwardTimeout = 2 * time.Second
	// DefaultMaxInFlight is how many forwarded queries may wait for an
	// upstream at once (the query coalesced onto another included).
	DefaultMaxInFlight = 1000
	// DefaultLoopOptionCode is the EDNS0 local option that carries the loop
	// markers: 65534, the top of the local range (RFC 6891), away from the
	// autopath option's default 65001.
	DefaultLoopOptionCode = 65534
	// MaxHops is how many loop markers a query may carry, its own aside:
	// a query that went through more forwarders of ours is a loop too.
	MaxHops = 8
)

// Forwarder sends queries to the upstreams of a source, trying each in turn
// (starting at a rotating position) over UDP, and over TCP when the UDP reply
// is truncated or does not parse. Upstreams equal to one of the server's own
// listen addresses are dropped, so the server never forwards to itself: a
// loopback or unspecified listen address matches any loopback upstream on the
// same port.
//
// Its resources are bounded, so that dead upstreams cannot take the server
// down:
//
//   - one Exchange ends within the timeout (default 2s) whatever the number
//     of upstreams: each attempt gets an equal share of the time left;
//   - at most MaxInFlight exchanges wait at once (default 1000); beyond
//     that Exchange fails at once with ErrOverloaded (the handler answers
//     SERVFAIL) and dnsconfigurer_dnsserver_forward_rejected_total counts it;
//   - queries go upstream with an EDNS0 size of dnsmsg.EDNSSize (1232), so a
//     UDP read needs a 1232-byte buffer whatever the client claimed; a reply
//     that does not fit is asked again over TCP;
//   - identical queries in flight (same name, type, class, RD, CD, DO and
//     EDNS0 options) are sent once and share the reply.
//
// Loops: every query sent carries an EDNS0 local option (LoopOptionCode)
// with a random 8-byte marker of this Forwarder, after the markers of the
// forwarders it already went through (the cluster handler relays a query's
// options). A query that comes back with our own marker, or with more than
// MaxHops markers, fails with ErrLoop (SERVFAIL, counted in
// dnsconfigurer_dnsserver_forward_loops_total): two servers forwarding to
// each other stop after three queries. A loop through a resolver that drops
// unknown options (dnsmasq, systemd-resolved, any recursive server) loses the
// marker; there, coalescing stops the storm: the query that comes back is
// identical to the one in flight and waits for it, so the loop holds one
// query until the timeout instead of multiplying.
type Forwarder struct {
	source   UpstreamSource
	self     []netip.AddrPort
	timeout  time.Duration
	metrics  *Metrics
	next     atomic.Uint32
	udp      *dns.Client
	tcp      *dns.Client
	slots    chan struct{}
	loopCode uint16
	marker   [8]byte

	mu      sync.Mutex
	flights map[string]*flight

	rejected  atomic.Uint64
	loops     atomic.Uint64
	coalesced atomic.Uint64
}

var _ Exchanger = (*Forwarder)(nil)

// ForwardOption configures a Forwarder.
type ForwardOption func(*Forwarder)

// WithMaxInFlight sets how many exchanges may wait for an upstream at once
// (default DefaultMaxInFlight; n < 1 keeps the default).
func WithMaxInFlight(n int) ForwardOption {
	return func(f *Forwarder) {
		if n >= 1 {
			f.slots = make(chan struct{}, n)
		}
	}
}

// WithLoopOptionCode sets the EDNS0 option code of the loop markers
// (default DefaultLoopOptionCode). Every server of a deployment must use
// the same code for their markers to be seen.
func WithLoopOptionCode(code uint16) ForwardOption {
	return func(f *Forwarder) { f.loopCode = code }
}

// NewForwarder returns a Forwarder over source that never sends to any of
// listen (the server's --listen addresses). timeout bounds each Exchange,
// every upstream tried included (default DefaultForwardTimeout).
func NewForwarder(source UpstreamSource, listen []string, timeout time.Duration, m *Metrics, opts ...ForwardOption) (*Forwarder, error) {
	if timeout <= 0 {
		timeout = DefaultForwardTimeout
	}
	f := &Forwarder{source: source, timeout: timeout, metrics: m,
		// Queries always carry an OPT of dnsmsg.EDNSSize (see Exchange),
		// which miekg/dns uses as the read buffer size; UDPSize covers a
		// message without one.
		udp:      &dns.Client{Net: "udp", Timeout: timeout, UDPSize: dnsmsg.EDNSSize},
		tcp:      &dns.Client{Net: "tcp", Timeout: timeout},
		slots:    make(chan struct{}, DefaultMaxInFlight),
		loopCode: DefaultLoopOptionCode,
		flights:  map[string]*flight{},
	}
	for _, o := range opts {
		o(f)
	}
	if _, err := rand.Read(f.marker[:]); err != nil {
		return nil, fmt.Errorf("loop marker: %w", err)
	}
	for _, l := range listen {
		ap, err := ParseAddrPort(l)
		if err != nil {
			return nil, fmt.Errorf("listen address %q: %w", l, err)
		}
		f.self = append(f.self, ap)
	}
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

// isSelf reports whether up is one of the server's own addresses.
func (f *Forwarder) isSelf(up netip.AddrPort) bool {
	for _, l := range f.self {
		if l.Port() != up.Port() {
			continue
		}
		if l.Addr() == up.Addr() {
			return true
		}
		if (l.Addr().IsLoopback() || l.Addr().IsUnspecified()) && up.Addr().IsLoopback() {
			return true
		}
		if l.Addr().IsUnspecified() && up.Addr().IsUnspecified() {
			return true
		}
	}
	return false
}

// Upstreams returns the usable upstreams, "ip:port", self excluded.
func (f *Forwarder) Upstreams() []string {
	var out []string
	for _, u := range f.source.Upstreams() {
		ap, err := ParseAddrPort(u)
		if err != nil || f.isSelf(ap) {
			continue
		}
		out = append(out, ap.String())
	}
	return out
}

// Exchange implements Exchanger: it sends m (which it does not modify) to
// the upstreams and returns the first reply, or an error: ErrNoUpstream,
// ErrOverloaded, ErrLoop, or the upstreams' errors. It returns within the
// timeout, or sooner when ctx ends.
func (f *Forwarder) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ups := f.Upstreams()
	if len(ups) == 0 {
		return nil, ErrNoUpstream
	}
	up, key, err := f.prepare(m)
	if err != nil {
		f.loops.Add(1)
		return nil, err
	}
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	default:
		f.rejected.Add(1)
		return nil, ErrOverloaded
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if key == "" {
		return f.exchange(ctx, ups, up)
	}

	f.mu.Lock()
	// A flight whose caller has gone (an autopath candidate made useless
	// by an earlier one) is ending: it is not joined.
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
		r := fl.reply.Copy()
		r.Id = m.Id
		return r, nil
	}
	fl := &flight{ctx: ctx, done: make(chan struct{})}
	f.flights[key] = fl
	f.mu.Unlock()

	r, err := f.exchange(ctx, ups, up)
	f.mu.Lock()
	if f.flights[key] == fl {
		delete(f.flights, key)
	}
	shared := fl.waiters > 0
	f.mu.Unlock()
	fl.reply, fl.err = r, err
	if shared && err == nil {
		// The waiters copy fl.reply; the caller gets its own copy to
		// modify.
		r = r.Copy()
	}
	close(fl.done)
	return r, err
}

// flight is an exchange in progress that identical queries wait for.
type flight struct {
	ctx     context.Context // the leader's
	done    chan struct{}
	waiters int // under Forwarder.mu
	reply   *dns.Msg
	err     error
}

// exchange tries each upstream in turn, from a rotating start, each with an
// equal share of the time left.
func (f *Forwarder) exchange(ctx context.Context, ups []string, m *dns.Msg) (*dns.Msg, error) {
	start := int(f.next.Add(1)) % len(ups)
	var errs []error
	for i := range ups {
		addr := ups[(start+i)%len(ups)]
		r, err := f.attempt(ctx, addr, m, len(ups)-i)
		if err == nil {
			return r, nil
		}
		f.metrics.upstreamError(addr)
		errs = append(errs, fmt.Errorf("upstream %q: %w", addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// attempt asks one upstream, over UDP then TCP when the reply is truncated or
// does not parse, within 1/left of the time left in ctx.
func (f *Forwarder) attempt(ctx context.Context, addr string, m *dns.Msg, left int) (*dns.Msg, error) {
	if d, ok := ctx.Deadline(); ok && left > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(d)/time.Duration(left))
		defer cancel()
	}
	r, _, err := f.udp.ExchangeContext(ctx, m, addr)
	var ne net.Error
	if (err == nil && r.Truncated) || (err != nil && !errors.As(err, &ne) && ctx.Err() == nil) {
		r, _, err = f.tcp.ExchangeContext(ctx, m, addr)
	}
	if err == nil && !sameQuestion(r, m) {
		err = errors.New("reply to another question")
	}
	return r, err
}

// sameQuestion reports whether the reply r answers the question of m (an
// rcode without a question section is accepted).
func sameQuestion(r, m *dns.Msg) bool {
	if len(r.Question) == 0 {
		return r.Rcode != dns.RcodeSuccess
	}
	a, b := r.Question[0], m.Question[0]
	return len(r.Question) == 1 && a.Qtype == b.Qtype && a.Qclass == b.Qclass && strings.EqualFold(a.Name, b.Name)
}

// prepare returns the query to send for m: a shallow copy whose OPT
// advertises dnsmsg.EDNSSize and carries our loop marker after those already
// there. It fails with ErrLoop when m carries our marker or too many. key
// identifies the question and options for coalescing ("" for a query with
// other than one question).
func (f *Forwarder) prepare(m *dns.Msg) (up *dns.Msg, key string, err error) {
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(dnsmsg.EDNSSize)
	extra := make([]dns.RR, 0, len(m.Extra)+1)
	var k []byte
	if len(m.Question) == 1 {
		q := m.Question[0]
		k = append(k, strings.ToLower(q.Name)...)
		k = append(k, 0, byte(q.Qtype>>8), byte(q.Qtype), byte(q.Qclass>>8), byte(q.Qclass), boolByte(m.RecursionDesired), boolByte(m.CheckingDisabled))
	}
	hops := 0
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
			if e.Option() == f.loopCode {
				if l, ok := e.(*dns.EDNS0_LOCAL); ok {
					if string(l.Data) == string(f.marker[:]) {
						return nil, "", ErrLoop
					}
					if hops++; hops > MaxHops {
						return nil, "", ErrLoop
					}
				}
				opt.Option = append(opt.Option, e)
				continue
			}
			opt.Option = append(opt.Option, e)
			if k != nil {
				v := e.String()
				k = append(k, byte(e.Option()>>8), byte(e.Option()), byte(len(v)>>8), byte(len(v)))
				k = append(k, v...)
			}
		}
	}
	if k != nil {
		k = append(k, 0xff, byte(opt.Hdr.Ttl>>24), byte(opt.Hdr.Ttl>>16), byte(opt.Hdr.Ttl>>8), byte(opt.Hdr.Ttl))
	}
	opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: f.loopCode, Data: f.marker[:]})
	up = new(dns.Msg)
	*up = *m
	up.Extra = append(extra, opt)
	return up, string(k), nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
