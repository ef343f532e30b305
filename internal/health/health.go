package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/reuseport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The paths served.
const (
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathMetrics = "/metrics"
)

// ShutdownTimeout bounds Run's graceful shutdown.
const ShutdownTimeout = 5 * time.Second

// Check is one readiness condition: nil when ready, else why not.
type Check func() error

// Condition is a Check from a boolean: not ready with message msg while ok
// reports false.
func Condition(ok func() bool, msg string) Check {
	return func() error {
		if !ok() {
			return errors.New(msg)
		}
		return nil
	}
}

// Handler serves /healthz, /readyz (every check, in order) and, when g is
// not nil, /metrics from g. Any other path is 404.
func Handler(g prometheus.Gatherer, checks ...Check) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) { ok(w) })
	mux.HandleFunc("GET "+PathReadyz, func(w http.ResponseWriter, _ *http.Request) {
		for _, c := range checks {
			if err := c(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		ok(w)
	})
	if g != nil {
		mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	}
	return mux
}

func ok(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// Server serves a Handler on a listener of its own.
type Server struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
}

// Listen binds addr ("host:port") for h. Errors name the address.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	return listen(addr, h, log, net.ListenConfig{})
}

// ListenReusePort is Listen with SO_REUSEPORT, for a server whose new
// instance binds the same address before the old one stops (DNS listeners
// with serve's reusePort): until it does, a request reaches either.
func ListenReusePort(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	return listen(addr, h, log, net.ListenConfig{Control: reuseport.Control})
}

// Bind is a component's metrics listener: Listen, or ListenReusePort with
// reuse. An empty addr binds nothing and returns a nil Server.
func Bind(addr string, reuse bool, h http.Handler, log *slog.Logger) (*Server, error) {
	switch {
	case addr == "":
		return nil, nil
	case reuse:
		return ListenReusePort(addr, h, log)
	}
	return Listen(addr, h, log)
}

func listen(addr string, h http.Handler, log *slog.Logger, lc net.ListenConfig) (*Server, error) {
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{ln: ln, log: log, srv: &http.Server{Handler: h,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10}}, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run logs "serving metrics", serves until ctx is done, then shuts down
// within ShutdownTimeout. The error is the server's own failure, never the
// cancellation.
func (s *Server) Run(ctx context.Context) error {
	s.log.Info("serving metrics", "listen", s.Addr())
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Close releases the listener of a server that will not Run.
func (s *Server) Close() error { return s.ln.Close() }
