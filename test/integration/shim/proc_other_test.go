//go:build !linux

package shim_test

import "syscall"

// sysProcAttr: only Linux can tie the shim's life to the test binary's.
func sysProcAttr() *syscall.SysProcAttr { return nil }
