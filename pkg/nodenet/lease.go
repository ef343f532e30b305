package nodenet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Lease is a shared lock held by every running instance on the node.
type Lease struct {
	f *os.File
}

// leasePoll is how often Acquire retries while another instance holds the
// lock exclusively (it is tearing down).
const leasePoll = 50 * time.Millisecond

// Acquire takes a shared lock on path (made, with its directory, when
// missing). It waits, until ctx ends, while an instance holds the lock
// exclusively.
func Acquire(ctx context.Context, path string) (*Lease, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lease %q: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lease %q: %w", path, err)
	}
	tick := time.NewTicker(leasePoll)
	defer tick.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			return &Lease{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lease %q: flock: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lease %q: another instance holds it: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}

// Last reports whether no other instance holds the lease; when it does, it
// holds the lock exclusively until Close, so that an instance starting
// meanwhile waits for the teardown to finish.
func (l *Lease) Last() bool {
	return unix.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// Alone reports whether no other instance holds the lease, keeping it
// shared: an instance starting meanwhile does not wait.
func (l *Lease) Alone() bool {
	alone := unix.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
	// A conversion drops the lock first, even when it fails: take it
	// shared again (waiting, as Acquire does, while an instance tears down).
	for {
		err := unix.Flock(int(l.f.Fd()), unix.LOCK_SH)
		if !errors.Is(err, unix.EINTR) {
			return alone && err == nil
		}
	}
}

// Close releases the lease.
func (l *Lease) Close() error { return l.f.Close() }
