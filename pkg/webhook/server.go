package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
)

// Defaults of the server's options; those the config file sets are
// the WebhookConfiguration's (api/v1alpha1).
const (
	DefaultMaxRequestBytes = v1alpha1.DefaultMaxRequestBytes
	// DefaultMaxInFlightBytes bounds the request body bytes read and
	// decoded at once: two bodies of the largest size, or any number of
	// typical ones (a few KiB each). Decoding holds about twice a body's
	// size, so this keeps the webhook well under a 128 MiB memory limit.
	DefaultMaxInFlightBytes = 2 * DefaultMaxRequestBytes
	DefaultReadTimeout      = v1alpha1.DefaultReadTimeout
	DefaultWriteTimeout     = v1alpha1.DefaultWriteTimeout
	// DefaultBodyProgressTimeout is the time each 64 KiB of a body (all
	// of a shorter one) has to arrive: at least 32 KiB/s.
	DefaultBodyProgressTimeout = v1alpha1.DefaultBodyProgressTimeout
	DefaultIdleTimeout         = 90 * time.Second
	DefaultShutdownTimeout     = 10 * time.Second
)

type options struct {
	log             *slog.Logger
	reg             prometheus.Registerer
	gatherer        prometheus.Gatherer
	maxBytes        int64
	maxInFlight     int64
	readTimeout     time.Duration
	writeTimeout    time.Duration
	bodyProgress    time.Duration
	clientCAFile    string
	idleTimeout     time.Duration
	shutdownTimeout time.Duration
	debounce        time.Duration
}

// Option configures New.
type Option func(*options)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegistry registers the server's metrics on r (default: none).
func WithRegistry(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithGatherer serves g on /metrics (default: no /metrics).
func WithGatherer(g prometheus.Gatherer) Option { return func(o *options) { o.gatherer = g } }

// WithMaxRequestBytes caps a request body (default DefaultMaxRequestBytes).
func WithMaxRequestBytes(n int64) Option { return func(o *options) { o.maxBytes = n } }

// WithMaxInFlightBytes bounds the request body bytes read and decoded at
// once (default DefaultMaxInFlightBytes; at least the body cap is used). A
// body takes bytes from the budget as they arrive: its buffer, which
// doubles when full, holds at most twice what it has received (at least
// 512 bytes) and never more than its Content-Length. A body that finds the
// budget spent waits its turn, in arrival order, for half the read timeout
// in all, and is then answered 429 with Retry-After.
func WithMaxInFlightBytes(n int64) Option { return func(o *options) { o.maxInFlight = n } }

// WithBodyProgressTimeout sets the time each 64 KiB of a request body (all
// of a shorter body) has to arrive (default DefaultBodyProgressTimeout). A
// body that falls behind, or is not complete within the read timeout, is
// answered 408 and gives its bytes back. Zero keeps the default.
func WithBodyProgressTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.bodyProgress = d
		}
	}
}

// WithClientCAFile makes the server ask for client certificates and answer
// /validate only to a client whose certificate this PEM bundle signed (403
// before the body is read otherwise). /healthz, /readyz and /metrics stay
// open to kubelet's probes. The file is read once, by New.
func WithClientCAFile(path string) Option { return func(o *options) { o.clientCAFile = path } }

// WithTimeouts sets the time allowed to read a request, headers included,
// and to write its response (defaults DefaultReadTimeout and
// DefaultWriteTimeout). Zero keeps the default.
func WithTimeouts(read, write time.Duration) Option {
	return func(o *options) {
		if read > 0 {
			o.readTimeout = read
		}
		if write > 0 {
			o.writeTimeout = write
		}
	}
}

// WithShutdownTimeout bounds the wait for requests in flight when Serve's
// context is done (default DefaultShutdownTimeout).
func WithShutdownTimeout(d time.Duration) Option { return func(o *options) { o.shutdownTimeout = d } }

// WithReloadDebounce sets how long the certificate files must be quiet
// before they are re-read (default 100ms), so that the certificate and the
// key of one rotation are read together.
func WithReloadDebounce(d time.Duration) Option { return func(o *options) { o.debounce = d } }

// Server is the webhook's HTTPS server.
type Server struct {
	o         options
	m         *metrics
	certs     *certReloader
	h         *handler
	clientCAs *x509.CertPool // nil: no client certificates asked for
}

// New checks reviewer, loads the serving certificate and key and registers
// the metrics. It fails when the pair does not load: the webhook must not
// start without a certificate.
func New(reviewer *Reviewer, certFile, keyFile string, opts ...Option) (*Server, error) {
	o := options{log: slog.New(slog.DiscardHandler), maxBytes: DefaultMaxRequestBytes, maxInFlight: DefaultMaxInFlightBytes,
		readTimeout: DefaultReadTimeout, writeTimeout: DefaultWriteTimeout, bodyProgress: DefaultBodyProgressTimeout, idleTimeout: DefaultIdleTimeout,
		shutdownTimeout: DefaultShutdownTimeout, debounce: 100 * time.Millisecond}
	for _, opt := range opts {
		opt(&o)
	}
	o.log = o.log.With("component", "webhook")
	if reviewer == nil || reviewer.Default.Engine == nil {
		return nil, errors.New("webhook: the reviewer needs a default pool engine")
	}
	for i, p := range reviewer.Pools {
		if p.Engine == nil {
			return nil, fmt.Errorf("webhook: node pool %q has no engine", reviewer.Pools[i].Name)
		}
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("webhook: a certificate file and a key file are required")
	}
	clientCAs, err := loadClientCAs(o.clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	budget := newByteBudget(max(o.maxInFlight, o.maxBytes))
	m, err := newMetrics(o.reg, budget)
	if err != nil {
		return nil, fmt.Errorf("webhook: register metrics: %w", err)
	}
	certs, err := newCertReloader(certFile, keyFile, o.debounce, o.log, m)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	rules := bodyRules{limit: o.maxBytes, queue: o.readTimeout / 2, progress: o.bodyProgress, read: o.readTimeout}
	h := &handler{reviewer: reviewer, maxBytes: o.maxBytes, budget: budget, body: rules, clientAuth: clientCAs != nil,
		log: o.log, m: m, ops: health.Handler(o.gatherer)}
	return &Server{o: o, m: m, certs: certs, h: h, clientCAs: clientCAs}, nil
}

// loadClientCAs reads the client CA bundle; "" is none.
func loadClientCAs(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("client CA %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// ListenAndServe listens on addr and calls Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("webhook: listen: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves HTTPS on ln until ctx is done, then shuts down gracefully
// within the shutdown timeout; it returns nil after a clean shutdown caused
// by ctx. The certificate watch is set up before the first connection is
// accepted. ln is closed when Serve returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	watchCtx, stopWatch := context.WithCancel(ctx)
	changes, err := s.certs.watch(watchCtx)
	if err != nil {
		stopWatch()
		ln.Close()
		return fmt.Errorf("webhook: %w", err)
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		s.certs.run(changes)
	}()
	defer func() {
		stopWatch()
		<-watchDone
	}()

	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.GetCertificate}
	if s.clientCAs != nil {
		// Kubelet's probes send no certificate; the handler refuses
		// /validate without one.
		tlsConf.ClientAuth, tlsConf.ClientCAs = tls.VerifyClientCertIfGiven, s.clientCAs
	}
	srv := &http.Server{
		Handler:           s.h,
		TLSConfig:         tlsConf,
		ReadHeaderTimeout: s.o.readTimeout,
		ReadTimeout:       s.o.readTimeout,
		WriteTimeout:      s.o.writeTimeout,
		IdleTimeout:       s.o.idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.o.log.Handler(), slog.LevelWarn),
		// HTTP/2 buffers what a client sends ahead of the handler's reads
		// (1 MiB per connection by default, 64 KiB here); a request waiting for the
		// body budget must not hold a megabyte each.
		HTTP2: &http.HTTP2Config{MaxReceiveBufferPerConnection: 64 << 10, MaxReceiveBufferPerStream: 64 << 10},
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	s.o.log.Info("serving admission reviews", "addr", ln.Addr().String(), "path", PathValidate)

	select {
	case err := <-serveErr:
		return fmt.Errorf("webhook: serve: %w", err)
	case <-ctx.Done():
	}
	err = s.shutdown(srv)
	<-serveErr
	s.o.log.Info("stopped serving admission reviews")
	return err
}

func (s *Server) shutdown(srv *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
		return fmt.Errorf("webhook: shutdown: %w", err)
	}
	return nil
}
