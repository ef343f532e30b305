//go:build linux

package memrelease

import (
	"io"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cached is the number of the file's pages in the page cache (mincore on a
// mapping of its own, which faults none in).
func cached(t *testing.T, path string) (in, all int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		in += int(v & 1)
	}
	return in, len(vec)
}

// TestPagesEvicts: the executable's pages leave the page cache, but for
// those a process maps.
func TestPagesEvicts(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A test binary just built may not be written back yet, and a dirty
	// page is not evicted: a server's executable is older than that.
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Sync()
	if _, rerr := io.Copy(io.Discard, f); err == nil { // all of it cached
		err = rerr
	}
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	before, all := cached(t, exe)
	if before < all/2 {
		t.Skipf("%d of %d pages cached after reading the executable: the page cache does not keep it", before, all)
	}
	if Pages() <= 0 {
		t.Fatal("Pages advised nothing")
	}
	after, _ := cached(t, exe)
	// What stays is what a process maps: the writable data, and the
	// folios of the code the test ran since (a folio stays whole).
	if after > before-all/4 {
		t.Errorf("%d of the executable's %d pages cached after Pages (%d before), want a quarter of them evicted at least", after, all, before)
	}
	t.Logf("%d of the executable's %d pages cached after Pages, %d before", after, all, before)
}
