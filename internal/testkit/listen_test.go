package testkit

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// TestAcceptPipe: each connection gets a handler; Pipe passes bytes both
// ways; when the test ends its connections are closed and the handlers
// have returned.
func TestAcceptPipe(t *testing.T) {
	var echoed atomic.Int32
	t.Run("served", func(t *testing.T) {
		echo, front := ListenTCP(t), ListenTCP(t)
		Accept(t, echo, func(c net.Conn) {
			_, _ = io.Copy(c, c) // until the front closes its side
			echoed.Add(1)
		})
		Accept(t, front, func(c net.Conn) {
			up, err := net.Dial("tcp", echo.Addr().String())
			if err != nil {
				c.Close()
				return
			}
			Pipe(c, up)
		})
		c, err := net.Dial("tcp", front.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
			t.Fatalf("read %q, %v; want ping", got, err)
		}
	})
	if n := echoed.Load(); n != 1 {
		t.Errorf("%d echo handlers returned when the test ended, want 1", n)
	}
}
