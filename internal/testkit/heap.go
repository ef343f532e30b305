package testkit

import (
	"runtime"
	"runtime/metrics"
)

// LiveHeap is the live heap after a collection, in bytes: what a
// benchmark holds, measured before and after it fills.
func LiveHeap() uint64 { return AfterGC("/gc/heap/live:bytes") }

// AfterGC is the runtime metric name (a uint64 one) after a collection.
func AfterGC(name string) uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
