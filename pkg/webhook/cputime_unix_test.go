//go:build unix

package webhook

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the test process has used, so
// that benchmarks can report a cost per operation that other load on the
// machine does not inflate.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
