//go:build unix

package apiserver

import (
	"errors"
	"syscall"
)

// terminate asks the process group led by pid to shut down.
func terminate(pid int) error {
	return signalGroup(pid, syscall.SIGTERM)
}

// kill kills the process group led by pid.
func kill(pid int) error {
	return signalGroup(pid, syscall.SIGKILL)
}

func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
