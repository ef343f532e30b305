package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// readBuffer is the largest UDP query read; longer datagrams are cut and
// then rejected as malformed.
const readBuffer = 4096

// TCP connection limits (RFC 7766 6.2.3). A connection is closed when its
// first query does not arrive within tcpReadTimeout, when no further query
// arrives within tcpIdleTimeout, after tcpMaxQueries queries, and when one
// reply cannot be written within tcpWriteTimeout: a client that sends
// queries and never reads fills the socket buffers, the next write times out
// and the connection, its goroutine and its socket are released (about
// tcpWriteTimeout after the buffers fill). miekg/dns has a WriteTimeout
// field but never sets a write deadline, so the listener does it (tcpConn).
const (
	tcpReadTimeout  = 5 * time.Second
	tcpIdleTimeout  = 10 * time.Second
	tcpWriteTimeout = 5 * time.Second
	tcpMaxQueries   = 128
)

// Server serves a dns.Handler over UDP and TCP on each of its addresses.
type Server struct {
	// Listen are the addresses, "ip:port"; each is served over UDP and TCP.
	// Port 0 picks one free port used by both transports.
	Listen []string
	// Handler answers the queries.
	Handler dns.Handler
	// Logger (default: discard).
	Logger *slog.Logger

	mu      sync.Mutex
	servers []*dns.Server
	addrs   []string
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
	var servers []*dns.Server
	var addrs []string
	fail := func(err error) error {
		for _, srv := range servers {
			if srv.PacketConn != nil {
				srv.PacketConn.Close()
			}
			if srv.Listener != nil {
				srv.Listener.Close()
			}
		}
		return err
	}
	for _, a := range s.Listen {
		pc, ln, err := bindPair(ctx, a)
		if err != nil {
			return fail(fmt.Errorf("listen %q: %w", a, err))
		}
		servers = append(servers,
			&dns.Server{PacketConn: pc, Handler: s.Handler, UDPSize: readBuffer},
			&dns.Server{Listener: tcpListener{ln}, Handler: s.Handler, ReadTimeout: tcpReadTimeout,
				IdleTimeout: func() time.Duration { return tcpIdleTimeout }, MaxTCPQueries: tcpMaxQueries})
		addrs = append(addrs, pc.LocalAddr().String())
	}
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Add(1)
		srv.NotifyStartedFunc = wg.Done
		go func() {
			if err := srv.ActivateAndServe(); err != nil {
				s.Logger.Error("dns server stopped", "err", err)
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	s.servers, s.addrs = servers, addrs
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
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		if err := srv.ShutdownContext(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run starts the server, logs "serving DNS" with the bound addresses, and
// serves until ctx is done, then shuts down within five seconds. A shutdown
// that does not finish in time is logged ("dns shutdown") and returned.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	s.Logger.Info("serving DNS", "listen", s.Addrs())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := s.Shutdown(sctx)
	if err != nil {
		s.Logger.Warn("dns shutdown", "err", err)
	}
	return err
}

// bindPair binds UDP and TCP on the same address; with port 0 it retries
// until both transports get the same free port.
func bindPair(ctx context.Context, addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	var lc net.ListenConfig
	var lastErr error
	for range 20 {
		pc, err := lc.ListenPacket(ctx, "udp", addr)
		if err != nil {
			return nil, nil, err
		}
		p := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, p))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
		if port != "0" {
			break
		}
	}
	return nil, nil, lastErr
}

// tcpListener hands out connections whose writes time out.
type tcpListener struct{ net.Listener }

func (l tcpListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tcpConn{Conn: c}, nil
}

// tcpConn bounds every write by tcpWriteTimeout and closes the connection
// when a write fails, so that the server's read loop ends too (miekg/dns
// keeps reading after a failed write).
type tcpConn struct{ net.Conn }

func (c *tcpConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(tcpWriteTimeout)); err != nil {
		c.Conn.Close()
		return 0, err
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		c.Conn.Close()
	}
	return n, err
}
