package store

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// heapObjects is the number of objects on the heap after a collection.
func heapObjects() uint64 { return testkit.AfterGC("/gc/heap/objects:objects") }

// markTime is the wall time of a collection on one CPU (GOMAXPROCS 1, as
// a DNS pod of one CPU runs): it grows with the objects and pointers the
// collector marks, and the queries wait on it.
func markTime() time.Duration {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	start := time.Now()
	runtime.GC()
	return time.Since(start)
}

// BenchmarkHeap reports the live heap of a populated store at rest, after
// its first Publish (rest-MB) and after 1,000 published changes (churn-MB):
// Services moving their ClusterIP, headless slices moving an endpoint, and
// Services deleted and added again. base-MB is the heap before the store
// existed; the figures include the records the store holds. rest-kobjects
// is the objects the store adds, and gc-ms the time of a collection on one
// CPU after the churn (with the little the benchmark holds besides).
func BenchmarkHeap(b *testing.B) {
	for _, n := range append(benchSizes, 100000) {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for b.Loop() {
				base, baseObjs := testkit.LiveHeap(), heapObjects()
				st := populate(b, n)
				rest, restObjs := testkit.LiveHeap(), heapObjects()
				churn(st, n, 1000)
				after := testkit.LiveHeap()
				gc := markTime()
				runtime.KeepAlive(st)
				b.ReportMetric(float64(base)/1e6, "base-MB")
				b.ReportMetric(float64(rest-base)/1e6, "rest-MB")
				b.ReportMetric(float64(after-base)/1e6, "churn-MB")
				b.ReportMetric(float64(restObjs-baseObjs)/1e3, "rest-kobjects")
				b.ReportMetric(float64(gc.Microseconds())/1e3, "gc-ms")
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

// scaleLoad makes the objects of issue 71's load (test/bench TestScale)
// into a store: 10,000 Services (every fifth headless) in 300
// namespaces, each with one EndpointSlice of 15 ready endpoints (node
// and zone set; no pod name, which the feed keeps only with
// EndpointPodNames), 150,000 Pods with one IP on 5,000 Nodes in 3
// zones. The namespace and node names are shared, as the feed interns
// them; each object's own name is its own string.
type scaleLoad struct {
	namespaces, nodes []string
	// pinned keeps the namespaces and nodes interned for the load's
	// life: a measure then counts no unique entry that a store measured
	// before left for the runtime to clean up in the background.
	pinned []interned
}

const (
	scaleServices, scalePerSlice, scalePods, scaleNodes = 10000, 15, 150000, 5000
)

var scaleZones = []string{"za", "zb", "zc"}

func newScaleLoad() *scaleLoad {
	l := &scaleLoad{namespaces: make([]string, 300), nodes: make([]string, scaleNodes)}
	for i := range l.namespaces {
		l.namespaces[i] = fmt.Sprintf("scale-%d", i)
	}
	for n := range l.nodes {
		l.nodes[n] = fmt.Sprintf("node-%d", n)
	}
	for _, name := range slices.Concat(l.namespaces, l.nodes) {
		l.pinned = append(l.pinned, intern(name))
	}
	return l
}

func (l *scaleLoad) service(st *Store, i int) {
	svc := Service{Namespace: l.namespaces[i%len(l.namespaces)], Name: fmt.Sprintf("svc-%d", i), Type: ClusterIP,
		Ports:      []Port{{Name: "http", Protocol: "tcp", Port: 80}},
		ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)})}}
	if i%5 == 0 {
		svc.Type, svc.ClusterIPs = Headless, nil
	}
	st.SetService(svc)
}

func (l *scaleLoad) slice(st *Store, i int) {
	name := fmt.Sprintf("svc-%d", i)
	eps := make([]Endpoint, scalePerSlice)
	for k := range eps {
		pod := i*scalePerSlice + k
		eps[k] = Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 128 + byte(pod>>16), byte(pod >> 8), byte(pod)})},
			Ready: true, NodeName: l.nodes[pod/30%scaleNodes], TopologyZone: scaleZones[pod%3]}
	}
	st.SetEndpointSlice(EndpointSlice{Namespace: l.namespaces[i%len(l.namespaces)], Name: name + "-abcde", Service: name, Endpoints: eps,
		Ports: []Port{{Name: "http", Protocol: "tcp", Port: 8080}}})
}

func (l *scaleLoad) pod(st *Store, k int) {
	st.SetPod(Pod{Namespace: l.namespaces[k%len(l.namespaces)], Name: fmt.Sprintf("svc-%d-5d4f8b7c9-%05d", k%scaleServices, k),
		IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 128 + byte(k>>16), byte(k >> 8), byte(k)})}, NodeName: l.nodes[k/30%scaleNodes]})
}

func (l *scaleLoad) node(st *Store, n int) {
	st.SetNodeTopology(NodeTopology{Name: l.nodes[n], TopologyZone: scaleZones[n%3]})
}

// each is a fill of n objects made by add.
func each(n int, add func(*Store, int)) func(*Store) {
	return func(st *Store) {
		for i := range n {
			add(st, i)
		}
	}
}

// heapOf is the live heap a store pods verified adds once fill's objects
// are published.
func heapOf(b *testing.B, fills ...func(*Store)) float64 {
	base := testkit.LiveHeap()
	st, err := New(Options{Zone: "cluster.local", TTL: 5, Pods: PodsVerified})
	if err != nil {
		b.Fatal(err)
	}
	for _, fill := range fills {
		fill(st)
	}
	st.Publish()
	rest := testkit.LiveHeap()
	runtime.KeepAlive(st)
	return float64(rest - base)
}

// BenchmarkHeapPods reports the live heap a pod costs in a store holding
// issue 71's Nodes and Pods (scaleLoad), pods verified, the records' own
// strings included, and the time to publish them.
func BenchmarkHeapPods(b *testing.B) {
	l := newScaleLoad()
	for b.Loop() {
		b.ReportMetric(heapOf(b, each(scaleNodes, l.node), each(scalePods, l.pod))/scalePods, "B/pod")
	}
}

// BenchmarkHeapSizing reports the live heap each kind of object of issue
// 71's load (scaleLoad) costs a store, per 1,000 objects: Services, their
// endpoints, Pods (pods verified) and Nodes. The records' own strings are
// included. docs/sizing.md is made from it and from TestScale's process
// figures.
func BenchmarkHeapSizing(b *testing.B) {
	l := newScaleLoad()
	perK := func(bytes float64, n int) float64 { return bytes / float64(n) * 1000 / (1 << 20) }
	for b.Loop() {
		bare := heapOf(b, each(scaleServices, l.service))
		withSlices := heapOf(b, each(scaleServices, l.service), each(scaleServices, l.slice))
		b.ReportMetric(perK(bare, scaleServices), "MiB/1000-services")
		b.ReportMetric(perK(withSlices-bare, scaleServices*scalePerSlice), "MiB/1000-endpoints")
		b.ReportMetric(perK(heapOf(b, each(scalePods, l.pod)), scalePods), "MiB/1000-pods")
		b.ReportMetric(perK(heapOf(b, each(scaleNodes, l.node)), scaleNodes), "MiB/1000-nodes")
	}
}
