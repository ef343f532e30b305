package cri

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// serveUnavailable answers kubelet while the runtime cannot be reached: a
// gRPC server on kubelet's connection fails every call at once with
// Unavailable and the dial error (not a hang). Once the runtime answers
// again (probed with backoff capped by maxBackoff) the server stops
// gracefully, which sends GOAWAY, so that kubelet reconnects and is
// relayed.
func (s *Server) serveUnavailable(ctx context.Context, down net.Conn, dialErr error) {
	msg := fmt.Sprintf("dnsconfigurer: the container runtime at %q is not reachable: %v", s.endpoint, dialErr)
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(ss)
		s.observe(method, codes.Unavailable, 0)
		return status.Error(codes.Unavailable, msg)
	}))
	l := newConnListener(down)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	defer func() {
		<-served
		down.Close() // if the server stopped before it took the connection
	}()
	delay := 50 * time.Millisecond
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			srv.Stop()
			return
		case <-l.gone:
			srv.Stop()
			return
		case <-t.C:
		}
		if c, err := net.DialTimeout("unix", s.runtimePath, time.Second); err == nil {
			c.Close()
			s.stopGracefully(ctx, srv)
			return
		}
		delay = min(delay*2, s.maxBackoff)
		t.Reset(delay)
	}
}

// stopGracefully sends GOAWAY and waits for the calls in flight (a few
// seconds at most: kubelet must answer the GOAWAY's PING).
func (s *Server) stopGracefully(ctx context.Context, srv *grpc.Server) {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		srv.GracefulStop()
	}()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-stopped:
		return
	case <-ctx.Done():
	case <-t.C:
	}
	srv.Stop()
	<-stopped
}

// connListener is a net.Listener that accepts one connection; gone is
// closed when that connection is.
type connListener struct {
	conns  chan net.Conn
	gone   chan struct{}
	closed chan struct{}
	once   sync.Once
}

func newConnListener(c net.Conn) *connListener {
	l := &connListener{conns: make(chan net.Conn, 1), gone: make(chan struct{}), closed: make(chan struct{})}
	l.conns <- &notifyConn{Conn: c, gone: l.gone}
	return l
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return unavailableAddr{} }

type unavailableAddr struct{}

func (unavailableAddr) Network() string { return "unix" }
func (unavailableAddr) String() string  { return "runtime-unavailable" }

// notifyConn closes gone when it is closed.
type notifyConn struct {
	net.Conn
	gone chan struct{}
	once sync.Once
}

func (c *notifyConn) Close() error {
	c.once.Do(func() { close(c.gone) })
	return c.Conn.Close()
}
