package nriplugin

import (
	"os"
	"syscall"
)

// openNoFollow opens path with flag, refusing a symbolic link as its last
// element, and without blocking on a named pipe.
func openNoFollow(path string, flag int) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// fallocKeepSize is FALLOC_FL_KEEP_SIZE: allocate without changing the
// file's size.
const fallocKeepSize = 0x1

// reserve allocates the blocks of f's first n bytes without changing its
// size or content, so that a write of n bytes cannot run out of space
// half way. A file system without fallocate skips the reservation.
func reserve(f *os.File, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = syscall.Fallocate(int(fd), fallocKeepSize, 0, n) }); err != nil {
		return err
	}
	if ferr == syscall.EOPNOTSUPP || ferr == syscall.ENOSYS {
		return nil
	}
	return ferr
}
