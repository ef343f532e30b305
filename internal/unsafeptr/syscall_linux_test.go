package unsafeptr

import (
	"os"
	"syscall"
	"testing"
)

// TestRawSyscallSlice writes a slice through write(2), which takes the
// same arguments as recvmmsg and sendmmsg: fd, a pointer and a count.
func TestRawSyscallSlice(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	n, errno := RawSyscallSlice(syscall.SYS_WRITE, w.Fd(), []byte("batch"))
	if errno != 0 || n != 5 {
		t.Fatalf("write = %d, %v", n, errno)
	}
	buf := make([]byte, 8)
	if k, err := r.Read(buf); err != nil || string(buf[:k]) != "batch" {
		t.Errorf("read %q, %v", buf[:k], err)
	}
	if _, errno := RawSyscallSlice(syscall.SYS_WRITE, ^uintptr(0), []byte("x")); errno != syscall.EBADF {
		t.Errorf("write on a bad fd: %v, want EBADF", errno)
	}
}
