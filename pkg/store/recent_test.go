package store

import (
	"fmt"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// TestRecentBound: the kept contributions never hold more than recentNames
// names, but for one larger unit kept alone; small units are not kept, and
// take hands a contribution back once.
func TestRecentBound(t *testing.T) {
	contrib := func(n int) *contribution {
		c := &contribution{names: map[string]*Node{}}
		for i := range n {
			c.names[fmt.Sprintf("n%d.", i)] = &Node{}
		}
		return c
	}
	var r recentUnits
	limit := recentNames
	for i := range 400 {
		u := unitKey{kind: unitService, nsName: nsName{"ns", fmt.Sprintf("s%d", i)}}
		r.keep(u, contrib(10+i%90))
		sum := 0
		for _, c := range r.m {
			sum += len(c.names)
		}
		if sum != r.names || r.names > limit {
			t.Fatalf("after %d keeps: %d names kept (counted %d), limit %d", i+1, sum, r.names, limit)
		}
	}
	big := unitKey{kind: unitService, nsName: nsName{"ns", "big"}}
	r.keep(big, contrib(recentNames+1))
	if len(r.m) != 1 || r.names != recentNames+1 || r.m[big] == nil {
		t.Fatalf("a unit over the budget: %d units of %d names kept, want it alone", len(r.m), r.names)
	}
	r.keep(unitKey{kind: unitService, nsName: nsName{"ns", "next"}}, contrib(10))
	if len(r.m) != 1 || r.names != 10 {
		t.Fatalf("after the unit over the budget: %d units of %d names kept, want the next alone", len(r.m), r.names)
	}
	small := unitKey{kind: unitService, nsName: nsName{"ns", "small"}}
	r.keep(small, contrib(recentMinNames-1))
	if _, ok := r.take(small); ok {
		t.Error("a unit of fewer than recentMinNames names was kept")
	}
	u := unitKey{kind: unitService, nsName: nsName{"ns", "last"}}
	c := contrib(20)
	r.keep(u, c)
	if got, ok := r.take(u); !ok || got != c {
		t.Fatalf("take: %p, %v; want the kept contribution %p", got, ok, c)
	}
	if _, ok := r.take(u); ok {
		t.Error("take gave the same contribution twice")
	}
}

// TestRecentReused: a Service's second change takes its old contribution
// from the kept one, whose nodes hold the published records, and the
// Snapshot still equals a build from scratch. Two of its endpoints share a
// hostname, so that its changes are built, not applied as deltas.
func TestRecentReused(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	slice := func(shift int) EndpointSlice {
		sl := headlessSlice(0, shift)
		sl.Endpoints[1].Hostname, sl.Endpoints[2].Hostname = "twice", "twice"
		return sl
	}
	st.SetService(Service{Namespace: "ns-0", Name: "hl-0", Type: Headless})
	st.SetEndpointSlice(slice(0))
	st.Publish()
	u := unitKey{kind: unitService, nsName: nsName{"ns-0", "hl-0"}}
	for i := 1; i <= 3; i++ {
		st.SetEndpointSlice(slice(i))
		snap := st.Publish()
		kept, ok := st.recent.m[u]
		if !ok {
			t.Fatalf("change %d: the Service's contribution was not kept", i)
		}
		for name, n := range kept.names {
			if pub, _ := snap.Lookup(name); pub == nil || !pack.Equal(pub, n) {
				t.Fatalf("change %d: kept node of %s does not hold the published records", i, name)
			}
		}
		if msg := compareView(snap, st.oracle(), nil); msg != "" {
			t.Fatalf("change %d: %s", i, msg)
		}
		st.SetEndpointSlice(slice(i + 100))
		if st.olds[u].kept != kept {
			t.Fatalf("change %d: the next change built the old contribution instead of taking the kept one", i)
		}
		snap = st.Publish()
		if msg := compareView(snap, st.oracle(), nil); msg != "" || st.lost != 0 || st.deltas != 0 {
			t.Fatalf("change %d after reuse: %s (lost %d, deltas %d)", i, msg, st.lost, st.deltas)
		}
	}
}
