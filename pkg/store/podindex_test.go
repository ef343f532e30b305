package store

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestClientTopology places clients by source address through pod
// changes, a node's relabel and a reused IP.
func TestClientTopology(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ ip, zone, node string }
	steps := []struct {
		desc   string
		change func()
		want   []want
	}{
		{"pods on labelled nodes", func() {
			st.SetNodeTopology(NodeTopology{Name: "n1", TopologyZone: "za"})
			st.SetNodeTopology(NodeTopology{Name: "n2", TopologyZone: "zb"})
			st.SetNodeTopology(NodeTopology{Name: "n3"})
			st.SetPod(Pod{Namespace: "a", Name: "p1", IPs: addrs("10.0.0.1", "fd00::1"), NodeName: "n1"})
			st.SetPod(Pod{Namespace: "a", Name: "p2", IPs: addrs("10.0.0.2"), NodeName: "n2"})
			st.SetPod(Pod{Namespace: "a", Name: "p3", IPs: addrs("10.0.0.3"), NodeName: "n3"})
			st.SetPod(Pod{Namespace: "a", Name: "p4", IPs: addrs("10.0.0.4")}) // not scheduled
		}, []want{{"10.0.0.1", "za", "n1"}, {"::ffff:10.0.0.1", "za", "n1"}, {"fd00::1", "za", "n1"},
			{"10.0.0.2", "zb", "n2"}, {"10.0.0.3", "", "n3"}, {"10.0.0.4", "", ""}, {"10.9.9.9", "", ""}}},
		{"a node relabelled", func() {
			st.SetNodeTopology(NodeTopology{Name: "n2", TopologyZone: "zc"})
		}, []want{{"10.0.0.2", "zc", "n2"}, {"10.0.0.1", "za", "n1"}}},
		{"an IP reused before the old pod goes", func() {
			st.SetPod(Pod{Namespace: "b", Name: "q1", IPs: addrs("10.0.0.1"), NodeName: "n2"})
		}, []want{{"10.0.0.1", "", ""}, {"fd00::1", "za", "n1"}}},
		{"the old pod goes", func() {
			st.DeletePod("a", "p1")
		}, []want{{"10.0.0.1", "zc", "n2"}, {"fd00::1", "", ""}}},
		{"a node goes", func() {
			st.DeleteNodeTopology("n2")
		}, []want{{"10.0.0.1", "", "n2"}}},
		{"a manifest replaces everything", func() {
			st.Replace(Objects{Pods: []Pod{{Namespace: "a", Name: "p9", IPs: addrs("10.0.0.9"), NodeName: "n9"}},
				Nodes: []NodeTopology{{Name: "n9", TopologyZone: "z9"}}})
		}, []want{{"10.0.0.9", "z9", "n9"}, {"10.0.0.1", "", ""}}},
	}
	for _, s := range steps {
		s.change()
		snap := st.Publish()
		for _, w := range s.want {
			zone, node := snap.ClientTopology(netip.MustParseAddr(w.ip))
			if zone != w.zone || node != w.node {
				t.Errorf("%s: ClientTopology(%s) = %q, %q, want %q, %q", s.desc, w.ip, zone, node, w.zone, w.node)
			}
		}
	}
}

// TestPodAnswersAgree: PodNamespace and ClientTopology read one pod-IP
// index, so when pods of two namespaces or nodes claim an IP and one goes
// (or takes another IP), both answers follow the pod that stays; while
// two disagree on one, that one is unknown. Each case runs applied
// Publish by Publish, and rebuilt at each.
func TestPodAnswersAgree(t *testing.T) {
	ip, other := netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.8")
	pod := func(ns, name, node string, a netip.Addr) Pod {
		return Pod{Namespace: ns, Name: name, IPs: []netip.Addr{a}, NodeName: node}
	}
	old, reused := pod("a", "old", "n1", ip), pod("b", "new", "n2", ip)
	type step struct {
		do       func(st *Store)
		ns, node string // what ip answers after it
	}
	zoneOf := func(node string) string {
		if node == "" {
			return ""
		}
		return "zone-" + node
	}
	set := func(p Pod) func(*Store) { return func(st *Store) { st.SetPod(p) } }
	del := func(p Pod) func(*Store) { return func(st *Store) { st.DeletePod(p.Namespace, p.Name) } }
	first := []step{{set(old), "a", "n1"}, {set(reused), "", ""}}
	for _, tc := range []struct {
		desc  string
		steps []step
	}{
		{"the old pod goes", append(first, step{del(old), "b", "n2"})},
		{"the new pod goes", append(first, step{del(reused), "a", "n1"})},
		{"the old pod takes another IP", append(first, step{set(pod("a", "old", "n1", other)), "b", "n2"})},
		{"the new pod goes, then comes back", append(first, step{del(reused), "a", "n1"}, step{set(reused), "", ""})},
		{"one namespace, two nodes", []step{{set(old), "a", "n1"}, {set(pod("a", "twin", "n3", ip)), "a", ""},
			{del(old), "a", "n3"}}},
		{"two namespaces, one node", []step{{set(old), "a", "n1"}, {set(pod("b", "twin", "n1", ip)), "", "n1"},
			{del(old), "b", "n1"}}},
		{"a pod without a node", []step{{set(pod("a", "bare", "", ip)), "a", ""}, {set(reused), "", "n2"},
			{del(reused), "a", ""}}},
	} {
		for _, rebuild := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/rebuild=%v", tc.desc, rebuild), func(t *testing.T) {
				opts := Options{Zone: "cluster.local", TTL: 5, Pods: PodsVerified}
				st, err := New(opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range []string{"n1", "n2", "n3"} {
					st.SetNodeTopology(NodeTopology{Name: n, TopologyZone: "zone-" + n})
				}
				st.Publish()
				for i, s := range tc.steps {
					s.do(st)
					if rebuild {
						if err := st.SetOptions(opts); err != nil {
							t.Fatal(err)
						}
					}
					snap := st.Publish()
					ns, _ := snap.PodNamespace(ip)
					zone, node := snap.ClientTopology(ip)
					if ns != s.ns || node != s.node || zone != zoneOf(s.node) {
						t.Fatalf("step %d: PodNamespace %q, ClientTopology %q %q; want %q, %q %q", i, ns, zone, node, s.ns, zoneOf(s.node), s.node)
					}
				}
				if st.lost != 0 {
					t.Fatalf("%d Publishes found the index not matching the records", st.lost)
				}
			})
		}
	}
}
