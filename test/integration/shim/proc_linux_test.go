package shim_test

import "syscall"

// sysProcAttr has the kernel kill the shim if the test binary dies without
// stopping it (a panic or a go test -timeout).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
