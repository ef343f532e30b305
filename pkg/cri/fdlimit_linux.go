//go:build linux

package cri

import "syscall"

// openFileLimit is the process's soft RLIMIT_NOFILE (Go raises it to the
// hard limit at start-up); ok is false when it cannot be read or is
// unlimited.
func openFileLimit() (n uint64, ok bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur == ^uint64(0) {
		return 0, false
	}
	return l.Cur, true
}
