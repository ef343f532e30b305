package store

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/pack"
)

// unitKind is what a unit of contribution is.
type unitKind uint8

// The units of contribution. A unit's names and nodes come from one run of
// the builder over its records alone.
const (
	// unitFixed is the apex, dns-version and the svc and pod subtrees.
	unitFixed unitKind = iota
	// unitService is a Service with the EndpointSlices labelled with it.
	unitService
	// unitPod is a Pod.
	unitPod
	// unitNamespaceObject is a Namespace object: it only makes its
	// namespace known.
	unitNamespaceObject
	// unitNamespace is a known namespace's <ns>.svc and <ns>.pod names,
	// present while any unit makes the namespace known (name lowercase).
	unitNamespace
)

// unitKey names a unit: the kind and the record key (namespace and name as
// the records have them).
type unitKey struct {
	kind unitKind
	nsName
}

// contribution is what one unit adds to a snapshot.
type contribution struct {
	// names are the unit's names; the ent node marks an empty
	// non-terminal. Nodes are sorted and never modified.
	names  map[string]*Node
	counts Counts // Services, Endpoints and Pods
	ns     string // the namespace the unit makes known (lowercase), or ""
	podIPs []podIP
	// eps are the names of the unit's endpoints (a Service built after a
	// change), or nil.
	eps *epMemo
}

// buildUnit runs the record rules over the records of unit u as they are
// now. Outside a rebuild (which cuts its names from an arena), a Service
// keeps its endpoints' names for its next build; prev, when not nil, is
// its previous contribution, whose endpoint nodes the build takes where
// they are the same (see addEndpointNames). s.mu is held and s.state is
// set.
func (s *Store) buildUnit(u unitKey, prev *contribution) *contribution {
	var rec *oldRecords
	if u.kind == unitService {
		rec = &oldRecords{}
		if rec.svc, rec.had = s.service(u.nsName); rec.had {
			rec.slices = s.serviceSlices(u.nsName)
		}
	}
	return s.buildRecords(u, rec, prev)
}

// buildRecords is buildUnit over the records rec of a Service unit.
func (s *Store) buildRecords(u unitKey, rec *oldRecords, prev *contribution) *contribution {
	b := newBuilder(s.zone, s.opts, s.exposed, s.state.ent, 8)
	b.arena, b.pool, b.reuse = s.arena, &s.drafts, true
	if s.arena == nil {
		b.scratch = s.scratch
		defer func() { s.scratch = b.scratch.kept() }()
	} else {
		b.pool, b.scratch = &s.arena.drafts, s.arena.scratch
		defer func() { s.arena.scratch = b.scratch.kept() }()
	}
	switch u.kind {
	case unitFixed:
		b.addFixedNames()
	case unitService:
		if rec.had {
			sls := rec.slices
			if n := namesHint(sls); n > 8 {
				b.names = make(map[string]*Node, n)
			}
			if s.arena == nil {
				b.useMemo(prev, s.published(prev))
			}
			b.addService(&rec.svc, sls)
		}
	case unitPod:
		if p, ok := s.pods[u.nsName]; ok {
			b.addPod(&p)
		}
	case unitNamespaceObject:
		if _, ok := s.namespaces[u.name]; ok {
			b.expose(strings.ToLower(u.name))
		}
	case unitNamespace:
		b.addNamespaceNames(u.name)
	}
	b.finish()
	c := &contribution{names: b.names, counts: b.counts, podIPs: b.podIPs, eps: b.memo}
	b.memo.prune()
	for ns := range b.namespaces {
		c.ns = ns
	}
	return c
}

// published is the published name index when a build of a unit without
// prev makes what the unit contributed to it (Store.touch), else nil.
// s.mu is held.
func (s *Store) published(prev *contribution) *pack.Map[string, *Node] {
	if prev != nil || s.full {
		return nil
	}
	if snap := s.snap.Load(); snap != nil {
		return snap.names
	}
	return nil
}

// namesHint is about the number of names a Service with these slices
// makes: its own few, and a name and a PTR per endpoint.
func namesHint(sls []*EndpointSlice) int {
	n := 8
	for _, sl := range sls {
		n += 2 * len(sl.Endpoints)
	}
	return n
}

// serviceSlices returns the slices labelled with Service k in the order of
// their names (none with NoEndpoints). s.mu is held.
func (s *Store) serviceSlices(k nsName) []*EndpointSlice {
	if s.opts.NoEndpoints || len(s.bySvc[k]) == 0 {
		return nil
	}
	names := make([]string, 0, len(s.bySvc[k]))
	for n := range s.bySvc[k] {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*EndpointSlice, len(names))
	for i, n := range names {
		sl := s.slices[nsName{k.ns, n}]
		out[i] = &sl
	}
	return out
}

// applied is what the published snapshot was made of. The index of who
// contributes to a name costs nothing for the common name, which one unit
// alone makes: the published node is that unit's node (or ent, the one
// node of every empty non-terminal), so the Snapshot itself says who
// contributes. Only the names of two or more contributions are in shared.
// A contribution is told by its node's content, not by its unit: a unit's
// old contribution is built again from its old records (Store.touch), and
// equal contributions are interchangeable in a merge.
type applied struct {
	ent    *Node
	shared map[string]*sharedName
	nsRefs map[string]int           // lowercase namespace → units making it known
	known  map[string]struct{}      // namespaces with nsRefs > 0
	claims map[netip.Addr][]nsCount // pod IP → namespaces of the pods claiming it
	counts Counts
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

type nsCount struct {
	ns string
	n  int32
}

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
	st.counts.Services += sign * c.counts.Services
	st.counts.Endpoints += sign * c.counts.Endpoints
	st.counts.Pods += sign * c.counts.Pods
	st.counts.Variants += sign * c.counts.Variants
	st.refs(c, sign, d)
}

// replace swaps a unit's old contribution for its new one c. A name whose
// node is the same in both is left alone (taking it out and putting it back
// would change nothing), so a change costs the names it changes: an
// endpoint moving in a 50-endpoint Service touches its own names, not the
// Service's 150.
func (st *applied) replace(t nameTable, old, c *contribution, d *delta) {
	st.counts.Services += c.counts.Services - old.counts.Services
	st.counts.Endpoints += c.counts.Endpoints - old.counts.Endpoints
	st.counts.Pods += c.counts.Pods - old.counts.Pods
	st.counts.Variants += c.counts.Variants - old.counts.Variants
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

// refs counts (sign 1) or uncounts (sign -1) the namespace and the pod IPs
// of c.
func (st *applied) refs(c *contribution, sign int, d *delta) {
	if c.ns != "" {
		st.nsRefs[c.ns] += sign
		if st.nsRefs[c.ns] == 0 {
			delete(st.nsRefs, c.ns)
		}
		d.ns[c.ns] = struct{}{}
	}
	for _, p := range c.podIPs {
		st.claim(p, int32(sign))
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

func (st *applied) claim(p podIP, sign int32) {
	cl := st.claims[p.ip]
	i := slices.IndexFunc(cl, func(c nsCount) bool { return c.ns == p.ns })
	switch {
	case i < 0:
		cl = append(cl, nsCount{p.ns, sign})
	default:
		cl[i].n += sign
		if cl[i].n == 0 {
			cl = slices.Delete(cl, i, i+1)
		}
	}
	if len(cl) == 0 {
		delete(st.claims, p.ip)
	} else {
		st.claims[p.ip] = cl
	}
}

// podNS is the PodNamespace value of ip: its namespace, "" when pods of
// two namespaces claim it; ok is false when no pod does.
func (st *applied) podNS(ip netip.Addr) (string, bool) {
	switch cl := st.claims[ip]; len(cl) {
	case 0:
		return "", false
	case 1:
		return cl[0].ns, true
	}
	return "", true
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
func (s *Store) updateNamespaces(t nameTable, d *delta) bool {
	st := s.state
	changed := false
	for ns := range d.ns {
		_, was := st.known[ns]
		is := st.nsRefs[ns] > 0
		if was == is {
			continue
		}
		changed = true
		c := s.buildUnit(unitKey{kind: unitNamespace, nsName: nsName{name: ns}}, nil)
		if is {
			st.known[ns] = struct{}{}
			st.add(t, c, 1, d)
		} else {
			delete(st.known, ns)
			st.add(t, c, -1, d)
		}
	}
	return changed
}

// allUnits calls f for every unit of the records. s.mu is held.
func (s *Store) allUnits(f func(unitKey)) {
	f(unitKey{kind: unitFixed})
	for k := range s.services {
		f(unitKey{kind: unitService, nsName: k})
	}
	for k := range s.pods {
		f(unitKey{kind: unitPod, nsName: k})
	}
	for n := range s.namespaces {
		f(unitKey{kind: unitNamespaceObject, nsName: nsName{name: n}})
	}
}

// buildAll builds every unit and hands each contribution to add. The units
// are built on a second goroutine while add runs on this one: a rebuild is
// the start-up's largest step, and the two halves take about as long. s.mu
// is held and s.state is set; the builds read the records and s.state.ent
// only, and only they use s.arena.
func (s *Store) buildAll(add func(*contribution)) {
	const batch = 64
	built := make(chan []*contribution, 16)
	s.arena = &rebuildArena{}
	go func() {
		defer close(built)
		cs := make([]*contribution, 0, batch)
		s.allUnits(func(u unitKey) {
			cs = append(cs, s.buildUnit(u, nil))
			if len(cs) == batch {
				built <- cs
				cs = make([]*contribution, 0, batch)
			}
		})
		built <- cs
	}()
	for cs := range built {
		for _, c := range cs {
			add(c)
		}
	}
	s.arena = nil
}

// rebuild applies every unit to a new state and makes a Snapshot of it
// from scratch. s.mu is held.
func (s *Store) rebuild() *Snapshot {
	st := &applied{ent: pack.Empty(s.opts.TTL), shared: map[string]*sharedName{},
		nsRefs: map[string]int{}, known: map[string]struct{}{}, claims: map[netip.Addr][]nsCount{}}
	s.state = st
	d := newDelta()
	names := pack.NewMap[string, *Node](s.sizeHint())
	s.buildAll(func(c *contribution) { st.add(names, c, 1, d) })
	s.updateNamespaces(names, d)
	st.finish(names, d)

	snap := s.newSnapshot()
	snap.names = names.Compact().Resized()
	snap.podNS = pack.NewMap[netip.Addr, string](len(st.claims))
	for ip := range st.claims {
		v, _ := st.podNS(ip)
		snap.podNS.Set(ip, v)
	}
	snap.podNS.Compact()
	snap.namespaces = maps.Clone(st.known)
	s.finishCounts(snap)
	return snap
}

// sizeHint is about the number of names the records make. s.mu is held.
func (s *Store) sizeHint() int {
	n := 4*len(s.services) + 2*len(s.pods) + 16
	for _, sl := range s.slices {
		n += 2 * len(sl.Endpoints)
	}
	return n
}

// apply applies the units touched since the last Publish to the state and
// makes the next Snapshot from prev: it returns the names whose node or
// existence changed. ok is false when the index turned out not to match
// the records (a bug): the caller rebuilds. s.mu is held.
func (s *Store) apply(prev *Snapshot) (snap *Snapshot, changed []string, ok bool) {
	st := s.state
	d := newDelta()
	o := &overlay{base: prev.names, m: map[string]*Node{}}
	for u, old := range s.dirty {
		if old == nil {
			rec := s.olds[u]
			if s.applyDelta(o, u, rec, d) {
				continue
			}
			if old = rec.kept; old == nil {
				old = s.buildRecords(u, rec, nil)
			}
		}
		c := s.buildUnit(u, old)
		st.replace(o, old, c, d)
		s.recent.keep(u, c)
	}
	nsChanged := s.updateNamespaces(o, d)
	st.finish(o, d)
	if d.lost {
		return nil, nil, false
	}

	snap = s.newSnapshot()
	names := prev.names.Edit()
	for name, n := range o.m {
		has := n != nil
		old, had := prev.names.Get(name)
		if had && has && (old == n || pack.Equal(old, n)) {
			continue
		}
		if !had && !has {
			continue
		}
		changed = append(changed, name)
		if has {
			names.Set(name, n)
		} else {
			names.Del(name)
		}
	}
	snap.names = names.Done()
	snap.podNS = prev.podNS
	if len(d.ips) > 0 {
		pe := prev.podNS.Edit()
		for ip := range d.ips {
			if v, ok := st.podNS(ip); ok {
				pe.Set(ip, v)
			} else {
				pe.Del(ip)
			}
		}
		snap.podNS = pe.Done()
	}
	snap.namespaces = prev.namespaces
	if nsChanged {
		snap.namespaces = maps.Clone(st.known)
	}
	s.finishCounts(snap)
	slices.Sort(changed)
	return snap, changed, true
}

func (s *Store) newSnapshot() *Snapshot {
	snap := &Snapshot{Zone: s.zone, Options: s.opts, exposed: s.exposed}
	snap.ptrs.idx = s.ptrIdx
	return snap
}

// finishCounts fills the counts of snap from the state. s.mu is held.
func (s *Store) finishCounts(snap *Snapshot) {
	c := s.state.counts
	if !s.opts.NoEndpoints {
		c.EndpointSlices = s.labelled
	}
	c.Namespaces = len(s.state.known)
	c.Names = snap.names.Len()
	snap.Counts = c
}
