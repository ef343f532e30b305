// Package unsafeptr holds every use of unsafe in the product.
//
// Each function is one pattern that unsafe.Pointer's documentation allows:
//
//   - String: unsafe.String over a []byte's bytes.
//   - Words: a []uint32 read as bytes, *uint32 to *byte (pattern 1),
//     within the slice's allocation (unsafe.Slice).
//   - View: a *From read as a *To of the same size (pattern 1).
//   - Tail: the bytes after a value in its allocation, unsafe.Add within
//     one object (pattern 3).
//   - RawSyscallSlice: a slice's first element converted to uintptr in
//     the call expression of a system call (pattern 4).
//
// Callers keep the contract each function states: packed nodes and
// strings in package pack, recvmmsg and sendmmsg in package udpbatch. go
// test -race turns checkptr on, which checks every conversion here
// (.ci/run's race stage runs the packages that use this one).
//
// This package imports only the standard library.
package unsafeptr
