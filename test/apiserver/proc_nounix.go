//go:build !unix

package apiserver

import (
	"errors"
	"syscall"
)

var errUnsupported = errors.New("apiserver: process groups are not supported on this platform")

func sysProcAttr() *syscall.SysProcAttr { return nil }

func terminate(int) error { return errUnsupported }

func kill(int) error { return errUnsupported }

// alive cannot tell here, so it keeps everything.
func alive(int) bool { return true }
