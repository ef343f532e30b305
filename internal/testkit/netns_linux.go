package testkit

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

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

// NetNSClient is an HTTP client whose connections are opened inside the
// network namespace at path, for a server on its loopback such as a
// /metrics: 5 s timeout, no connection kept.
func NetNSClient(path string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := InNetNS(path, func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}
