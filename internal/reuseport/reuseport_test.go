package reuseport_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/reuseport"
)

// listen is Listen, closing what it bound at the end of the test.
func listen(t *testing.T, addr string, n int, reuse bool) ([]*net.UDPConn, net.Listener, error) {
	t.Helper()
	pcs, ln, err := reuseport.Listen(context.Background(), addr, "", n, reuse)
	if err == nil {
		t.Cleanup(func() {
			ln.Close()
			for _, pc := range pcs {
				pc.Close()
			}
		})
	}
	return pcs, ln, err
}

// TestListenOnePort binds port 0 with three UDP sockets: they and the
// TCP socket share one port.
func TestListenOnePort(t *testing.T) {
	pcs, ln, err := listen(t, "127.0.0.1:0", 3, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(pcs) != 3 {
		t.Fatalf("%d UDP sockets, want 3", len(pcs))
	}
	port := ln.Addr().(*net.TCPAddr).Port
	for i, pc := range pcs {
		if p := pc.LocalAddr().(*net.UDPAddr).Port; p != port {
			t.Errorf("UDP socket %d on port %d, TCP on %d", i, p, port)
		}
	}
}

// TestListenTwice binds an address a second time: with reuse on both it
// succeeds; without, the second fails at its TCP socket.
func TestListenTwice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reuse bool
	}{{"reuse", true}, {"no reuse", false}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ln, err := listen(t, "127.0.0.1:0", 1, tc.reuse)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = listen(t, ln.Addr().String(), 1, tc.reuse)
			if tc.reuse && err != nil {
				t.Errorf("second bind with reuse: %v", err)
			}
			if !tc.reuse && err == nil {
				t.Error("second bind without reuse succeeded")
			}
		})
	}
}

// TestDetach: two sockets share an address; once one is detached, it
// keeps what it had queued and can still reply, and every new datagram
// goes to the other. A wildcard socket of each family detaches too.
func TestDetach(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			pcs, _, err := listen(t, addr, 2, true)
			if err != nil {
				t.Skipf("listen %s: %v", addr, err)
			}
			old, next := pcs[0], pcs[1]
			to := old.LocalAddr().(*net.UDPAddr)
			send := func(n int) {
				for i := range n {
					c, err := net.DialUDP("udp", nil, to)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := c.Write([]byte{byte(i)}); err != nil {
						t.Fatal(err)
					}
					c.Close()
				}
			}
			// Queued counts what is waiting in u, answering the first.
			queued := func(u *net.UDPConn, reply bool) int {
				n := 0
				buf := make([]byte, 16)
				for {
					if err := u.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
						t.Fatal(err)
					}
					_, peer, err := u.ReadFromUDP(buf)
					if err != nil {
						return n
					}
					if n == 0 && reply {
						if _, err := u.WriteToUDP([]byte("reply"), peer); err != nil {
							t.Errorf("reply from the detached socket: %v", err)
						}
					}
					n++
				}
			}
			send(64)
			if err := reuseport.Detach(old); err != nil {
				t.Fatal(err)
			}
			a, b := queued(old, true), queued(next, false)
			if a == 0 || a+b != 64 {
				t.Errorf("before Detach: %d datagrams queued in the detached socket, %d in the other; want some in each, 64 in all", a, b)
			}
			send(64)
			if a, b := queued(old, false), queued(next, false); a != 0 || b != 64 {
				t.Errorf("after Detach: %d datagrams to the detached socket, %d to the other; want 0 and 64", a, b)
			}
		})
	}
	for _, addr := range []string{"0.0.0.0:0", "[::]:0"} {
		pc, err := net.ListenUDP("udp", mustUDPAddr(t, addr))
		if err != nil {
			t.Fatal(err)
		}
		if err := reuseport.Detach(pc); err != nil {
			t.Errorf("detach %s: %v", addr, err)
		}
		pc.Close()
	}
}

func mustUDPAddr(t *testing.T, s string) *net.UDPAddr {
	t.Helper()
	a, err := net.ResolveUDPAddr("udp", s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
