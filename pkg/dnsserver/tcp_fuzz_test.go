package dnsserver_test

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// FuzzTCPStream: whatever bytes a client sends on a TCP connection (whole
// messages, junk, cut frames, pipelined queries), the server neither
// panics nor stops answering: a query on a fresh connection after them is
// answered. One server serves every input. The client resets its
// connections (SO_LINGER 0): a long run would otherwise use up the
// ephemeral ports in TIME_WAIT.
func FuzzTCPStream(f *testing.F) {
	q, _ := new(dns.Msg).SetQuestion("a.example.", dns.TypeA).Pack()
	frame := func(b []byte) []byte { return append([]byte{byte(len(b) >> 8), byte(len(b))}, b...) }
	f.Add(frame(q))
	f.Add(append(frame(q), frame(q)...))
	f.Add([]byte{0x00, 0x04, 0x00, 0x00, 0x00, 0x00})
	f.Add([]byte{0x00, 0x00})
	f.Add(frame(make([]byte, 11)))
	f.Add([]byte{0xff, 0xff, 0x01})
	f.Add(append(frame(q), 0x00, 0x40, 0x01))
	srv := &dnsserver.Server{Handler: answerA, TCPIdleTimeout: 200 * time.Millisecond}
	addr := startServer(f, srv)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(b)
		reset(c)
		nc, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer reset(nc)
		dc := &dns.Conn{Conn: nc}
		if err := ask(dc, "after.example."); err != nil {
			t.Fatalf("a fresh connection after %x: %v", b, err)
		}
	})
}

// reset closes c with a reset, leaving nothing in TIME_WAIT.
func reset(c net.Conn) {
	_ = c.(*net.TCPConn).SetLinger(0)
	c.Close()
}
