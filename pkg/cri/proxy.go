package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// MaxMsgSize is the largest CRI message the shim takes or sends, kubelet's
// and containerd's limit (16 MiB).
const MaxMsgSize = 16 << 20

// Flow-control windows and I/O buffers of both of the shim's connections.
const (
	windowSize     = 4 << 20
	connWindowSize = 16 << 20
	bufferSize     = 256 << 10
)

// runPodSandboxMethod is the one method the shim decodes.
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

// WithMaxBackoff caps the delay between reconnection attempts to the
// runtime (default 2s).
func WithMaxBackoff(d time.Duration) Option { return func(s *Server) { s.maxBackoff = d } }

// Server is the CRI shim: a gRPC server that decodes RunPodSandbox, rewrites
// its DNS, and forwards every call, that one included, to the runtime.
type Server struct {
	endpoint      string
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

	m      *metrics
	conn   *grpc.ClientConn
	srv    *grpc.Server
	known  map[string]methodKind
	closed sync.Once
}

type methodKind uint8

const (
	kindUnknown      methodKind = iota // any shape: pumped both ways
	kindUnary                          // one request, one response
	kindServerStream                   // one request, a stream of responses
)

// runPodSandboxServer is the handler type of the shim's service
// description: only the method the shim rewrites.
type runPodSandboxServer interface {
	RunPodSandbox(context.Context, *runtimeapi.RunPodSandboxRequest) (any, error)
}

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
		lookupTimeout: 2 * time.Second, maxBackoff: 2 * time.Second, log: slog.Default()}
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
	c := newCodec()
	s.conn, err = grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: s.maxBackoff},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(c), grpc.MaxCallRecvMsgSize(MaxMsgSize), grpc.MaxCallSendMsgSize(MaxMsgSize)),
		// A local socket: large windows and buffers let a big response
		// (ListContainers, ListImages) through without flow-control
		// round trips.
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(connWindowSize),
		grpc.WithReadBufferSize(bufferSize),
		grpc.WithWriteBufferSize(bufferSize),
	)
	if err != nil {
		return nil, fmt.Errorf("cri: runtime endpoint %q: %w", endpoint, err)
	}
	s.known = make(map[string]methodKind)
	for _, sd := range []*grpc.ServiceDesc{&runtimeapi.RuntimeService_ServiceDesc, &runtimeapi.ImageService_ServiceDesc} {
		for _, m := range sd.Methods {
			s.known["/"+sd.ServiceName+"/"+m.MethodName] = kindUnary
		}
		for _, st := range sd.Streams {
			k := kindServerStream
			if st.ClientStreams {
				k = kindUnknown
			}
			s.known["/"+sd.ServiceName+"/"+st.StreamName] = k
		}
	}
	s.srv = grpc.NewServer(
		grpc.ForceServerCodecV2(c),
		grpc.UnknownServiceHandler(s.forward),
		grpc.MaxRecvMsgSize(MaxMsgSize),
		grpc.MaxSendMsgSize(MaxMsgSize),
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(connWindowSize),
		grpc.ReadBufferSize(bufferSize),
		grpc.WriteBufferSize(bufferSize),
	)
	s.srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "runtime.v1.RuntimeService",
		HandlerType: (*runPodSandboxServer)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "RunPodSandbox", Handler: runPodSandboxHandler}},
		Metadata:    "api.proto",
	}, s)
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

// Serve answers CRI calls on l until ctx is done, then stops: calls in
// flight get up to 5 seconds (streams such as GetContainerEvents are cut),
// and the runtime connection is closed. It returns nil after ctx is done.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	defer s.Close()
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watchRuntime(watchCtx)
	}()
	defer func() { stopWatch(); <-watched }()
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(l) }()
	s.log.Info("serving CRI", "listen", l.Addr().String(), "runtime", s.endpoint, "limits", string(s.limits), "failurePolicy", string(s.failure), "apiServer", s.pods != nil)
	select {
	case err := <-errc:
		return fmt.Errorf("cri: serve: %w", err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { s.srv.GracefulStop(); close(stopped) }()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		s.srv.Stop()
		<-stopped
	}
	<-errc
	return nil
}

// Close stops the server at once and closes the runtime connection. Serve
// calls it on return; it is safe to call more than once.
func (s *Server) Close() error {
	var err error
	s.closed.Do(func() {
		s.srv.Stop()
		err = s.conn.Close()
	})
	return err
}

// watchRuntime keeps the runtime connection up and reports its state.
// gRPC reconnects with exponential backoff capped at maxBackoff; calls made
// while it is down fail at once with Unavailable.
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

// outgoing carries the caller's metadata to the runtime. The deadline
// travels with ctx; gRPC drops reserved headers itself.
func outgoing(ctx context.Context) context.Context {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		return metadata.NewOutgoingContext(ctx, md)
	}
	return ctx
}

func (s *Server) methodLabel(method string) string {
	if _, ok := s.known[method]; ok {
		return method
	}
	return "other"
}

func (s *Server) observe(method string, err error, start time.Time) {
	label := s.methodLabel(method)
	s.m.calls.WithLabelValues(label, status.Code(err).String()).Inc()
	s.m.callDuration.WithLabelValues(label).Observe(time.Since(start).Seconds())
}

// forward is the handler of every method but RunPodSandbox, including
// methods and services this build does not know.
func (s *Server) forward(_ any, ss grpc.ServerStream) error {
	start := time.Now()
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "cri: stream without a method")
	}
	var err error
	switch s.known[method] {
	case kindUnary:
		err = s.forwardUnary(ss, method)
	case kindServerStream:
		err = s.forwardStream(ss, method, false)
	default:
		err = s.forwardStream(ss, method, true)
	}
	s.observe(method, err, start)
	return err
}

func (s *Server) forwardUnary(ss grpc.ServerStream, method string) error {
	in := new(frame)
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	out := new(frame)
	var header, trailer metadata.MD
	err := s.conn.Invoke(outgoing(ss.Context()), method, in, out, grpc.Header(&header), grpc.Trailer(&trailer))
	in.free()
	if len(header) > 0 {
		_ = ss.SetHeader(header)
	}
	if len(trailer) > 0 {
		ss.SetTrailer(trailer)
	}
	if err != nil {
		out.free()
		return err
	}
	return ss.SendMsg(out)
}

// forwardStream pumps a stream. With one request (a known server-streaming
// method) it is sent before the responses are read; otherwise requests are
// pumped by a goroutine of their own.
func (s *Server) forwardStream(ss grpc.ServerStream, method string, pump bool) error {
	ctx, cancel := context.WithCancel(outgoing(ss.Context()))
	defer cancel()
	var in *frame
	if !pump {
		in = new(frame)
		if err := ss.RecvMsg(in); err != nil {
			return err
		}
	}
	cs, err := s.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		in.free()
		return err
	}
	if pump {
		go func() {
			for {
				f := new(frame)
				if err := ss.RecvMsg(f); err != nil {
					if errors.Is(err, io.EOF) {
						_ = cs.CloseSend()
					} else {
						cancel()
					}
					return
				}
				if err := cs.SendMsg(f); err != nil {
					f.free()
					return // the runtime's status comes from RecvMsg below
				}
			}
		}()
	} else {
		if err := cs.SendMsg(in); err != nil && !errors.Is(err, io.EOF) {
			in.free()
			return err
		}
		in.free()
		_ = cs.CloseSend()
	}
	headerSet := false
	for {
		out := new(frame)
		err := cs.RecvMsg(out)
		if !headerSet {
			headerSet = true
			if md, herr := cs.Header(); herr == nil && len(md) > 0 {
				_ = ss.SetHeader(md)
			}
		}
		if err != nil {
			out.free()
			if md := cs.Trailer(); len(md) > 0 {
				ss.SetTrailer(md)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(out); err != nil {
			out.free()
			return err
		}
	}
}

func runPodSandboxHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	req := new(runtimeapi.RunPodSandboxRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	return srv.(runPodSandboxServer).RunPodSandbox(ctx, req)
}

// RunPodSandbox rewrites the sandbox's DNS config (and hostname) and
// forwards the request. The response is passed through undecoded.
func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (any, error) {
	start := time.Now()
	fwd, err := s.rewrite(ctx, req)
	s.m.rewriteSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		s.observe(runPodSandboxMethod, err, start)
		return nil, err
	}
	out := new(frame)
	var header, trailer metadata.MD
	err = s.conn.Invoke(outgoing(ctx), runPodSandboxMethod, fwd, out, grpc.Header(&header), grpc.Trailer(&trailer))
	if len(header) > 0 {
		_ = grpc.SetHeader(ctx, header)
	}
	if len(trailer) > 0 {
		_ = grpc.SetTrailer(ctx, trailer)
	}
	s.observe(runPodSandboxMethod, err, start)
	if err != nil {
		out.free()
		return nil, err
	}
	return out, nil
}

// RuntimeReady reports whether the runtime connection is up.
func (s *Server) RuntimeReady() bool { return s.conn.GetState() == connectivity.Ready }
