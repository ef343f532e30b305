// Package reuseport sets SO_REUSEPORT, so a new instance of a server can
// bind the addresses an old one still serves.
//
// A rolling restart with surge then has no gap. The DNS listeners and the
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
