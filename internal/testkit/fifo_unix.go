//go:build unix

package testkit

import (
	"syscall"
	"testing"
)

// FIFO makes a named pipe at path, with no writer; it skips the test where
// the file system cannot hold one.
func FIFO(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}
