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
// types, gRPC) leaves tens of MiB resident. The pages are clean and
// file-backed. It returns the bytes advised.
//
// Then it evicts the executable's cached pages that no process maps. A page
// still cached maps back with its neighbours: the kernel's fault-around
// maps up to a large folio's worth around each fault, MADV_RANDOM or not.
// At 150,000 Pods (test/bench TestScale) the code the server touched kept
// 11.6-18 MiB of the binary resident at rest and 25-31 MiB through an API
// server restart; evicted, 5-6 and 15. A page the server touches is then
// read back alone (no read-ahead under MADV_RANDOM): a major fault, tens of
// microseconds from a local disk. A page another process maps (a second
// server of the same image) stays.
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
		// MADV_RANDOM first: no read-ahead when a page faults back.
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, sp.start, sp.end-sp.start, syscall.MADV_RANDOM)
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, sp.start, sp.end-sp.start, syscall.MADV_DONTNEED); errno == 0 {
			total += int64(sp.end - sp.start)
		}
	}
	if total > 0 {
		evict("/proc/self/exe")
	}
	return total
}
