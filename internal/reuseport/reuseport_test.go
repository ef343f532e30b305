package reuseport_test

import (
	"context"
	"net"
	"testing"

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
