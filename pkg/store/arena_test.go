package store

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

func TestRecordArena(t *testing.T) {
	ip := netip.MustParseAddr
	web := Service{Namespace: "ns", Name: "web", Type: ClusterIP, ClusterIPs: []netip.Addr{ip("10.96.0.10"), ip("fd00::10")},
		Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}}
	ext := Service{Namespace: "ns", Name: "ext", Type: ExternalName, ExternalName: "example.org."}

	a := &recordArena{}
	wname, wrec := a.service(&web)
	ename, erec := a.service(&ext)
	pweb, pext := wrec.service(nsName{"ns", wname}), erec.service(nsName{"ns", ename})
	if !reflect.DeepEqual(pweb, web) || !reflect.DeepEqual(pext, ext) {
		t.Fatalf("packed %+v %+v, want %+v %+v", pweb, pext, web, ext)
	}
	// The packed records share nothing with what they were made from.
	if unsafe.StringData(wname) == unsafe.StringData(web.Name) ||
		unsafe.StringData(pext.ExternalName) == unsafe.StringData(ext.ExternalName) {
		t.Error("a packed record shares memory with its source")
	}
	// Both lie in one chunk, one after the other.
	if unsafe.Pointer(unsafe.StringData(string(erec))) != unsafe.Add(unsafe.Pointer(unsafe.StringData(string(wrec))), len(wrec)+len(ename)) {
		t.Error("the records are not cut from one chunk")
	}
}

// TestSvcRecord packs Services of every field and reads them back.
func TestSvcRecord(t *testing.T) {
	ip := netip.MustParseAddr
	long := strings.Repeat("x", 300) + "."
	for _, v := range []Service{
		{Namespace: "ns", Name: "bare"},
		{Namespace: "ns", Name: "web", Type: ClusterIP, ClusterIPs: []netip.Addr{ip("10.96.0.10"), ip("fd00::10"), ip("fe80::1%eth0")},
			Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Protocol: "udp", Port: 65535}, {Name: long, Protocol: "sctp"}}},
		{Namespace: "ns", Name: "hl", Type: Headless, PublishNotReadyAddresses: true, Ports: []Port{{Port: 1}}},
		{Namespace: "ns", Name: "ext", Type: ExternalName, ExternalName: long},
	} {
		r := newSvcRecord(&v)
		if got := r.service(v.key()); !reflect.DeepEqual(got, v) {
			t.Errorf("%s: read back %+v, want %+v", v.Name, got, v)
		}
	}
}

// TestRecordArenaBulk checks when a Store packs records: while a full
// Publish is pending (before the first, after Replace), and not after.
func TestRecordArenaBulk(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	ips := []netip.Addr{netip.MustParseAddr("10.96.0.10")}
	st.SetService(Service{Namespace: "ns", Name: "web", Type: ClusterIP, ClusterIPs: ips})
	if st.records == nil || st.records.strs.Len() == 0 {
		t.Fatal("a Service set before the first Publish was not packed")
	}
	st.Publish()
	if st.records != nil {
		t.Fatal("the record arena outlived the first Publish")
	}
	st.SetService(Service{Namespace: "ns", Name: "api", Type: ClusterIP, ClusterIPs: ips})
	if st.records != nil {
		t.Fatal("a change after the first Publish made a record arena")
	}
	st.Replace(Objects{Services: []Service{{Namespace: "ns", Name: "web", Type: ClusterIP, ClusterIPs: ips}}})
	if st.records == nil {
		t.Fatal("Replace did not pack its records")
	}
	snap := st.Publish()
	if st.records != nil {
		t.Fatal("the record arena outlived the Publish after Replace")
	}
	if n, ok := snap.Lookup("web.ns.svc.cluster.local."); !ok || len(n.A()) != 1 || n.A()[0] != ips[0] {
		t.Fatalf("web after Replace: %+v", n)
	}
}

// TestChunksApart checks that a rebuild packs the nodes of a Service's
// own names and those of its endpoints in different chunks, so that
// moving endpoints does not leave dead nodes in the Service's chunk.
func TestChunksApart(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr
	st.SetService(Service{Namespace: "ns", Name: "web", Type: ClusterIP, ClusterIPs: []netip.Addr{ip("10.96.0.10")},
		Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}})
	st.SetEndpointSlice(EndpointSlice{Namespace: "ns", Name: "web-1", Service: "web", Ports: []Port{{Name: "http", Protocol: "tcp", Port: 8080}},
		Endpoints: []Endpoint{{Addresses: []netip.Addr{ip("10.0.0.1")}, Hostname: "a", Ready: true}}})
	st.mu.Lock()
	st.state = &applied{ent: pack.Empty(5)}
	var a *rebuildArena
	var names map[string]*Node
	st.buildAll(func(c *contribution) {
		a = st.arena
		if c.names["web.ns.svc.cluster.local."] != nil {
			names = c.names
		}
	})
	st.mu.Unlock()
	in := func(n *Node, chunk []uint32) bool {
		start := uintptr(unsafe.Pointer(unsafe.SliceData(chunk)))
		p := uintptr(unsafe.Pointer(n))
		return p >= start && p < start+4*uintptr(cap(chunk))
	}
	stable, other := a.nodes.Chunks()
	svc, ep := names["web.ns.svc.cluster.local."], names["a.web.ns.svc.cluster.local."]
	if svc == nil || ep == nil {
		t.Fatalf("names built: %v", names)
	}
	if !in(svc, stable) || in(svc, other) {
		t.Error("the Service's name is not in the stable chunk")
	}
	if !in(ep, other) || in(ep, stable) {
		t.Error("the endpoint's name is not in the other chunk")
	}
	if p := uintptr(unsafe.Pointer(ep)); p%4 != 0 {
		t.Errorf("a packed node starts at %#x, not aligned", p)
	}
}
