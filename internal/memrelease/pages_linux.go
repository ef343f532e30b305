//go:build linux

package memrelease

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Pages drops the resident pages of the executable's read-only mappings
// (code, read-only data, function tables). Package init (client-go, the API
// types, gRPC) and the kernel's fault-around leave tens of MiB resident.
// The pages are clean and file-backed: what the server uses faults back in
// from the page cache, one page at a time. It returns the bytes advised.
func Pages() int64 {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	type span struct{ start, end uintptr }
	var spans []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		se := strings.SplitN(fields[0], "-", 2)
		s, err1 := strconv.ParseUint(se[0], 16, 64)
		e, err2 := strconv.ParseUint(se[1], 16, 64)
		if err1 != nil || err2 != nil || e <= s {
			continue
		}
		spans = append(spans, span{uintptr(s), uintptr(e)})
	}
	var total int64
	for _, sp := range spans {
		// MADV_RANDOM first: it turns off the kernel's fault-around and
		// read-ahead for these mappings, so a page the server touches later
		// does not bring its 15 neighbours back with it.
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, sp.start, sp.end-sp.start, syscall.MADV_RANDOM)
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, sp.start, sp.end-sp.start, syscall.MADV_DONTNEED); errno == 0 {
			total += int64(sp.end - sp.start)
		}
	}
	return total
}
