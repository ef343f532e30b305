// Package reuseport is the socket option that lets a new instance of a
// server bind the addresses an old one still serves (SO_REUSEPORT), so that
// a rolling restart with surge has no gap: the DNS listeners and the
// metrics/health listener of `serve` share it.
package reuseport

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Control is a net.ListenConfig.Control that sets SO_REUSEPORT before the
// socket is bound. Every socket sharing an address must set it, and on
// Linux belong to the same user.
func Control(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_REUSEPORT: %w", serr)
	}
	return nil
}
