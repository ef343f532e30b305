package store

import (
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
