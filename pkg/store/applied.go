package store

import (
	"net/netip"
	"slices"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// applied is what the published snapshot was made of. The index of who
// contributes to a name costs nothing for the common name, which one unit
// alone makes: the published node is that unit's node (or ent, the one
// node of every empty non-terminal), so the Snapshot itself says who
// contributes. Only the names of two or more contributions are in shared.
// A contribution is told by its node's content, not by its unit: a unit's
// old contribution is built again from its old records (Store.touch keeps
// them), and equal contributions are interchangeable in a merge.
// Namespaces, pod IPs and counts are kept by reference counts.
type applied struct {
	ent    *Node
	shared map[string]*sharedName
	nsRefs map[string]int      // lowercase namespace → units making it known
	known  map[string]struct{} // namespaces with nsRefs > 0
	pods   podIndex
	counts Counts
}

// newApplied is an empty state for about pods pod IPs.
func newApplied(ttl uint32, pods int) *applied {
	return &applied{ent: pack.Empty(ttl), shared: map[string]*sharedName{}, nsRefs: map[string]int{},
		known: map[string]struct{}{}, pods: newPodIndex(pods)}
}

// sharedName is a name two or more contributions make: ents of them make
// it an empty non-terminal, data give it records (in no particular order:
// only PTR and pod names, whose records a merge sorts, are made by two
// units).
type sharedName struct {
	ents int32
	data []*Node
}

func (sn *sharedName) count() int { return int(sn.ents) + len(sn.data) }

// nameTable is the name index a Publish writes: a new map (rebuild) or the
// edit of the previous Snapshot's (apply).
type nameTable interface {
	Get(name string) (*Node, bool)
	Set(name string, n *Node)
	Del(name string)
}

// delta is what one apply touched.
type delta struct {
	shared map[string]struct{} // shared names to merge again
	ns     map[string]struct{}
	ips    map[netip.Addr]struct{}
	// lost is set when a contribution to take out was not there: the
	// index no longer matches the records, and the Publish rebuilds.
	lost bool
}

func newDelta() *delta {
	return &delta{shared: map[string]struct{}{}, ns: map[string]struct{}{}, ips: map[netip.Addr]struct{}{}}
}

// overlay is the nameTable of an apply: the names it wrote over the
// previous Snapshot's, so that a name taken out and put back unchanged
// costs no copy of its shard.
type overlay struct {
	base *pack.Map[string, *Node]
	m    map[string]*Node // nil: deleted
}

func (o *overlay) Get(name string) (*Node, bool) {
	if n, ok := o.m[name]; ok {
		return n, n != nil
	}
	return o.base.Get(name)
}

func (o *overlay) Set(name string, n *Node) { o.m[name] = n }

func (o *overlay) Del(name string) { o.m[name] = nil }

// add (sign 1) or remove (sign -1) the contribution c to the names of t.
// Shared names are merged by finish.
func (st *applied) add(t nameTable, c *contribution, sign int, d *delta) {
	for name, n := range c.names {
		if sign > 0 {
			st.addName(t, name, n, d)
		} else {
			st.removeName(t, name, n, d)
		}
	}
	st.counts.add(c.counts, sign)
	st.refs(c, sign, d)
}

// replace swaps a unit's old contribution for its new one c. A name whose
// node is the same in both is left alone (taking it out and putting it back
// would change nothing), so a change costs the names it changes: an
// endpoint moving in a 50-endpoint Service touches its own names, not the
// Service's 150.
func (st *applied) replace(t nameTable, old, c *contribution, d *delta) {
	st.counts.add(old.counts, -1)
	st.counts.add(c.counts, 1)
	same := func(name string, n *Node, other *contribution) bool {
		m, ok := other.names[name]
		return ok && (m == n || (m != st.ent && n != st.ent && pack.Equal(m, n)))
	}
	for name, n := range old.names {
		if !same(name, n, c) {
			st.removeName(t, name, n, d)
		}
	}
	for name, n := range c.names {
		if !same(name, n, old) {
			st.addName(t, name, n, d)
		}
	}
	st.refs(old, -1, d)
	st.refs(c, 1, d)
}

// refs counts (sign 1) or uncounts (sign -1) the namespace and the pod
// claims of c.
func (st *applied) refs(c *contribution, sign int, d *delta) {
	if c.ns != "" {
		st.nsRefs[c.ns] += sign
		if st.nsRefs[c.ns] == 0 {
			delete(st.nsRefs, c.ns)
		}
		d.ns[c.ns] = struct{}{}
	}
	for _, p := range c.claims {
		st.pods.claim(p, int32(sign))
		d.ips[p.ip] = struct{}{}
	}
}

func (st *applied) addName(t nameTable, name string, n *Node, d *delta) {
	sn, ok := st.shared[name]
	if !ok {
		only, had := t.Get(name)
		if !had {
			t.Set(name, n)
			return
		}
		sn = &sharedName{}
		st.addTo(sn, only)
		st.shared[name] = sn
	}
	st.addTo(sn, n)
	d.shared[name] = struct{}{}
}

func (st *applied) addTo(sn *sharedName, n *Node) {
	if n == st.ent {
		sn.ents++
	} else {
		sn.data = append(sn.data, n)
	}
}

func (st *applied) removeName(t nameTable, name string, n *Node, d *delta) {
	if sn, ok := st.shared[name]; ok {
		d.shared[name] = struct{}{}
		switch i := slices.IndexFunc(sn.data, func(m *Node) bool { return pack.Equal(m, n) }); {
		case n == st.ent && sn.ents > 0:
			sn.ents--
		case n != st.ent && i >= 0:
			sn.data = slices.Delete(sn.data, i, i+1)
		default:
			d.lost = true
		}
		return
	}
	only, had := t.Get(name)
	if !had || (only == st.ent) != (n == st.ent) || !pack.Equal(only, n) {
		d.lost = true
		return
	}
	t.Del(name)
}

// finish publishes the shared names d touched: merged, or back to a single
// contribution, or gone.
func (st *applied) finish(t nameTable, d *delta) {
	for name := range d.shared {
		sn := st.shared[name]
		switch sn.count() {
		case 0:
			delete(st.shared, name)
			t.Del(name)
		case 1:
			delete(st.shared, name)
			if len(sn.data) == 1 {
				t.Set(name, sn.data[0])
			} else {
				t.Set(name, st.ent)
			}
		default:
			t.Set(name, st.merged(sn))
		}
	}
}

// merged is the node of a shared name: the one data contribution, the
// empty non-terminal, or the union of several (addresses and PTRs
// deduplicated and sorted, as one build over all records makes them).
func (st *applied) merged(sn *sharedName) *Node {
	switch len(sn.data) {
	case 0:
		return st.ent
	case 1:
		return sn.data[0]
	}
	return pack.Merge(sn.data)
}

// updateNamespaces adds to t or removes the names of the namespaces in d
// whose known state changed, and reports whether any did.
