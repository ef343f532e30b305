package nodenet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Lease is a shared lock held by every running instance on the node, and
// each instance's entry in the directory beside it (the lock file's path
// with ".d"): a file named by the instance's start on the boot clock,
// which the instance holds locked exclusively. The entries order the
// instances, so that an old one can tell that a newer one runs.
type Lease struct {
	f *os.File
	// entry is this instance's file in the directory, name its name.
	entry *os.File
	dir   string
	name  string
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
			l := &Lease{f: f, dir: path + ".d"}
			if err := l.enter(); err != nil {
				f.Close()
				return nil, fmt.Errorf("lease %q: %w", path, err)
			}
			return l, nil
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

// enter puts this instance's entry in the directory: made under a dot
// name, locked, then renamed, so that no entry is ever seen unlocked
// while its instance runs.
func (l *Lease) enter() error {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	l.sweep()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return fmt.Errorf("boot clock: %w", err)
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	// Fixed width: names sort as the instances started.
	l.name = fmt.Sprintf("%020d-%x", ts.Nano(), rnd)
	tmp := filepath.Join(l.dir, "."+l.name)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("lock %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, l.name)); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	l.entry = f
	return nil
}

// Newer reports whether an instance that started after this one runs on
// the node, and whether the newest such instance serves (Serving). It
// removes the entries after this one's of instances that ended without
// removing theirs (killed).
func (l *Lease) Newer() (newer, serving bool) {
	newest := ""
	for _, n := range l.entries() {
		if n > l.name && live(filepath.Join(l.dir, n)) {
			newest = max(newest, n)
		}
	}
	if newest == "" {
		return false, false
	}
	b, _ := os.ReadFile(filepath.Join(l.dir, newest))
	return true, string(b) == stateServing
}

// An entry's content: empty until its instance serves, then one of these,
// of one length, each written over the other in one write.
const (
	stateServing  = "serving\n"
	stateStopping = "stopped\n"
)

// Serving records in this instance's entry whether it serves: an older
// instance's Newer tells it.
func (l *Lease) Serving(on bool) error {
	if l.entry == nil {
		return nil
	}
	state := stateStopping
	if on {
		state = stateServing
	}
	_, err := l.entry.WriteAt([]byte(state), 0)
	return err
}

// sweep removes the entries of instances that ended without removing
// theirs.
func (l *Lease) sweep() {
	for _, n := range l.entries() {
		live(filepath.Join(l.dir, n))
	}
}

// entries lists the directory's entries, not the ones being made.
func (l *Lease) entries() []string {
	des, _ := os.ReadDir(l.dir)
	var names []string
	for _, e := range des {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

// live reports whether an instance holds the entry at path; an entry
// nobody holds is removed.
func live(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		os.Remove(path)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// Close releases the lease and removes this instance's entry.
func (l *Lease) Close() error {
	if l.entry != nil {
		os.Remove(filepath.Join(l.dir, l.name))
		l.entry.Close()
	}
	return l.f.Close()
}
