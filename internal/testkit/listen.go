package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Accept calls handle, on a goroutine of its own, for each connection ln
// accepts, until t ends. Then it closes ln and every accepted connection,
// and waits for the handlers to return.
func Accept(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	var wg sync.WaitGroup
	var conns []net.Conn // the accept loop's until accepting is closed
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			wg.Go(func() { handle(c) })
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepting
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	})
}

// Pipe copies between a and b, both ways, until either side ends; then it
// closes both and returns once both copies have.
func Pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
}

// ListenTCP opens a TCP listener on 127.0.0.1, port 0. It fails t when it
// cannot; the caller closes it (Accept does).
func ListenTCP(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// ListenBoth opens UDP and TCP on one port of addr, for a hand-made server
// that NewUpstream cannot be; with port 0 the port is one free for both
// (tried again when TCP finds the port UDP got taken). It fails t when it
// cannot; the caller closes both.
func ListenBoth(t testing.TB, addr string) (net.PacketConn, net.Listener) {
	t.Helper()
	pc, ln, err := listen(addr, []string{"udp", "tcp"})
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	return pc, ln
}
