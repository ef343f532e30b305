package udpbatch_test

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/udpbatch"
)

var modes = []struct {
	name        string
	perDatagram bool
}{{"batch", false}, {"per-datagram", true}}

// listen binds a UDP socket on addr and wraps it in a Conn with buffers of
// size bytes.
func listen(t *testing.T, addr string, size int, perDatagram bool) *udpbatch.Conn {
	t.Helper()
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	c, err := udpbatch.New(pc, size, perDatagram)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dial is a client socket connected to c: it reads only what comes from
// c's address.
func dial(t *testing.T, c *udpbatch.Conn, to string) *net.UDPConn {
	t.Helper()
	port := c.UDPConn().LocalAddr().(*net.UDPAddr).Port
	cl, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(to), uint16(port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if err := cl.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return cl
}

// readN reads from c until n datagrams have come, answering each with
// reply (nil: no reply), and returns their contents.
func readN(t *testing.T, c *udpbatch.Conn, n int, reply func(m *udpbatch.Msg) []byte) []udpbatch.Msg {
	t.Helper()
	if err := c.UDPConn().SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []udpbatch.Msg
	for len(got) < n {
		ms, err := c.Read()
		if err != nil {
			t.Fatalf("read after %d datagrams: %v", len(got), err)
		}
		for i := range ms {
			m := &ms[i]
			got = append(got, udpbatch.Msg{Buf: bytes.Clone(m.Buf), Peer: m.Peer, Dst: m.Dst})
			r := reply(m)
			m.Out, m.Reply = append(m.Out[:0], r...), r != nil
		}
		if err := c.Write(ms); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	return got
}

// TestReadWrite sends datagrams to a Conn, which answers all but every
// third: each is read whole with the client's address, and each reply
// reaches the client.
func TestReadWrite(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := listen(t, "127.0.0.1:0", 512, mode.perDatagram)
			cl := dial(t, c, "127.0.0.1")
			const n = 40 // more than a batch
			for i := range n {
				if _, err := fmt.Fprintf(cl, "query %d", i); err != nil {
					t.Fatal(err)
				}
			}
			got := readN(t, c, n, func(m *udpbatch.Msg) []byte {
				var i int
				if _, err := fmt.Sscanf(string(m.Buf), "query %d", &i); err != nil || i%3 == 0 {
					return nil
				}
				return fmt.Appendf(nil, "reply %d", i)
			})
			client := cl.LocalAddr().(*net.UDPAddr).AddrPort()
			for i, m := range got {
				if want := fmt.Sprintf("query %d", i); string(m.Buf) != want {
					t.Errorf("datagram %d = %q, want %q", i, m.Buf, want)
				}
				if m.Peer != client {
					t.Errorf("datagram %d from %v, want %v", i, m.Peer, client)
				}
			}
			buf := make([]byte, 512)
			for i := range n {
				if i%3 == 0 {
					continue
				}
				k, err := cl.Read(buf)
				if err != nil {
					t.Fatalf("reply %d: %v", i, err)
				}
				if want := fmt.Sprintf("reply %d", i); string(buf[:k]) != want {
					t.Errorf("reply = %q, want %q", buf[:k], want)
				}
			}
		})
	}
}

// TestCut reads a datagram longer than the buffers: it is cut at their
// size.
func TestCut(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := listen(t, "127.0.0.1:0", 16, mode.perDatagram)
			cl := dial(t, c, "127.0.0.1")
			if _, err := cl.Write([]byte("0123456789abcdefghij")); err != nil {
				t.Fatal(err)
			}
			got := readN(t, c, 1, func(*udpbatch.Msg) []byte { return nil })
			if string(got[0].Buf) != "0123456789abcdef" {
				t.Errorf("read %q, want the first 16 bytes", got[0].Buf)
			}
		})
	}
}

// TestWildcard reads datagrams sent to a wildcard bind: on Linux each
// carries its destination, and its reply leaves from it (the client's
// connected socket takes nothing else), from Write and from WriteTo.
func TestWildcard(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("destination addresses are read on Linux only")
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := listen(t, "0.0.0.0:0", 512, mode.perDatagram)
			for _, to := range []string{"127.0.0.1", "127.0.0.2"} {
				cl := dial(t, c, to)
				if _, err := cl.Write([]byte("q")); err != nil {
					t.Fatal(err)
				}
				got := readN(t, c, 1, func(*udpbatch.Msg) []byte { return []byte("batch") })
				if got[0].Dst.Unmap() != netip.MustParseAddr(to) {
					t.Errorf("destination %v, want %s", got[0].Dst, to)
				}
				done := make(chan error, 1)
				go func() {
					_, err := c.WriteTo([]byte("single"), net.UDPAddrFromAddrPort(got[0].Peer), got[0].Dst)
					done <- err
				}()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 64)
				for _, want := range []string{"batch", "single"} {
					k, err := cl.Read(buf)
					if err != nil {
						t.Fatalf("reply %q from %s: %v", want, to, err)
					}
					if string(buf[:k]) != want {
						t.Errorf("reply %q, want %q", buf[:k], want)
					}
				}
			}
		})
	}
}
