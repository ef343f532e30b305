package unsafeptr

import (
	"syscall"
	"unsafe"
)

// RawSyscallSlice is the raw system call trap(fd, &s[0], len(s)), as
// recvmmsg and sendmmsg take a batch of headers; s must not be empty. The
// uintptr conversion is in syscall.RawSyscall6's call expression (pattern
// 4), so s stays alive and in place until the call returns.
func RawSyscallSlice[T any](trap, fd uintptr, s []T) (uintptr, syscall.Errno) {
	n, _, e := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(unsafe.SliceData(s))), uintptr(len(s)), 0, 0, 0)
	return n, e
}
