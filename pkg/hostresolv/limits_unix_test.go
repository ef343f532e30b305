//go:build unix

package hostresolv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// within fails the test when f has not returned within wait; it is a bound
// on a step that must not block, not a synchronisation. It returns how long
// f took.
func within(t *testing.T, what string, f func()) time.Duration {
	t.Helper()
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if !safefile.Await(ctx, f) {
		t.Fatalf("%s: still blocked after %v", what, wait)
	}
	return time.Since(begin)
}

func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	testkit.WriteFile(t, path, "")
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// TestWatchOversizedFile: a 64 MB file is refused before it is read, at
// start and in place of a good file, and the watcher's heap does not grow
// with it.
func TestWatchOversizedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	sparse(t, path, 64<<20)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, ch := start(t, path)
	s := next(t, ch)
	runtime.ReadMemStats(&after)
	if !errors.Is(s.Err, resolvconf.ErrTooLarge) || !strings.Contains(s.Err.Error(), strconv.Quote(path)) {
		t.Fatalf("64 MB file at start: err = %v, want ErrTooLarge naming the file", s.Err)
	}
	n := after.TotalAlloc - before.TotalAlloc
	t.Logf("start-up with a 64 MB file allocated %d bytes (at most 1 MiB): %v", n, s.Err)
	if n > 1<<20 {
		t.Errorf("start-up with a 64 MB file allocated %d bytes, want at most 1 MiB", n)
	}

	testkit.WriteAtomic(t, path, "nameserver 192.0.2.1\n")
	if s := next(t, ch); s.Err != nil || !reflect.DeepEqual(ns(s), []string{"192.0.2.1"}) {
		t.Fatalf("good file: %+v", s)
	}
	tmp := path + ".big"
	sparse(t, tmp, 64<<20)
	runtime.ReadMemStats(&before)
	begin := time.Now()
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	s = next(t, ch)
	took := time.Since(begin)
	runtime.ReadMemStats(&after)
	if !errors.Is(s.Problem, resolvconf.ErrTooLarge) || s.Err != nil || !reflect.DeepEqual(ns(s), []string{"192.0.2.1"}) {
		t.Fatalf("64 MB file over a good one: want the problem with the last good config kept, got %+v", s)
	}
	n = after.TotalAlloc - before.TotalAlloc
	t.Logf("64 MB file over a good one: problem published %v after the rename, %d bytes allocated meanwhile (at most 1 MiB), last good config kept",
		took.Round(time.Millisecond), n)
	if n > 1<<20 {
		t.Errorf("a 64 MB file over a good one allocated %d bytes, want at most 1 MiB", n)
	}
}

// TestWatchFIFO: a named pipe in the file's place (no writer) is a clear
// error at start and after a good file, and never blocks the watcher:
// cancelling it still ends it at once.
func TestWatchFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	testkit.FIFO(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		w   *Watcher
		err error
	)
	took := within(t, "Watch on a named pipe", func() { w, err = Watch(ctx, path, WithResync(0)) })
	t.Logf("Watch on a named pipe returned in %v", took.Round(time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	s := w.Current()
	if !errors.Is(s.Err, resolvconf.ErrNotRegular) || !strings.Contains(s.Err.Error(), strconv.Quote(path)) || !strings.Contains(s.Err.Error(), "named pipe") {
		t.Fatalf("named pipe at start: err = %v, want ErrNotRegular naming the file", s.Err)
	}
	ch, unsub := w.Subscribe()
	defer unsub()
	next(t, ch)
	testkit.WriteAtomic(t, path, "nameserver 192.0.2.1\n")
	if s := next(t, ch); s.Err != nil || !reflect.DeepEqual(ns(s), []string{"192.0.2.1"}) {
		t.Fatalf("good file: %+v", s)
	}
	fifo := filepath.Join(dir, "fifo")
	testkit.FIFO(t, fifo)
	if err := os.Rename(fifo, path); err != nil {
		t.Fatal(err)
	}
	if s := next(t, ch); !errors.Is(s.Problem, resolvconf.ErrNotRegular) || s.Err != nil {
		t.Fatalf("named pipe over a good file: %+v", s)
	}
	cancel()
	took = within(t, "stop with a named pipe in place", func() { <-w.Done() })
	t.Logf("stopped %v after cancel with a named pipe in place", took.Round(time.Microsecond))
}

// blockingRead is a file read that blocks, as on a hung network file
// system, while on is set, until release is closed.
type blockingRead struct {
	on      atomic.Bool
	entered chan struct{} // receives when a read starts blocking
	release chan struct{}
}

func (b *blockingRead) read(path string) ([]byte, error) {
	if b.on.Load() {
		b.entered <- struct{}{}
		<-b.release
	}
	return resolvconf.ReadFile(path)
}

// TestWatchCancelBlockedRead: ctx ends Watch and the watch loop even while
// a read is blocked in the kernel.
func TestWatchCancelBlockedRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	testkit.WriteFile(t, path, "nameserver 192.0.2.1\n")
	b := &blockingRead{entered: make(chan struct{}, 8), release: make(chan struct{})}
	defer close(b.release) // lets the abandoned reads finish before goleak looks
	withRead := func(o *options) { o.read = b.read }

	t.Run("start-up", func(t *testing.T) {
		b.on.Store(true)
		defer b.on.Store(false)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := Watch(ctx, path, WithResync(0), withRead)
			errc <- err
		}()
		<-b.entered
		begin := time.Now()
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want context.Canceled naming the file", err)
			}
			t.Logf("Watch returned %v after cancel, its first read still blocked: %v", time.Since(begin).Round(time.Microsecond), err)
		case <-time.After(wait):
			t.Fatal("Watch did not return after cancel while the first read blocks")
		}
	})
	t.Run("watch loop", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w, err := Watch(ctx, path, WithResync(0), withRead)
		if err != nil {
			t.Fatal(err)
		}
		if s := w.Current(); s.Err != nil {
			t.Fatalf("first read: %+v", s)
		}
		b.on.Store(true)
		defer b.on.Store(false)
		testkit.WriteFile(t, path, "nameserver 192.0.2.2\n")
		<-b.entered
		cancel()
		took := within(t, "stop while a read blocks", func() { <-w.Done() })
		t.Logf("the watch loop stopped %v after cancel, a read still blocked", took.Round(time.Microsecond))
	})
}
