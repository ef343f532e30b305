package main

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

// TestStartupGC: the GC target through a start, a rewatch, and a sync
// that lands during a first publish.
func TestStartupGC(t *testing.T) {
	orig := debug.SetGCPercent(startupGCPercent)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	want := func(step string, v int) {
		t.Helper()
		if got := readGCPercent(); got != v {
			t.Errorf("%s: GOGC %d, want %d", step, got, v)
		}
	}
	g := &startupGC{}
	g.firstPublish(func() { want("during the first publish", rebuildGCPercent) })
	want("after the first publish", startupGCPercent)
	g.afterSync()
	want("after the sync", clusterGCPercent)
	g.firstPublish(func() { want("during a rewatch's first publish", rebuildGCPercent) })
	want("after a rewatch's first publish", clusterGCPercent)

	debug.SetGCPercent(startupGCPercent)
	g = &startupGC{}
	g.firstPublish(func() { g.afterSync() })
	want("a sync during the first publish", clusterGCPercent)
}
