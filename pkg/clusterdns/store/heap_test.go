package store

import (
	"fmt"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"testing"
)

// liveHeap is the live heap after a collection (/gc/heap/live:bytes), in
// bytes.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkHeap reports the live heap of a populated store at rest, after
// its first Publish (rest-MB) and after 1,000 published changes (churn-MB):
// Services moving their ClusterIP, headless slices moving an endpoint, and
// Services deleted and added again. base-MB is the heap before the store
// existed; the figures include the records the store holds.
func BenchmarkHeap(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for b.Loop() {
				base := liveHeap()
				st := populate(b, n)
				rest := liveHeap()
				churn(st, n, 1000)
				after := liveHeap()
				runtime.KeepAlive(st)
				b.ReportMetric(float64(base)/1e6, "base-MB")
				b.ReportMetric(float64(rest-base)/1e6, "rest-MB")
				b.ReportMetric(float64(after-base)/1e6, "churn-MB")
			}
		})
	}
}

// churn publishes count changes to a store made by populate(n).
func churn(st *Store, n, count int) {
	for i := range count {
		switch i % 3 {
		case 0:
			k := (i * 7919) % n
			st.SetService(Service{Namespace: fmt.Sprintf("ns-%d", k/100), Name: fmt.Sprintf("svc-%d", k%100), Type: ClusterIP,
				ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 240, byte(i >> 8), byte(i)})},
				Ports:      []Port{{Name: "http", Protocol: "tcp", Port: 80}}})
		case 1:
			st.SetEndpointSlice(headlessSlice((i*31)%(n/50), i))
		case 2:
			k := (i * 104729) % n
			ns, name := fmt.Sprintf("ns-%d", k/100), fmt.Sprintf("svc-%d", k%100)
			st.DeleteService(ns, name)
			st.Publish()
			st.SetService(Service{Namespace: ns, Name: name, Type: ClusterIP,
				ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96 + byte(k>>16), byte(k >> 8), byte(k)})},
				Ports:      []Port{{Name: "http", Protocol: "tcp", Port: 80}}})
		}
		st.Publish()
	}
}
