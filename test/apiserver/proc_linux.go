package apiserver

import "syscall"

// sysProcAttr puts the child in its own process group, so stop can signal
// everything it started, and has the kernel kill it if the test binary dies
// without cleaning up (a panic or a go test -timeout).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
