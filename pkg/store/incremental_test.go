package store

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// world draws random records from small pools, so that random changes
// collide: Services sharing an address (one PTR name, two targets), pods
// of two namespaces on one IP, slices moving between Services, namespaces
// kept alive by several objects.
type world struct {
	r *rand.Rand
	// topo draws the topology fields, apart from r so that they do not
	// change the worlds r draws.
	topo *rand.Rand
	ips  []netip.Addr
}

var (
	worldNS       = []string{"a", "b", "C"}
	worldServices = []string{"web", "db", "x"}
	worldHosts    = []string{"", "", "h1", "h2"}
	worldSlices   = []string{"s1", "s2", "s3"}
	worldPods     = []string{"p1", "p2", "p3"}
)

func newWorld(seed uint64) *world {
	w := &world{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), topo: rand.New(rand.NewPCG(seed, 59))}
	for _, s := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.1.1", "10.96.0.1", "fd00::1", "fd00::2", "::ffff:10.0.0.2"} {
		w.ips = append(w.ips, netip.MustParseAddr(s))
	}
	return w
}

func (w *world) pick(s []string) string { return pickFrom(w.r, s) }

func pickFrom(r *rand.Rand, s []string) string { return s[r.IntN(len(s))] }

func (w *world) addrs(max int) []netip.Addr {
	var out []netip.Addr
	for range w.r.IntN(max + 1) {
		out = append(out, w.ips[w.r.IntN(len(w.ips))])
	}
	return out
}

func (w *world) ports() []Port {
	all := []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Protocol: "tcp", Port: 81}, {Name: "dns", Protocol: "udp", Port: 53},
		{Name: "dns", Protocol: "tcp", Port: 53}, {Name: "bad", Port: 9}, {Name: "zero", Protocol: "tcp"}}
	var out []Port
	for _, p := range all {
		if w.r.IntN(3) == 0 {
			out = append(out, p)
		}
	}
	return out
}

func (w *world) service() Service {
	v := Service{Namespace: w.pick(worldNS), Name: w.pick(worldServices), Type: ServiceType(w.r.IntN(3)),
		Ports: w.ports(), PublishNotReadyAddresses: w.r.IntN(3) == 0,
		// A Service with variants is never a delta: a quarter have one.
		TrafficDistribution: pickFrom(w.topo, []string{"", "", "", "", "", "", "", "", "", "PreferSameZone", "PreferClose", "PreferSameNode"})}
	switch v.Type {
	case ClusterIP:
		v.ClusterIPs = w.addrs(2)
	case ExternalName:
		v.ExternalName = w.pick([]string{"example.com.", "web.a.svc.cluster.local.", "db.b.svc.cluster.local."})
	}
	return v
}

func (w *world) slice() EndpointSlice {
	v := EndpointSlice{Namespace: w.pick(worldNS), Name: w.pick(worldSlices),
		Service: w.pick(append([]string{""}, worldServices...)), Ports: w.ports()}
	for range w.r.IntN(4) {
		v.Endpoints = append(v.Endpoints, Endpoint{Addresses: w.addrs(2), Hostname: w.pick(worldHosts),
			PodName: w.pick([]string{"", "pod-1", "pod-2"}), Ready: w.r.IntN(4) != 0,
			TopologyZone: pickFrom(w.topo, []string{"", "za", "Zb"}), NodeName: pickFrom(w.topo, []string{"", "n1", "n2"})})
	}
	return v
}

func (w *world) pod() Pod {
	return Pod{Namespace: w.pick(worldNS), Name: w.pick(worldPods), IPs: w.addrs(2),
		NodeName: pickFrom(w.topo, []string{"", "n1", "n2"})}
}

func (w *world) options() Options {
	o := Options{Zone: "cluster.local", TTL: uint32(5 + w.r.IntN(2)), Pods: PodMode(w.r.IntN(3)),
		IgnoreEmptyService: w.r.IntN(3) == 0, EndpointPodNames: w.r.IntN(2) == 0, NoEndpoints: w.r.IntN(5) == 0}
	if w.r.IntN(3) == 0 {
		o.Namespaces = []string{"a", "c"}
	}
	return o
}

func (w *world) objects() Objects {
	var o Objects
	for range w.r.IntN(6) {
		o.Services = append(o.Services, w.service())
	}
	for range w.r.IntN(6) {
		o.EndpointSlices = append(o.EndpointSlices, w.slice())
	}
	for range w.r.IntN(4) {
		o.Pods = append(o.Pods, w.pod())
	}
	for range w.r.IntN(3) {
		o.Namespaces = append(o.Namespaces, Namespace{Name: w.pick(worldNS)})
	}
	return o
}

// move changes one endpoint of a slice st holds, as a rollout does: a new
// address, readiness or hostname, or an endpoint more or less; the slice's
// name, Service and ports stay. It returns "" when st holds no slice.
func (w *world) move(st *Store) string {
	keys := slices.Collect(st.Keys(KindEndpointSlice))
	if len(keys) == 0 {
		return ""
	}
	slices.SortFunc(keys, func(a, b Key) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	k := keys[w.r.IntN(len(keys))]
	v := st.storedSlice(nsName{k.Namespace, k.Name})
	v.Endpoints = slices.Clone(v.Endpoints)
	i := -1
	if len(v.Endpoints) > 0 {
		i = w.r.IntN(len(v.Endpoints))
	}
	switch c := w.r.IntN(5); {
	case i < 0 || c == 0:
		v.Endpoints = append(v.Endpoints, Endpoint{Addresses: w.addrs(1), Hostname: w.pick(worldHosts), Ready: true})
	case c == 1:
		v.Endpoints = slices.Delete(v.Endpoints, i, i+1)
	case c == 2:
		v.Endpoints[i].Ready = !v.Endpoints[i].Ready
	case c == 3:
		v.Endpoints[i].Hostname = w.pick(worldHosts)
	default:
		v.Endpoints[i].Addresses = []netip.Addr{w.ips[w.r.IntN(len(w.ips))]}
	}
	st.SetEndpointSlice(v)
	return fmt.Sprintf("SetEndpointSlice (moved) %+v", v)
}

// did applies v with f and says so.
func did[V any](what string, v V, f func(V)) string {
	f(v)
	return fmt.Sprintf("%s %+v", what, v)
}

// change applies one random change to st and says what it was.
func (w *world) change(st *Store) string {
	if w.r.IntN(2) == 0 {
		if what := w.move(st); what != "" {
			return what
		}
	}
	// del deletes a random object named one of names.
	del := func(what string, names []string, f func(ns, name string)) string {
		ns, name := w.pick(worldNS), w.pick(names)
		f(ns, name)
		return what + " " + ns + "/" + name
	}
	switch k := w.r.IntN(20); {
	case k < 4:
		return did("SetService", w.service(), st.SetService)
	case k < 6:
		return del("DeleteService", worldServices, st.DeleteService)
	case k < 10:
		return did("SetEndpointSlice", w.slice(), st.SetEndpointSlice)
	case k < 12:
		return del("DeleteEndpointSlice", worldSlices, st.DeleteEndpointSlice)
	case k < 14:
		return did("SetPod", w.pod(), st.SetPod)
	case k < 15:
		return del("DeletePod", worldPods, st.DeletePod)
	case k < 16:
		return did("SetNamespace", Namespace{Name: w.pick(worldNS)}, st.SetNamespace)
	case k < 18:
		return did("DeleteNamespace", w.pick(worldNS), st.DeleteNamespace)
	case k < 19:
		o := w.options()
		if err := st.SetOptions(o); err != nil {
			panic(err)
		}
		return fmt.Sprintf("SetOptions %+v", o)
	default:
		o := w.objects()
		st.Replace(o)
		return fmt.Sprintf("Replace %+v", o)
	}
}

// TestIncrementalEqualsRebuild: after every Publish of a random sequence of
// changes (several per publish, options changes and reloads among them),
// the Snapshot equals a build of all records from scratch: every name with
// its node and no other name, the counts, the pod-IP index (namespaces and
// nodes), the known namespaces and the PTR addresses; ChangedSince reports
// at least every name that differs from the previous Snapshot; and the
// previous Snapshot still answers as it did.
func TestIncrementalEqualsRebuild(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	incrementalEqualsRebuild(t, seeds)
}

// TestIncrementalEqualsRebuildWide is TestIncrementalEqualsRebuild with
// every change of more than two units a wide one, which the Publish
// rebuilds (issue 55 row 7), mixed with those it applies.
func TestIncrementalEqualsRebuildWide(t *testing.T) {
	defer func(n int) { minWideChange = n }(minWideChange)
	minWideChange = 2
	incrementalEqualsRebuild(t, 100)
}

// TestIncrementalEqualsRebuildSorted is TestIncrementalEqualsRebuild with
// every endpoint list deduplicated by a sort, as a Service of more than
// dedupScan endpoints is (the worlds are smaller).
func TestIncrementalEqualsRebuildSorted(t *testing.T) {
	defer func(n int) { dedupScan = n }(dedupScan)
	dedupScan = 0
	incrementalEqualsRebuild(t, 100)
}

// incrementalEqualsRebuild applies random changes to random worlds and
// compares each Snapshot with a build from scratch.
func incrementalEqualsRebuild(t *testing.T, seeds int) {
	t.Helper()
	deltas := 0
	defer func() {
		// The moves must reach the delta path, or it is not tested.
		t.Logf("%d changes applied as deltas in %d worlds", deltas, seeds)
		if !t.Failed() && deltas < seeds {
			t.Errorf("%d changes applied as deltas in %d worlds, want at least one a world", deltas, seeds)
		}
	}()
	for seed := range uint64(seeds) {
		w := newWorld(seed)
		st, err := New(w.options())
		if err != nil {
			t.Fatal(err)
		}
		st.Replace(w.objects())
		var history []string
		prev := st.Publish()
		prevView := st.oracle()
		for step := range 40 {
			for range 1 + w.r.IntN(3) {
				history = append(history, w.change(st))
			}
			snap := st.Publish()
			if st.lost != 0 {
				t.Fatalf("seed %d step %d: the name index did not match the records and the Publish rebuilt\nchanges:\n%s", seed, step, joinLines(history))
			}
			want := st.oracle()
			if msg := compareView(snap, want, w.ips); msg != "" {
				t.Fatalf("seed %d step %d: %s\nchanges:\n%s", seed, step, msg, joinLines(history))
			}
			if msg := compareView(prev, prevView, w.ips); msg != "" {
				t.Fatalf("seed %d step %d: the previous snapshot changed: %s", seed, step, msg)
			}
			reported := map[string]bool{}
			if snap.ChangedSince(prev, func(n string) { reported[n] = true }) {
				for _, n := range differing(prevView, want) {
					if !reported[variantBase(n)] { // a variant is reported as its name
						t.Fatalf("seed %d step %d: %s changed but ChangedSince did not report it\nchanges:\n%s", seed, step, n, joinLines(history))
					}
				}
			}
			if snap.Serial <= prev.Serial {
				t.Fatalf("serial %d after %d", snap.Serial, prev.Serial)
			}
			prev, prevView = snap, want
		}
		deltas += st.deltas
	}
}

func joinLines(s []string) string {
	out := ""
	for _, l := range s {
		out += "  " + l + "\n"
	}
	return out
}

// compareView returns how snap differs from the oracle's view ("" when it
// does not).
func compareView(snap *Snapshot, o *oracleView, ips []netip.Addr) string {
	if snap.Counts != o.counts {
		return fmt.Sprintf("counts %+v, want %+v", snap.Counts, o.counts)
	}
	var msg string
	snap.names.All(func(name string, n *Node) { // the variants too
		if msg != "" {
			return
		}
		want, ok := o.names[name]
		switch {
		case !ok:
			msg = fmt.Sprintf("extra name %s = %+v", name, n)
		case !pack.Equal(n, want):
			msg = fmt.Sprintf("%s = %+v, want %+v", name, n, want)
		}
	})
	if msg != "" {
		return msg
	}
	listed, want := 0, 0
	snap.Names(func(name string, n *Node) {
		listed++
		if w, ok := o.names[name]; msg == "" && (!ok || !pack.Equal(n, w)) {
			msg = fmt.Sprintf("Names lists %s = %+v, want %+v", name, n, w)
		}
	})
	for name := range o.names {
		if !isVariantKey(name) {
			want++
		}
	}
	if msg == "" && listed != want {
		msg = fmt.Sprintf("Names lists %d names, want %d", listed, want)
	}
	if msg != "" {
		return msg
	}
	for name, want := range o.names {
		n, ok := snap.Lookup(name)
		switch {
		case !ok:
			return "missing name " + name
		case !pack.Equal(n, want):
			return fmt.Sprintf("%s = %+v, want %+v", name, n, want)
		}
	}
	for _, ip := range ips {
		ns, ok := snap.PodNamespace(ip)
		wns, wok := o.podNS[ip.Unmap()]
		if wok && wns == "" {
			wok = false
		}
		if ns != wns || ok != wok {
			return fmt.Sprintf("PodNamespace(%s) = %q %v, want %q %v", ip, ns, ok, wns, wok)
		}
		if _, node := snap.ClientTopology(ip); node != o.podNode[ip.Unmap()] {
			return fmt.Sprintf("ClientTopology(%s) node %q, want %q", ip, node, o.podNode[ip.Unmap()])
		}
		var ptr bool
		if n, ok := o.names[ReverseName(ip)]; ok && len(n.PTR()) > 0 {
			ptr = true
		}
		if got := snap.HasPTRIn(netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())); got != ptr {
			return fmt.Sprintf("HasPTRIn(%s) = %v, want %v", ip, got, ptr)
		}
	}
	for _, ns := range append(slices.Clone(worldNS), "c") {
		_, want := o.namespaces[ns]
		if got := snap.HasNamespace(ns); got != want {
			return fmt.Sprintf("HasNamespace(%s) = %v, want %v", ns, got, want)
		}
	}
	return ""
}

// differing returns the names whose node or existence differs between two
// views.
func differing(a, b *oracleView) []string {
	var out []string
	for name, n := range a.names {
		if m, ok := b.names[name]; !ok || !pack.Equal(n, m) {
			out = append(out, name)
		}
	}
	for name := range b.names {
		if _, ok := a.names[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

func TestReverseAddr(t *testing.T) {
	for _, s := range []string{"10.96.0.1", "0.0.0.0", "255.255.255.255", "fd00::10", "2001:db8::ab:cd", "::"} {
		a := netip.MustParseAddr(s)
		back, ok := reverseAddr(ReverseName(a))
		if !ok || back != a {
			t.Errorf("reverseAddr(ReverseName(%s)) = %v %v", s, back, ok)
		}
	}
	for _, bad := range []string{"1.0.96.10.in-addr.arpa", "x.0.96.10.in-addr.arpa.", "01.0.96.10.in-addr.arpa.", "0.96.10.in-addr.arpa.",
		"256.0.96.10.in-addr.arpa.", "web.a.svc.cluster.local.", "0.ip6.arpa.", "g" + ReverseName(netip.MustParseAddr("fd00::1"))[1:]} {
		if a, ok := reverseAddr(bad); ok {
			t.Errorf("reverseAddr(%q) = %v", bad, a)
		}
	}
}

// TestReverseZone: ParseReverse reads back the prefix of each reverse
// zone name, octet or nibble aligned.
func TestReverseZone(t *testing.T) {
	for _, s := range []string{"10.0.0.0/8", "10.96.0.0/16", "0.0.0.0/0", "10.96.0.1/32", "fd00::/8", "2001:db8::/32", "::/0"} {
		p := netip.MustParsePrefix(s)
		name := ReverseZone(p)
		if back, ok := ParseReverse(name); !ok || back != p {
			t.Errorf("ParseReverse(%q) = %v %v, want %v", name, back, ok, p)
		}
	}
	if p, ok := ParseReverse("10.xin-addr.arpa."); ok {
		t.Errorf("ParseReverse read %v from a name outside the reverse zones", p)
	}
}
