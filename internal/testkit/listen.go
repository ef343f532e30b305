package testkit

import (
	"net"
	"testing"
)

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
