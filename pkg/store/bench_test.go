package store

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// The benchmark sizes of issue 28: ClusterIP Services in namespaces of 100,
// plus one headless Service with a 50-endpoint slice per 50 of them.
var benchSizes = []int{10000, 50000}

// populate fills a store with n ClusterIP Services (one named port each)
// and n/50 headless Services with one slice of 50 ready endpoints, and
// publishes it.
func populate(b *testing.B, n int) *Store {
	b.Helper()
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		st.SetService(Service{Namespace: fmt.Sprintf("ns-%d", i/100), Name: fmt.Sprintf("svc-%d", i%100), Type: ClusterIP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)})},
			Ports:      []Port{{Name: "http", Protocol: "tcp", Port: 80}}})
	}
	for j := range n / 50 {
		st.SetService(Service{Namespace: fmt.Sprintf("ns-%d", j/2), Name: fmt.Sprintf("hl-%d", j), Type: Headless})
		st.SetEndpointSlice(headlessSlice(j, 0))
	}
	st.Publish()
	return st
}

// headlessSlice is the slice of headless Service j, its first endpoint's
// address moved by shift (not moved when 0: each Service has addresses of
// its own).
func headlessSlice(j, shift int) EndpointSlice {
	eps := make([]Endpoint, 50)
	for k := range eps {
		eps[k] = Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 200 + byte(j>>8), byte(j), byte(k + 1)})}, Ready: true}
	}
	if shift != 0 {
		eps[0].Addresses = []netip.Addr{netip.AddrFrom4([4]byte{10, 250, byte(shift >> 8), byte(shift)})}
	}
	return EndpointSlice{Namespace: fmt.Sprintf("ns-%d", j/2), Name: fmt.Sprintf("hl-%d-1", j), Service: fmt.Sprintf("hl-%d", j),
		Endpoints: eps, Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}}
}

// BenchmarkServiceChange is one Service changed (its ClusterIP moves) and
// published, at each size: what the feed does per Service event.
func BenchmarkServiceChange(b *testing.B) {
	benchChange(b, func(st *Store, i int) {
		st.SetService(Service{Namespace: "ns-7", Name: "svc-7", Type: ClusterIP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 240, byte(i >> 8), byte(i)})},
			Ports:      []Port{{Name: "http", Protocol: "tcp", Port: 80}}})
	})
}

// BenchmarkSliceChange is one EndpointSlice of a 50-endpoint headless
// Service changed (an endpoint moves) and published, at each size.
func BenchmarkSliceChange(b *testing.B) {
	benchChange(b, func(st *Store, i int) { st.SetEndpointSlice(headlessSlice(3, i)) })
}

// BenchmarkSliceSpread moves an endpoint of a different headless Service
// each time, round all of them, as a cluster's churn spreads: each
// Service's change finds its last contribution gone or never kept.
func BenchmarkSliceSpread(b *testing.B) {
	benchChange(b, func(st *Store, i int) {
		n := len(st.bySvc)
		st.SetEndpointSlice(headlessSlice(i%n, i))
	})
}

// BenchmarkLargeService moves one endpoint of a headless Service of 100 to
// 5,000 endpoints (slices of 100, two named ports) and publishes: a change
// should cost about the Service's size, not its square.
func BenchmarkLargeService(b *testing.B) {
	addr := func(net byte, i int) netip.Addr { return netip.AddrFrom4([4]byte{10, net, byte(i >> 8), byte(i)}) }
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			st, err := New(Options{Zone: "cluster.local", TTL: 5})
			if err != nil {
				b.Fatal(err)
			}
			st.SetService(Service{Namespace: "ns", Name: "big", Type: Headless})
			var first EndpointSlice
			for s := 0; s*100 < n; s++ {
				eps := make([]Endpoint, 100)
				for k := range eps {
					eps[k] = Endpoint{Addresses: []netip.Addr{addr(1, s*100+k)}, Ready: true}
				}
				sl := EndpointSlice{Namespace: "ns", Name: fmt.Sprint("big-", s), Service: "big", Endpoints: eps,
					Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "grpc", Protocol: "tcp", Port: 81}}}
				if s == 0 {
					first = sl
				}
				st.SetEndpointSlice(sl)
			}
			st.Publish()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				sl := first
				sl.Endpoints = slices.Clone(first.Endpoints)
				sl.Endpoints[0] = Endpoint{Addresses: []netip.Addr{addr(2, i)}, Ready: true}
				st.SetEndpointSlice(sl)
				st.Publish()
			}
		})
	}
}

// BenchmarkRebuild is a whole rebuild of a populated store, at each size:
// the largest step of start-up (the first Publish), of SetOptions and of
// Replace. ns/op is the wall time, which the build goroutine shortens;
// cpu-ns/op counts both goroutines and the collector.
func BenchmarkRebuild(b *testing.B) {
	bySize(b, func(b *testing.B, st *Store, _ int) {
		for b.Loop() {
			st.mu.Lock()
			st.rebuild()
			st.mu.Unlock()
		}
	})
}

// benchChange makes the i-th change and publishes it, at each size.
func benchChange(b *testing.B, change func(st *Store, i int)) {
	bySize(b, func(b *testing.B, st *Store, _ int) {
		i := 0
		for b.Loop() {
			i++
			change(st, i)
			st.Publish()
		}
	})
}

// bySize runs loop over a store made by populate at each size, and reports
// the CPU time per operation and the live heap after.
func bySize(b *testing.B, loop func(b *testing.B, st *Store, n int)) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			st := populate(b, n)
			b.ReportAllocs()
			cpu := cpuTime()
			loop(b, st, n)
			reportCPU(b, cpu)
			reportHeap(b)
			runtime.KeepAlive(st)
		})
	}
}

// cpuTime is the process's CPU time (user and system, every thread: the
// collector's too), the measure that holds on a loaded machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// reportHeap reports the live heap after a collection, in MB, and its
// objects in thousands (the collector's work grows with both).
func reportHeap(b *testing.B) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/1e6, "live-MB")
	b.ReportMetric(float64(ms.HeapObjects)/1e3, "live-kobjects")
}

// BenchmarkLookup is Snapshot.Lookup of existing names at 50k Services,
// against a plain Go map of the same names and nodes (the index the store
// had before it shared snapshots).
func BenchmarkLookup(b *testing.B) {
	st := populate(b, 50000)
	snap := st.Snapshot()
	plain := map[string]*Node{}
	var names []string
	snap.Names(func(name string, n *Node) {
		plain[name] = n
		names = append(names, name)
	})
	b.Run("snapshot", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok := snap.Lookup(names[i%len(names)]); !ok {
				b.Fatal("missing")
			}
			i += 7919
		}
	})
	b.Run("gomap", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok := plain[names[i%len(names)]]; !ok {
				b.Fatal("missing")
			}
			i += 7919
		}
	})
}

// BenchmarkWideChange changes every Service (its ClusterIP moves) and
// every headless Service's slice (an endpoint moves), then publishes once:
// a resync, or a node drain that moves every endpoint (issue 55 row 7: at
// 80k Services that took 21.9 s against a rebuild's 2.9 s, a linear search
// per change). Compare with BenchmarkRebuild at the same size.
func BenchmarkWideChange(b *testing.B) {
	bySize(b, func(b *testing.B, st *Store, n int) {
		round := 0
		for b.Loop() {
			round++
			for i := range n {
				st.SetService(Service{Namespace: fmt.Sprintf("ns-%d", i/100), Name: fmt.Sprintf("svc-%d", i%100), Type: ClusterIP,
					ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96 + byte(i>>16) + byte(round%2)*8, byte(i >> 8), byte(i)})},
					Ports:      []Port{{Name: "http", Protocol: "tcp", Port: 80}}})
			}
			for j := range n / 50 {
				st.SetEndpointSlice(headlessSlice(j, round))
			}
			st.Publish()
		}
	})
}
