package gctarget

import (
	"math"
	"runtime/debug"
	"testing"
	"time"
)

// readGCPercent reads the GC target.
func readGCPercent() int {
	v := debug.SetGCPercent(100)
	debug.SetGCPercent(v)
	return v
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
	want("at the start", Startup)
	g.FirstPublish(func() { want("during the first publish", Rebuild) })
	want("after the first publish", Startup)
	g.AfterSync()
	want("after the sync", Cluster)
	g.FirstPublish(func() { want("during a rewatch's first publish", Rebuild) })
	want("after a rewatch's first publish", Cluster)

	g = Start()
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
// over the runtime's memory, never raises it, and puts it back at its
// end; a second start or end changes nothing.
func TestRelisting(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	for _, limit := range []int64{math.MaxInt64, 1 << 40, 1 << 20} {
		debug.SetMemoryLimit(limit)
		g := &Phases{}
		g.Relisting(true)
		bound := goMemory() * (100 + RelistBound) / 100
		got := debug.SetMemoryLimit(-1)
		if want := min(limit, bound); got > want+want/20 || got < min(limit, goMemory()) {
			t.Errorf("limit %d: %d while relisting, want about %d", limit, got, want)
		}
		g.Relisting(true)
		if again := debug.SetMemoryLimit(-1); again != got {
			t.Errorf("limit %d: a second start moved it from %d to %d", limit, got, again)
		}
		g.Relisting(false)
		if got := debug.SetMemoryLimit(-1); got != limit {
			t.Errorf("limit %d: %d after the relist", limit, got)
		}
		g.Relisting(false)
		if got := debug.SetMemoryLimit(-1); got != limit {
			t.Errorf("limit %d: %d after a second end", limit, got)
		}
	}
}

// TestRelistSettle: a relist that starts within relistSettle of the last
// one's end is bounded by the memory before that one, not by what that
// one left; one that starts later is bounded by the memory then.
func TestRelistSettle(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	debug.SetMemoryLimit(math.MaxInt64)
	clock := time.Unix(1000, 0)
	g := &Phases{now: func() time.Time { return clock }}
	g.Relisting(true)
	g.Relisting(false)
	g.base = 7 << 20 // as if the first relist began at 7 MiB
	clock = clock.Add(relistSettle / 2)
	g.Relisting(true)
	if got, want := debug.SetMemoryLimit(-1), int64(7<<20)*(100+RelistBound)/100; got != want {
		t.Errorf("a relist soon after: limit %d, want %d (from the base before)", got, want)
	}
	g.Relisting(false)
	clock = clock.Add(2 * relistSettle)
	g.Relisting(true)
	if g.base == 7<<20 {
		t.Error("a relist after the settle kept the old base")
	}
	g.Relisting(false)
}
