package h2relay

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// hangup returns a function that reports whether peer has hung up (closed
// its end, or at least its sending side, or reset), without reading from
// it: poll(2) for POLLRDHUP, which the kernel reports whatever data is
// still unread. It returns nil unless both conn, the connection a write
// blocks on, and peer are plain sockets: a write to a TLS connection cut
// short by a deadline cannot be resumed.
func hangup(conn, peer net.Conn) func() bool {
	if _, ok := conn.(syscall.Conn); !ok {
		return nil
	}
	sc, ok := peer.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() bool {
		gone := false
		_ = rc.Control(func(fd uintptr) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			if n, err := unix.Poll(p, 0); err == nil && n > 0 {
				gone = p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
			}
		})
		return gone
	}
}
