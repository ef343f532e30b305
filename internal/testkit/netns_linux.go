package testkit

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// InNetNS runs fn on an OS thread switched into the network namespace at
// path (/run/netns/NAME, /proc/PID/ns/net), so that sockets fn opens live
// there, and stay there after fn returns. The thread is discarded after:
// its goroutine ends still locked to it, so no other goroutine ever runs
// in the namespace.
func InNetNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %q: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
