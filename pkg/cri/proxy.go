package cri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
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

	"github.com/dnsconfigurer/dnsconfigurer/pkg/h2relay"
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
func WithPodLookup(p PodLookup) Option { return func(s *Server) { s.pods = p } }

// WithEvents sets where Events about pods go; without it none are emitted.
func WithEvents(e EventSink) Option { return func(s *Server) { s.events = e } }

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
// once (kubelet opens one or two; crictl and probes a few more). Held
// requests are bounded over all of them (MaxHeld).
const DefaultMaxConns = 16

// WithMaxConns bounds the connections served at once (default
// DefaultMaxConns); one beyond it is closed at once and counted in
// dnsconfigurer_cri_connections_refused_total.
func WithMaxConns(n int) Option { return func(s *Server) { s.maxConns = n } }

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
	pods          PodLookup
	events        EventSink
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
	pending sync.WaitGroup // connections being served
	closed  bool
	l       net.Listener
}

// served is a kubelet connection being served: relayed to the runtime
// connection up, or answered with Unavailable (relay and up nil).
type served struct {
	relay    *h2relay.Relay
	down, up net.Conn
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
		lookupTimeout: 2 * time.Second, maxBackoff: 2 * time.Second, shutdownTimeout: 5 * time.Second, maxConns: DefaultMaxConns, held: h2relay.NewHeldSlots(MaxHeld), log: slog.Default()}
	for _, o := range opts {
		o(s)
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
	slots := make(chan struct{}, max(s.maxConns, 1))
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				errc <- err
				return
			}
			select {
			case slots <- struct{}{}:
			default:
				c.Close()
				s.m.refusedConns.Inc()
				s.log.Warn("too many CRI connections; closed a new one", "max", cap(slots))
				continue
			}
			s.pending.Add(1)
			go func() {
				defer func() { <-slots }()
				defer s.pending.Done()
				s.serveConn(connCtx, c)
			}()
		}
	}()
	s.log.Info("serving CRI", "listen", l.Addr().String(), "runtime", s.endpoint, "limits", string(s.limits), "failurePolicy", string(s.failure), "apiServer", s.pods != nil)
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

// serveConn relays one kubelet connection to a runtime connection of its
// own, or fails its calls with Unavailable while the runtime is down.
func (s *Server) serveConn(ctx context.Context, down net.Conn) {
	d := net.Dialer{Timeout: 2 * time.Second}
	up, err := d.DialContext(ctx, "unix", s.runtimePath)
	if err != nil {
		c := &served{down: down}
		if !s.track(c) {
			return
		}
		defer s.untrack(c)
		s.log.Debug("runtime not reachable; failing calls with Unavailable", "runtime", s.endpoint, "err", err)
		s.serveUnavailable(ctx, down, err)
		return
	}
	r := h2relay.New(down, up,
		h2relay.WithRewrite(runPodSandboxMethod, sandboxRewriter{s}),
		h2relay.WithObserver(s.observe),
		h2relay.WithHeldSlots(s.held),
		h2relay.WithLogger(s.log))
	c := &served{relay: r, down: down, up: up}
	if !s.track(c) {
		return
	}
	defer s.untrack(c)
	if err := r.Run(ctx); err != nil {
		s.log.Debug("relay connection closed", "err", err)
	}
}

// track records c, or closes its sockets when the server is closed.
func (s *Server) track(c *served) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *served) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// close closes c's sockets, which ends every read and write on them, and
// then its relay (in the background: Relay.Close may wait for a lock held
// by a write that only now fails).
func (c *served) close() {
	c.down.Close()
	if c.up != nil {
		c.up.Close()
	}
	if c.relay != nil {
		go c.relay.Close()
	}
}

// closeConns closes every connection being served.
func (s *Server) closeConns() {
	s.mu.Lock()
	cs := make([]*served, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.close()
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
