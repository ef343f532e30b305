//go:build linux && (amd64 || arm64 || loong64 || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x)

package memrelease

import (
	"os"
	"syscall"
)

// fadvDontNeed is POSIX_FADV_DONTNEED, which syscall does not name.
const fadvDontNeed = 4

// evict drops the file's pages from the page cache that no process maps:
// fadvise64(fd, 0, 0, POSIX_FADV_DONTNEED), the whole file. The package is
// of the pure core (internal/layering): the standard library only.
func evict(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	_, _, _ = syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0)
}
