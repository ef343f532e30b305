package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/reuseport"
)

// readBuffer is the largest UDP query read; longer datagrams are cut and
// then rejected as malformed.
const readBuffer = 4096

// Listener defaults, api/v1alpha1's (its limits section explains them).
// A TCP connection is closed when its first query does not arrive within
// tcpReadTimeout, after tcpMaxQueries queries, and as TCPIdleTimeout and
// TCPWriteTimeout say (RFC 7766 6.2.3).
const (
	tcpReadTimeout = 5 * time.Second
	// tcpMaxQueries ends a connection after that many queries (their
	// replies written first), so that a long-lived connection moves to
	// another replica now and then. It was miekg/dns's 128, which a
	// client pipelining up to tcpPipelined would reach at once; at 1,000
	// qps 4096 is a new connection every 4 s.
	tcpMaxQueries         = 4096
	DefaultMaxUDPInFlight = v1alpha1.DefaultUDPInFlight
	DefaultMaxTCPConns    = v1alpha1.DefaultTCPConnections
	// DefaultMaxTCPConnsPerClient is v1alpha1's.
	DefaultMaxTCPConnsPerClient = v1alpha1.DefaultTCPConnectionsPerClient
	// DefaultUDPSockets (0) is GOMAXPROCS sockets per listen address.
	DefaultUDPSockets = v1alpha1.DefaultUDPSockets
)

// Default TCP timeouts, v1alpha1's DefaultTCPIdleTimeout and
// DefaultTCPWriteTimeout.
var (
	DefaultTCPIdleTimeout  = v1alpha1.DefaultTCPIdleTimeout.Duration()
	DefaultTCPWriteTimeout = v1alpha1.DefaultTCPWriteTimeout.Duration()
)

// Server serves a dns.Handler over UDP and TCP on each of its addresses.
type Server struct {
	// Listen are the addresses, "ip:port"; each is served over UDP and TCP.
	// Port 0 picks one free port used by both transports.
	Listen []string
	// Handler answers the queries (or SetHandler's, set before Start). One
	// that implements WireAnswerer answers UDP queries from their wire form
	// first, on the reading goroutine, outside MaxUDPInFlight.
	Handler dns.Handler
	// Logger (default: discard).
	Logger *slog.Logger
	// MaxUDPInFlight bounds the UDP queries answered at once; further
	// datagrams are dropped and counted (default DefaultMaxUDPInFlight).
	MaxUDPInFlight int
	// MaxTCPConns bounds the open TCP connections (default
	// DefaultMaxTCPConns): past it, a new connection takes the place of
	// one of the client holding the most, busy or idle (tcpSlots); counted.
	MaxTCPConns int
	// MaxTCPConnsPerClient bounds the open TCP connections of one client
	// address (default DefaultMaxTCPConnsPerClient, at most MaxTCPConns);
	// further ones are closed at once and counted.
	MaxTCPConnsPerClient int
	// TCPIdleTimeout closes a TCP connection with no query for this long
	// (default DefaultTCPIdleTimeout); a connection whose first query does
	// not come is closed after 5 s, or TCPIdleTimeout when shorter.
	TCPIdleTimeout time.Duration
	// TCPWriteTimeout closes a TCP connection whose reply cannot be written
	// within it (default DefaultTCPWriteTimeout).
	TCPWriteTimeout time.Duration
	// Lameduck is how long Run keeps answering after its context ends,
	// with Ready false, before it stops listening (default 0: at once);
	// SetLameduck changes it while Run runs.
	Lameduck time.Duration
	// ReusePort binds the UDP and the TCP socket of every address with
	// SO_REUSEPORT (default false), so that a new instance can bind the
	// address while this one still serves. Every socket sharing it must
	// set it. README.md says what a restart loses.
	ReusePort bool
	// UDPSockets is how many UDP sockets each listen address is bound
	// with, each read by its own goroutine (CoreDNS's multisocket); 0, the
	// default, is GOMAXPROCS. With more than one they carry SO_REUSEPORT,
	// whatever ReusePort says. The TCP socket is one, and bound first.
	UDPSockets int
	// Zones label the request metrics (Describe): a query is counted under
	// the closest of them that contains its name, or under "." (default:
	// none, every query under "."). Set before the first Start, SetHandler
	// or registration; later changes are not seen.
	Zones []string
	// Name, when set, labels every metric of the server server="<Name>"
	// (serve: "cluster" or "nodelocal", as the cache metrics' server
	// label), so that one Prometheus job may scrape both kinds. Set before
	// the first Start, SetHandler or registration.
	Name string

	mu       sync.Mutex
	tcp      *tcpServer
	udp      *udpSet
	addrs    []string
	g        *guard
	draining atomic.Bool
	stopping atomic.Bool                   // Shutdown has begun (the UDP reads)
	lameduck atomic.Pointer[time.Duration] // SetLameduck's, over Lameduck
	serving  chan struct{}                 // closed once Start has bound every address

	perDatagram bool      // tests: read and write one datagram at a time
	tcpLimits   tcpLimits // tests: the pipelining bounds (zero: the constants)
}

// guard returns the listeners' handler wrapper, made on first use.
func (s *Server) guard() *guard {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.g == nil {
		n := s.MaxUDPInFlight
		if n <= 0 {
			n = DefaultMaxUDPInFlight
		}
		var labels prometheus.Labels
		if s.Name != "" {
			labels = prometheus.Labels{"server": s.Name}
		}
		s.g = &guard{udp: make(chan struct{}, n), log: s.Logger, req: newRequestMetrics(s.Zones, labels), descs: newListenerDescs(labels)}
		if s.g.log == nil {
			s.g.log = slog.New(slog.DiscardHandler)
		}
		if s.Handler != nil {
			h := s.Handler
			s.g.handler.Store(&h)
		}
	}
	return s.g
}

// SetHandler replaces the handler: queries read after it returns are
// answered by h, those being answered finish with the old one, none is
// dropped (serve's config reload).
func (s *Server) SetHandler(h dns.Handler) {
	s.guard().handler.Store(&h)
}

// Ready is false once Run's context has ended (lameduck and after): the
// /readyz check, so that load balancers stop sending new clients while the
// server still answers.
func (s *Server) Ready() bool { return !s.draining.Load() }

// Serving is closed once Start has bound every address and serves them.
func (s *Server) Serving() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving == nil {
		s.serving = make(chan struct{})
	}
	return s.serving
}

// Start binds every address and starts serving in the background. It fails
// (and releases what it bound) when any address cannot be bound.
func (s *Server) Start(ctx context.Context) error {
	if len(s.Listen) == 0 {
		return errors.New("dnsserver: no listen address")
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	g := s.guard()
	if g.handler.Load() == nil {
		if s.Handler == nil {
			return errors.New("dnsserver: no handler")
		}
		h := s.Handler
		g.handler.Store(&h)
	}
	idle, write := s.TCPIdleTimeout, s.TCPWriteTimeout
	if idle <= 0 {
		idle = DefaultTCPIdleTimeout
	}
	if write <= 0 {
		write = DefaultTCPWriteTimeout
	}
	maxConns, perClient := s.MaxTCPConns, s.MaxTCPConnsPerClient
	if maxConns <= 0 {
		maxConns = DefaultMaxTCPConns
	}
	if perClient <= 0 {
		perClient = DefaultMaxTCPConnsPerClient
	}
	lim := s.tcpLimits.orDefaults()
	tcp := &tcpServer{g: g, log: s.Logger, slots: newTCPSlots(g, maxConns, perClient),
		share: newTCPShare(lim.inFlight, lim.perClient, lim.reserve), pipelined: lim.pipelined,
		first: min(tcpReadTimeout, idle), idle: idle, write: write, maxQueries: tcpMaxQueries,
		work: newWorkers(func(j tcpJob) { j.c.serveQuery(j.req) })}
	nsock := s.UDPSockets
	if nsock <= 0 {
		nsock = runtime.GOMAXPROCS(0)
	}
	var addrs []string
	set := &udpSet{log: s.Logger, stopping: &s.stopping}
	set.work = newWorkers(set.serve)
	fail := func(err error) error {
		set.close()
		tcp.close()
		return err
	}
	for i, a := range s.Listen {
		pcs, ln, err := reuseport.Listen(ctx, a, v1alpha1.BindFamily(s.Listen, i), nsock, s.ReusePort)
		if err != nil {
			return fail(fmt.Errorf("listen %q: %w", a, err))
		}
		lh := listenHandler{g: g, c: g.listen(a)}
		tcp.listeners, tcp.handlers = append(tcp.listeners, ln), append(tcp.handlers, lh)
		for i, pc := range pcs {
			u, err := newUDPSocket(pc, g, lh, set, s.perDatagram)
			if err != nil {
				for _, pc := range pcs[i:] {
					pc.Close()
				}
				return fail(fmt.Errorf("listen %q: %w", a, err))
			}
			set.socks = append(set.socks, u)
		}
		addrs = append(addrs, pcs[0].LocalAddr().String())
	}
	s.stopping.Store(false)
	tcp.start()
	set.start()
	s.mu.Lock()
	s.tcp, s.udp, s.addrs = tcp, set, addrs
	if s.serving == nil {
		s.serving = make(chan struct{})
	}
	select {
	case <-s.serving: // a second Start
	default:
		close(s.serving)
	}
	s.mu.Unlock()
	return nil
}

// Addrs returns the bound addresses (UDP and TCP share each), in the order of
// Listen, after Start.
func (s *Server) Addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.addrs...)
}

// Shutdown stops every listener and waits for the in-flight queries, bounded
// by ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	tcp, udp := s.tcp, s.udp
	s.tcp, s.udp = nil, nil
	s.mu.Unlock()
	s.stopping.Store(true)
	var errs []error
	if udp != nil {
		if err := udp.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if tcp != nil {
		if err := tcp.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetLameduck sets the lameduck of a Run whose context has not ended yet
// (serve's config reload); safe for concurrent use.
func (s *Server) SetLameduck(d time.Duration) { s.lameduck.Store(&d) }

// Run starts the server, logs "serving DNS" with the bound addresses, and
// serves until ctx is done; then, for Lameduck, it keeps answering with
// Ready false, and shuts down within five seconds. A shutdown that does not
// finish in time is logged ("dns shutdown") and returned.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	s.Logger.Info("serving DNS", "listen", s.Addrs())
	<-ctx.Done()
	s.draining.Store(true)
	lameduck := s.Lameduck
	if d := s.lameduck.Load(); d != nil {
		lameduck = *d
	}
	if lameduck > 0 {
		s.Logger.Info("lameduck: still answering, /readyz failing", "for", lameduck)
		t := time.NewTimer(lameduck)
		<-t.C
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := s.Shutdown(sctx)
	if err != nil {
		s.Logger.Warn("dns shutdown", "err", err)
	}
	return err
}
