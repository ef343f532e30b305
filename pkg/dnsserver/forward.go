package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
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

// Forwarder sends queries to the upstreams of a source, trying each in turn
// (starting at a rotating position) over UDP, and over TCP when the UDP reply
// is truncated. Upstreams equal to one of the server's own listen addresses
// are dropped, so the server never forwards to itself: a loopback or
// unspecified listen address matches any loopback upstream on the same port.
type Forwarder struct {
	source  UpstreamSource
	self    []netip.AddrPort
	timeout time.Duration
	metrics *Metrics
	next    atomic.Uint32
	udp     *dns.Client
	tcp     *dns.Client
}

var _ Exchanger = (*Forwarder)(nil)

// NewForwarder returns a Forwarder over source that never sends to any of
// listen (the server's --listen addresses). timeout bounds each attempt
// (default 2s).
func NewForwarder(source UpstreamSource, listen []string, timeout time.Duration, m *Metrics) (*Forwarder, error) {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	f := &Forwarder{source: source, timeout: timeout, metrics: m,
		udp: &dns.Client{Net: "udp", Timeout: timeout, UDPSize: dns.MaxMsgSize},
		tcp: &dns.Client{Net: "tcp", Timeout: timeout},
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

// Exchange implements Exchanger.
func (f *Forwarder) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	ups := f.Upstreams()
	if len(ups) == 0 {
		return nil, ErrNoUpstream
	}
	start := int(f.next.Add(1)) % len(ups)
	var errs []error
	for i := range ups {
		addr := ups[(start+i)%len(ups)]
		r, _, err := f.udp.ExchangeContext(ctx, m, addr)
		if err == nil && r.Truncated {
			r, _, err = f.tcp.ExchangeContext(ctx, m, addr)
		}
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
