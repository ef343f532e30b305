//go:build unix && !linux

package apiserver

import "syscall"

// sysProcAttr puts the child in its own process group, so stop can signal
// everything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
