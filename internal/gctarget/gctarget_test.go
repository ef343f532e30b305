package gctarget

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// readGCPercent reads the GC target.
func readGCPercent() int {
	m := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(m)
	return int(m[0].Value.Uint64())
}

// TestPhases: the GC target through a start, a rewatch, and a sync
// that lands during a first publish.
func TestPhases(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	want := func(step string, v int) {
		t.Helper()
		if got := readGCPercent(); got != v {
			t.Errorf("%s: GOGC %d, want %d", step, got, v)
		}
	}
	g := Start()
	unwatch(t, g)
	want("at the start", Startup)
	g.FirstPublish(func() { want("during the first publish", Rebuild) })
	want("after the first publish", Startup)
	g.AfterSync()
	want("after the sync", Cluster)
	g.FirstPublish(func() { want("during a rewatch's first publish", Rebuild) })
	want("after a rewatch's first publish", Cluster)

	g = Start()
	unwatch(t, g)
	g.FirstPublish(func() { g.AfterSync() })
	want("a sync during the first publish", Cluster)
}

// TestHeadroom: Start leaves Headroom percent of a memory limit set to
// the runtime, and sets none where there is none.
func TestHeadroom(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	gc := debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetMemoryLimit(orig)
		debug.SetGCPercent(gc)
	})
	debug.SetMemoryLimit(math.MaxInt64)
	Start()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("no limit: Start set %d", got)
	}
	debug.SetMemoryLimit(170 << 20)
	Start()
	if got, want := debug.SetMemoryLimit(-1), int64(170<<20)*(100-Headroom)/100; got != want {
		t.Errorf("GOMEMLIMIT 170MiB: limit %d, want %d", got, want)
	}
}

// TestRelisting: a relist lowers the memory limit to RelistBound percent
// over the runtime's memory at rest, never raises it, keeps it relistSettle after
// its end, through a relist that starts in that time, and then puts it
// back and gives the memory back once; a second start or end changes
// nothing.
func TestRelisting(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	for _, limit := range []int64{math.MaxInt64, 1 << 40, 120 << 20} {
		debug.SetMemoryLimit(limit)
		var pending []func()
		const resting = 100 << 20
		released := 0
		g := &Phases{after: func(d time.Duration, f func()) {
			if d != relistSettle {
				t.Errorf("restore after %v, want %v", d, relistSettle)
			}
			pending = append(pending, f)
		}, resting: func() int64 { return resting }, release: func() { released++ }}
		read := func() int64 { return debug.SetMemoryLimit(-1) }
		g.Relisting(true)
		bound := read()
		if want := min(limit, resting*(100+RelistBound)/100); bound != want {
			t.Errorf("limit %d: %d while relisting, want %d", limit, bound, want)
		}
		g.Relisting(true)
		if got := read(); got != bound {
			t.Errorf("limit %d: a second start moved it from %d to %d", limit, bound, got)
		}
		g.Relisting(false)
		g.Relisting(false)
		if got := read(); got != bound || len(pending) != 1 {
			t.Errorf("limit %d: %d just after the relist (%d restores), want %d (1)", limit, got, len(pending), bound)
		}
		g.Relisting(true) // the next kind, within relistSettle
		pending[0]()
		if got := read(); got != bound || released != 0 {
			t.Errorf("limit %d: %d after the first end's restore with a relist streaming (released %d times), want %d (0)", limit, got, released, bound)
		}
		g.Relisting(false)
		pending[1]()
		if got := read(); got != limit || released != 1 {
			t.Errorf("limit %d: %d after the last relist settled (released %d times), want %d (once)", limit, got, released, limit)
		}
		pending[1]() // a restore that ran already
		if released != 1 {
			t.Errorf("limit %d: released %d times after a second restore, want once", limit, released)
		}
	}
}

// TestRestingMemory: the memory at rest is at most what the runtime holds
// and covers the live heap.
func TestRestingMemory(t *testing.T) {
	keep := make([]byte, 8<<20) // a live heap of 8 MiB at least
	runtime.GC()
	before := goMemory()
	r := restingMemory()
	held := max(before, goMemory()) + 1<<20 // the scavenger may give pages back between the reads
	if r > held || r < 8<<20 {
		t.Errorf("resting memory %d, want at least 8 MiB and at most the %d held", r, held)
	}
	runtime.KeepAlive(keep)
}

// TestRestPercent: the target of a synced cluster DNS keeps restFloor of
// garbage over the live heap until that is Rest percent of it.
func TestRestPercent(t *testing.T) {
	for _, c := range []struct {
		live int64
		want int
	}{{0, Cluster}, {restFloor, Cluster}, {2 * restFloor, 50}, {3 * restFloor, 33}, {4 * restFloor, Rest}, {1 << 40, Rest}} {
		if got := restPercent(c.live); got != c.want {
			t.Errorf("live %d MiB: GOGC %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// TestRest: from the sync, the collections set the target from the live
// heap, but not during a first publish, whose Rebuild stays.
func TestRest(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	var live atomic.Int64
	live.Store(restFloor / 2)
	g := Start()
	g.live = live.Load
	// Each collection is step after the one before.
	var at, step atomic.Int64
	step.Store(int64(2 * quietInterval))
	g.now = func() time.Time { return time.Unix(0, at.Add(step.Load())) }
	// The test's collections are forced (runtime.GC): they count as
	// natural ones unless forced says otherwise.
	var forcing atomic.Bool
	var forced atomic.Uint64
	g.forced = func() uint64 {
		if forcing.Load() {
			return forced.Add(1)
		}
		return forced.Load()
	}
	unwatch(t, g)
	rests := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.rests
	}
	// collected waits until a collection has set the target.
	collected := func() {
		t.Helper()
		n := rests()
		testkit.WaitFor(t, 10*time.Second, func() error {
			runtime.GC()
			if rests() == n {
				return fmt.Errorf("no collection set the target")
			}
			return nil
		})
	}
	g.AfterSync()
	if got := readGCPercent(); got != Cluster {
		t.Errorf("synced, a small live heap: GOGC %d, want %d", got, Cluster)
	}
	live.Store(4 * restFloor)
	collected()
	if got := readGCPercent(); got != Rest {
		t.Errorf("the live heap grew: GOGC %d, want %d", got, Rest)
	}
	g.FirstPublish(func() {
		collected()
		if got := readGCPercent(); got != Rebuild {
			t.Errorf("a collection during a first publish: GOGC %d, want %d", got, Rebuild)
		}
	})
	if got := readGCPercent(); got != Rest {
		t.Errorf("after the first publish: GOGC %d, want %d", got, Rest)
	}
	live.Store(2 * restFloor)
	collected()
	if got := readGCPercent(); got != 50 {
		t.Errorf("the live heap shrank: GOGC %d, want 50", got)
	}
	// Forced collections in quick succession (a release of memory) do
	// not raise it.
	step.Store(int64(busyInterval / 5))
	forcing.Store(true)
	for range 3 {
		collected()
		if got := readGCPercent(); got != 50 {
			t.Errorf("forced collections %v apart: GOGC %d, want 50", busyInterval/5, got)
		}
	}
	forcing.Store(false)
	// Collections in quick succession (a churn) raise the target to
	// Cluster; slow ones bring it back.
	testkit.WaitFor(t, 10*time.Second, func() error {
		collected()
		if got := readGCPercent(); got != Cluster {
			return fmt.Errorf("collections %v apart: GOGC %d, want %d", busyInterval/5, got, Cluster)
		}
		return nil
	})
	step.Store(int64(2 * quietInterval))
	testkit.WaitFor(t, 10*time.Second, func() error {
		collected()
		if got := readGCPercent(); got != 50 {
			return fmt.Errorf("collections %v apart again: GOGC %d, want 50", 2*quietInterval, got)
		}
		return nil
	})
	// A relist's bound decides the collections while it holds.
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(limit) })
	var restore func()
	g.after = func(_ time.Duration, f func()) { restore = f }
	g.resting = func() int64 { return 1 << 30 }
	g.Relisting(true)
	collected()
	if got := readGCPercent(); got != Cluster {
		t.Errorf("relisting: GOGC %d, want %d", got, Cluster)
	}
	g.Relisting(false)
	collected()
	if got := readGCPercent(); got != Cluster {
		t.Errorf("after the relist, within its settling: GOGC %d, want %d", got, Cluster)
	}
	restore()
	if got := readGCPercent(); got != 50 {
		t.Errorf("the bound restored: GOGC %d, want 50", got)
	}
}

// unwatch ends the collections' setting of g's target when t ends.
func unwatch(t *testing.T, g *Phases) {
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.unwatched = true
	})
}
