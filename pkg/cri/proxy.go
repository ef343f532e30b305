package cri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/h2relay"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// MaxMsgSize is kubelet's and containerd's gRPC message limit (16 MiB).
// Other messages pass through the relay without a limit of the shim's; a
// RunPodSandbox request it holds (a real one is a few KiB) is bounded by
// h2relay's Limits.MaxHeldRequest (1 MiB).
const MaxMsgSize = 16 << 20

// MaxHeld is how many RunPodSandbox requests the shim holds at once, over
// all connections; one beyond gets ResourceExhausted, which kubelet
// retries with its sandbox-creation backoff. Held memory is at most
// MaxHeld × 1 MiB (h2relay's MaxHeldRequest), so the shim stays under
// 150 MiB whatever the peers send.
const MaxHeld = 64

// runPodSandboxMethod is the one method whose request the relay holds
// and the shim decodes.
const runPodSandboxMethod = runtimeapi.RuntimeService_RunPodSandbox_FullMethodName

// Limits is what the shim does when a pod's merged DNS config exceeds
// kubelet's limits (3 nameservers; 32 search paths, 2048 characters).
type Limits string

// The limits modes.
const (
	// LimitsTrim trims as kubelet does, with an Event on the pod, a log
	// line and a metric.
	LimitsTrim Limits = "trim"
	// LimitsReject fails RunPodSandbox with InvalidArgument.
	LimitsReject Limits = "reject"
)

// FailurePolicy is what the shim does when it cannot compute a sandbox's
// DNS (a malformed request, an unusable host resolver config, an engine
// error, a bug).
type FailurePolicy string

// The failure policies.
const (
	// FailOpen forwards kubelet's request unchanged and counts it.
	FailOpen FailurePolicy = "open"
	// FailClosed fails RunPodSandbox.
	FailClosed FailurePolicy = "closed"
)

// Option tunes a Server.
type Option func(*Server)

// WithPodLookup sets where pods come from (the API server); without it the
// sandbox config is the only source.
func WithPodLookup(p podfacts.PodLookup) Option { return func(s *Server) { s.pods = p } }

// WithEvents sets where Events about pods go; without it none are emitted.
func WithEvents(e podfacts.EventSink) Option { return func(s *Server) { s.events = e } }

// WithLimits sets the limits mode (default LimitsTrim).
func WithLimits(l Limits) Option { return func(s *Server) { s.limits = l } }

// WithFailurePolicy sets the failure policy (default FailOpen).
func WithFailurePolicy(f FailurePolicy) Option { return func(s *Server) { s.failure = f } }

// WithLookupTimeout bounds the wait for a pod the lookup has not seen yet
// (default 2s).
func WithLookupTimeout(d time.Duration) Option { return func(s *Server) { s.lookupTimeout = d } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithRegistry registers the shim's metrics on r (default: not registered).
func WithRegistry(r prometheus.Registerer) Option { return func(s *Server) { s.reg = r } }

// WithShutdownTimeout bounds how long Serve lets the calls in flight finish
// once its context is done (default 5s); then every connection is closed,
// whatever the peers do.
func WithShutdownTimeout(d time.Duration) Option { return func(s *Server) { s.shutdownTimeout = d } }

// DefaultMaxConns is how many kubelet-side connections the shim serves at
// once by default. Kubelet opens one or two, but other clients of the
// runtime socket (crictl, critest, probes) may open many and leave them
// idle; containerd itself has no such limit. Held requests are bounded
// over all connections (MaxHeld).
const DefaultMaxConns = v1alpha1.DefaultShimMaxConnections

// WithMaxConns bounds the connections served at once (default
// DefaultMaxConns; at most what the open-file limit leaves room for, see
// ConnBudget). A new connection beyond it takes the place of the
// connection idle the longest (no call in flight), which is sent GOAWAY
// and closed (dnsconfigurer_cri_connections_evicted_total); it is closed
// at once only when every connection has a call in flight
// (dnsconfigurer_cri_connections_refused_total).
func WithMaxConns(n int) Option { return func(s *Server) { s.maxConns = n } }

// fdsPerConn is what a served connection costs in file descriptors: the
// kubelet side and the runtime side.
const fdsPerConn = 2

// FDReserve is how many file descriptors ConnBudget keeps for everything
// but the relayed connections: the listener, the runtime health
// connection, the API server's, the metrics server's and its clients,
// the resolver file watch.
const FDReserve = 256

// ConnBudget is how many connections an open-file limit of nofile file
// descriptors leaves room for: two per connection, after FDReserve.
// It is at least 1.
func ConnBudget(nofile uint64) int {
	if nofile <= FDReserve+fdsPerConn {
		return 1
	}
	return int(min((nofile-FDReserve)/fdsPerConn, 1<<30))
}

// evictWait bounds the GOAWAY written to an idle connection that makes
// room for a new one; the accept loop waits for it, so that the file
// descriptors are free before the new connection is served.
const evictWait = 100 * time.Millisecond

// WithMaxBackoff caps the delay between reconnection attempts to the
// runtime (default 2s).
func WithMaxBackoff(d time.Duration) Option { return func(s *Server) { s.maxBackoff = d } }

// Server is the CRI shim: it relays each kubelet connection to a runtime
// connection of its own with pkg/h2relay, which passes every frame through
// byte for byte and hands the Server each RunPodSandbox request to
// rewrite.
type Server struct {
	endpoint      string
	runtimePath   string
	eng           *policy.Engine
	host          HostConfig
	pods          podfacts.PodLookup
	events        podfacts.EventSink
	limits        Limits
	failure       FailurePolicy
	lookupTimeout time.Duration
	maxBackoff    time.Duration
	log           *slog.Logger
	reg           prometheus.Registerer

	shutdownTimeout time.Duration
	maxConns        int
	held            *h2relay.HeldSlots // RunPodSandbox requests held, across connections

	m     *metrics
	conn  *grpc.ClientConn // the runtime's health, for RuntimeReady
	known map[string]bool

	mu      sync.Mutex
	conns   map[*served]struct{}
	live    int            // connections holding one of the maxConns places
	capSeen bool           // the cap was reached once (logged)
	pending sync.WaitGroup // connections being served
	closed  bool
	l       net.Listener
}

// served is a kubelet connection being served: relayed to the runtime
// connection up, or answered with Unavailable (relay and up nil), or being
// dialled (relay and up nil yet). relay, up and released are guarded by
// Server.mu.
type served struct {
	down     net.Conn
	accepted time.Time
	relay    *h2relay.Relay
	up       net.Conn
	released bool // its place among maxConns is free again
}

// closeAfterDrain is how long Serve waits, after closing every connection
// itself, for the goroutines serving them to return before it gives up on
// them (they hold no socket by then).
const closeAfterDrain = 2 * time.Second

// New returns a shim that forwards to the runtime at endpoint (a socket
// path or a unix:// URL, as kubelet's --container-runtime-endpoint) and
// computes pod DNS with eng from the node resolver config host holds. It
// does not connect before Serve.
func New(endpoint string, eng *policy.Engine, host HostConfig, opts ...Option) (*Server, error) {
	if eng == nil {
		return nil, errors.New("cri: no policy engine")
	}
	if host == nil {
		return nil, errors.New("cri: no host resolver config")
	}
	s := &Server{eng: eng, host: host, limits: LimitsTrim, failure: FailOpen,
		lookupTimeout: v1alpha1.DefaultPodLookupTimeout, maxBackoff: 2 * time.Second, shutdownTimeout: 5 * time.Second, maxConns: DefaultMaxConns, held: h2relay.NewHeldSlots(MaxHeld), log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	if s.maxConns < 1 {
		return nil, fmt.Errorf("cri: max connections %d: must be at least 1", s.maxConns)
	}
	if nofile, ok := openFileLimit(); ok && ConnBudget(nofile) < s.maxConns {
		s.log.Warn("the open-file limit leaves room for fewer CRI connections than configured; serving fewer",
			"maxConnections", s.maxConns, "openFileLimit", nofile, "served", ConnBudget(nofile))
		s.maxConns = ConnBudget(nofile)
	}
	switch s.limits {
	case LimitsTrim, LimitsReject:
	default:
		return nil, fmt.Errorf("cri: limits %q: must be %q or %q", s.limits, LimitsTrim, LimitsReject)
	}
	switch s.failure {
	case FailOpen, FailClosed:
	default:
		return nil, fmt.Errorf("cri: failure policy %q: must be %q or %q", s.failure, FailOpen, FailClosed)
	}
	target, err := unixTarget(endpoint)
	if err != nil {
		return nil, err
	}
	s.endpoint = endpoint
	s.log = s.log.With("component", "cri")
	if s.m, err = newMetrics(s.reg); err != nil {
		return nil, fmt.Errorf("cri: register metrics: %w", err)
	}
	s.runtimePath = strings.TrimPrefix(target, "unix://")
	// A connection of its own tells whether the runtime is up (/readyz,
	// the runtime_connected metric); calls never use it.
	s.conn, err = grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: s.maxBackoff},
			MinConnectTimeout: 5 * time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("cri: runtime endpoint %q: %w", endpoint, err)
	}
	s.known = make(map[string]bool)
	for _, sd := range []*grpc.ServiceDesc{&runtimeapi.RuntimeService_ServiceDesc, &runtimeapi.ImageService_ServiceDesc} {
		for _, m := range sd.Methods {
			s.known["/"+sd.ServiceName+"/"+m.MethodName] = true
		}
		for _, st := range sd.Streams {
			s.known["/"+sd.ServiceName+"/"+st.StreamName] = true
		}
	}
	s.conns = map[*served]struct{}{}
	return s, nil
}

// unixTarget turns a socket path or unix:// URL into a gRPC target.
func unixTarget(endpoint string) (string, error) {
	path := endpoint
	if rest, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		path = rest
	} else if strings.Contains(endpoint, "://") {
		return "", fmt.Errorf("cri: runtime endpoint %q: only unix sockets are supported", endpoint)
	}
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("cri: runtime endpoint %q: want an absolute socket path or unix:///path", endpoint)
	}
	return "unix://" + path, nil
}

// Serve relays the kubelet connections l accepts until ctx is done, then
// stops in bounded time whatever the peers do: each relay tells kubelet to
// open no more calls (GOAWAY), calls in flight get the shutdown timeout
// (5s by default) together, streams such as GetContainerEvents are cut,
// and every connection is closed by the Server itself (a relay stuck
// writing to a runtime that stopped reading cannot hold it up). It returns
// nil after ctx is done.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	defer s.Close()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("cri: serve: server closed")
	}
	s.l = l
	s.mu.Unlock()
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watchRuntime(watchCtx)
	}()
	defer func() { stopWatch(); <-watched }()
	connCtx, stopConns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConns()
	errc := make(chan error, 1)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				errc <- err
				return
			}
			c := &served{down: conn, accepted: time.Now()}
			if err := s.admit(c); err != nil {
				// Count before closing: the client sees EOF only
				// after the metric says why.
				if errors.Is(err, errAllBusy) {
					s.m.refusedConns.Inc()
					s.log.Warn("every CRI connection has a call in flight and the maximum is reached; closed a new one", "maxConnections", s.maxConns)
				}
				conn.Close()
				continue
			}
			go func() {
				defer s.pending.Done()
				defer s.untrack(c)
				s.serveConn(connCtx, c)
			}()
		}
	}()
	s.log.Info("serving CRI", "listen", l.Addr().String(), "runtime", s.endpoint, "limits", string(s.limits), "failurePolicy", string(s.failure), "apiServer", s.pods != nil, "maxConnections", s.maxConns)
	select {
	case err := <-errc:
		return fmt.Errorf("cri: serve: %w", err)
	case <-ctx.Done():
	}
	l.Close()
	<-errc
	begin := time.Now()
	if !s.drain(s.shutdownTimeout) {
		s.log.Warn("calls still in flight after the shutdown timeout; closing their connections", "timeout", s.shutdownTimeout.String())
	}
	stopConns()
	s.closeConns()
	if !waitGroup(&s.pending, closeAfterDrain) {
		s.log.Warn("connection goroutines still running after their sockets were closed; not waiting for them", "waited", closeAfterDrain.String())
	}
	s.log.Info("stopped serving CRI", "took", time.Since(begin).String())
	return nil
}

// drain sends every relay's client a GOAWAY and waits up to d for their
// calls in flight; it reports whether they all ended. A relay that cannot
// even send the GOAWAY (its writer is stuck) only costs the wait.
func (s *Server) drain(d time.Duration) bool {
	s.mu.Lock()
	var rs []*h2relay.Relay
	for c := range s.conns {
		if c.relay != nil {
			rs = append(rs, c.relay)
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-r.Drain()
		}()
	}
	return waitGroup(&wg, d)
}

// waitGroup waits for wg at most d; it reports whether wg was done.
func waitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// errAllBusy and errServerClosed are why admit did not take a connection.
var (
	errAllBusy      = errors.New("every connection has a call in flight")
	errServerClosed = errors.New("server closed")
)

// admit gives c a place among maxConns: a free one, or the place of the
// connection idle the longest, which is evicted (GOAWAY, then closed)
// first. It fails with errAllBusy when every connection has a call in
// flight. Only the accept loop calls it.
func (s *Server) admit(c *served) error {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return errServerClosed
		}
		if s.live < s.maxConns {
			s.live++
			s.conns[c] = struct{}{}
			s.pending.Add(1)
			s.m.conns.Set(float64(s.live))
			s.mu.Unlock()
			return nil
		}
		idle := s.idleLocked()
		first := !s.capSeen
		s.capSeen = true
		s.mu.Unlock()
		if first {
			s.log.Warn("CRI connection maximum reached: new connections take the place of the longest idle ones (GOAWAY)", "maxConnections", s.maxConns)
		}
		evicted := false
		for _, v := range idle {
			if s.evict(v.c) {
				evicted = true
				s.m.evictedConns.Inc()
				s.log.Debug("closed the longest idle CRI connection to serve a new one", "idle", time.Since(v.since).String())
				break
			}
		}
		if !evicted {
			return errAllBusy
		}
	}
}

// idleConn is a connection with no call in flight, and since when.
type idleConn struct {
	c     *served
	since time.Time
}

// idleLocked lists the connections with no call in flight, idle the
// longest first (s.mu held).
func (s *Server) idleLocked() []idleConn {
	var idle []idleConn
	for c := range s.conns {
		if c.released {
			continue
		}
		since, ok := c.accepted, true // being dialled, or answered with Unavailable
		if c.relay != nil {
			since, ok = c.relay.Idle()
		}
		if ok {
			idle = append(idle, idleConn{c, since})
		}
	}
	slices.SortFunc(idle, func(a, b idleConn) int { return a.since.Compare(b.since) })
	return idle
}

// evict closes c if it has no call in flight (a relay sends GOAWAY first)
// and frees its place; it reports whether it did.
func (s *Server) evict(c *served) bool {
	s.mu.Lock()
	r := c.relay
	s.mu.Unlock()
	if r != nil {
		if !r.Evict(evictWait, "dnsconfigurer: idle connection closed to serve a new one") {
			return false
		}
	} else {
		// Not relayed (yet): a connection being dialled, or answered with
		// Unavailable. A relay set up meanwhile reads a closed socket.
		c.down.Close()
	}
	s.release(c)
	return true
}

// release frees c's place among maxConns, once.
func (s *Server) release(c *served) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.released {
		c.released = true
		s.live--
		s.m.conns.Set(float64(s.live))
	}
}

// serveConn relays one kubelet connection to a runtime connection of its
// own, or fails its calls with Unavailable while the runtime is down.
func (s *Server) serveConn(ctx context.Context, c *served) {
	d := net.Dialer{Timeout: 2 * time.Second}
	up, err := d.DialContext(ctx, "unix", s.runtimePath)
	if err != nil {
		s.log.Debug("runtime not reachable; failing calls with Unavailable", "runtime", s.endpoint, "err", err)
		s.serveUnavailable(ctx, c.down, err)
		return
	}
	r := h2relay.New(c.down, up,
		h2relay.WithRewrite(runPodSandboxMethod, sandboxRewriter{s}),
		h2relay.WithObserver(s.observe),
		h2relay.WithHeldSlots(s.held),
		h2relay.WithLogger(s.log))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		r.Close()
		return
	}
	c.relay, c.up = r, up
	s.mu.Unlock()
	if err := r.Run(ctx); err != nil {
		s.log.Debug("relay connection closed", "err", err)
	}
}

// untrack forgets c once it is no longer served.
func (s *Server) untrack(c *served) {
	s.release(c)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// closeConns closes every connection being served: its sockets, which
// ends every read and write on them, and then its relay (in the
// background: Relay.Close may wait for a lock held by a write that only
// now fails).
func (s *Server) closeConns() {
	s.mu.Lock()
	var socks []net.Conn
	var relays []*h2relay.Relay
	for c := range s.conns {
		socks = append(socks, c.down)
		if c.up != nil {
			socks = append(socks, c.up)
		}
		if c.relay != nil {
			relays = append(relays, c.relay)
		}
	}
	s.mu.Unlock()
	for _, c := range socks {
		c.Close()
	}
	for _, r := range relays {
		go r.Close()
	}
}

// Close stops the server at once: the listener and every connection are
// closed; it does not wait for the goroutines serving them. Serve calls it
// on return; it is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	l := s.l
	s.mu.Unlock()
	if l != nil {
		l.Close()
	}
	s.closeConns()
	return s.conn.Close()
}

// watchRuntime keeps the health connection to the runtime up and reports
// its state (RuntimeReady, runtime_connected); gRPC reconnects with
// exponential backoff capped at maxBackoff. Kubelet's calls never use this
// connection: each has a relay to a runtime connection of its own, or
// serveUnavailable while the runtime cannot be dialled.
func (s *Server) watchRuntime(ctx context.Context) {
	s.conn.Connect()
	wasReady := false
	for {
		st := s.conn.GetState()
		ready := st == connectivity.Ready
		if ready {
			s.m.runtimeUp.Set(1)
		} else {
			s.m.runtimeUp.Set(0)
		}
		switch {
		case ready && !wasReady:
			s.log.Info("connected to the runtime", "runtime", s.endpoint)
		case !ready && wasReady:
			s.log.Warn("lost the runtime connection; reconnecting with backoff, calls fail with Unavailable meanwhile", "runtime", s.endpoint, "state", st.String())
		}
		wasReady = ready
		if st == connectivity.Idle {
			s.conn.Connect()
		}
		if !s.conn.WaitForStateChange(ctx, st) {
			return
		}
	}
}

func (s *Server) methodLabel(method string) string {
	if s.known[method] {
		return method
	}
	return "other"
}

// observe counts a call that ended (h2relay.ObserveFunc).
func (s *Server) observe(method string, code codes.Code, d time.Duration) {
	label := s.methodLabel(method)
	s.m.calls.WithLabelValues(label, code.String()).Inc()
	s.m.callDuration.WithLabelValues(label).Observe(d.Seconds())
}

// sandboxRewriter is the relay's hook for RunPodSandbox: it decodes the
// request (unknown fields survive re-encoding), rewrites it with
// (*Server).rewrite and applies the failure policy to a request it cannot
// read.
type sandboxRewriter struct{ s *Server }

var _ h2relay.Rewriter = sandboxRewriter{}

func (h sandboxRewriter) Rewrite(ctx context.Context, msg []byte) ([]byte, error) {
	s := h.s
	req := new(runtimeapi.RunPodSandboxRequest)
	if err := proto.Unmarshal(msg, req); err != nil {
		_, err = s.failed(nil, sourceNone, "bad_request", &badRequestError{"request", "cannot be decoded: " + err.Error()})
		return msg, err
	}
	start := time.Now()
	defer func() { s.m.rewriteSeconds.Observe(time.Since(start).Seconds()) }()
	fwd, changed, err := s.rewrite(ctx, req)
	if err != nil || !changed {
		return msg, err
	}
	b, err := proto.Marshal(fwd)
	if err != nil {
		_, err = s.failed(nil, sourceNone, "compute", fmt.Errorf("encode RunPodSandboxRequest: %w", err))
		return msg, err
	}
	return b, nil
}

func (h sandboxRewriter) Malformed(err error) error {
	_, err = h.s.failed(nil, sourceNone, "bad_request", &badRequestError{"request", err.Error()})
	return err
}

// RuntimeReady reports whether the health connection to the runtime is up.
func (s *Server) RuntimeReady() bool { return s.conn.GetState() == connectivity.Ready }
