package testkit

import (
	"runtime"
	"runtime/metrics"
)

// LiveHeap is the live heap after a collection (/gc/heap/live:bytes), in
// bytes: what a benchmark holds, measured before and after it fills.
func LiveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
