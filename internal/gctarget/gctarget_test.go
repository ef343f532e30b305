package gctarget

import (
	"runtime/debug"
	"testing"
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
