package store

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/benbjohnson/immutable"
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

func compareUnit(a, b unitKey) int {
	if a.kind != b.kind {
		return int(a.kind) - int(b.kind)
	}
	return compareNsName(a.nsName, b.nsName)
}

// contribution is what one unit adds to a snapshot.
type contribution struct {
	// names are the unit's names; the ent node marks an empty
	// non-terminal. Nodes are sorted and never modified.
	names  map[string]*Node
	counts Counts // Services, Endpoints and Pods
	ns     string // the namespace the unit makes known (lowercase), or ""
	podIPs []podIP
}

// buildUnit runs the record rules over the records of unit u as they are
// now. s.mu is held and s.state is set.
func (s *Store) buildUnit(u unitKey) *contribution {
	b := newBuilder(s.zone, s.opts, s.exposed, s.state.ent, 8)
	switch u.kind {
	case unitFixed:
		b.addFixedNames()
	case unitService:
		if svc, ok := s.services[u.nsName]; ok {
			b.addService(&svc, s.serviceSlices(u.nsName))
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
	b.sortNodes()
	c := &contribution{names: b.names, counts: b.counts, podIPs: b.podIPs}
	for ns := range b.namespaces {
		c.ns = ns
	}
	return c
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

// applied is what the published snapshot was made of: for every name, the
// units that contribute to it.
type applied struct {
	ent    *Node
	names  map[string]nameState
	nsRefs map[string]int           // lowercase namespace → units making it known
	known  map[string]struct{}      // namespaces with nsRefs > 0
	claims map[netip.Addr][]nsCount // pod IP → namespaces of the pods claiming it
	counts Counts
}

// nameState is who contributes to a name: ents units make it an empty
// non-terminal, data (sorted by unit) give it records.
type nameState struct {
	ents int32
	data []dataRef
}

type dataRef struct {
	u unitKey
	n *Node
}

type nsCount struct {
	ns string
	n  int32
}

// delta is what one apply touched.
type delta struct {
	names map[string]struct{}
	ns    map[string]struct{}
	ips   map[netip.Addr]struct{}
}

func newDelta() *delta {
	return &delta{names: map[string]struct{}{}, ns: map[string]struct{}{}, ips: map[netip.Addr]struct{}{}}
}

// add (sign 1) or remove (sign -1) the contribution c of unit u.
func (st *applied) add(u unitKey, c *contribution, sign int, d *delta) {
	for name, n := range c.names {
		d.names[name] = struct{}{}
		ns := st.names[name]
		switch {
		case n == st.ent:
			ns.ents += int32(sign)
		case sign > 0:
			i, _ := slices.BinarySearchFunc(ns.data, u, func(r dataRef, u unitKey) int { return compareUnit(r.u, u) })
			ns.data = slices.Insert(ns.data, i, dataRef{u, n})
		default:
			ns.data = slices.DeleteFunc(ns.data, func(r dataRef) bool { return r.u == u })
		}
		if ns.ents == 0 && len(ns.data) == 0 {
			delete(st.names, name)
		} else {
			st.names[name] = ns
		}
	}
	st.counts.Services += sign * c.counts.Services
	st.counts.Endpoints += sign * c.counts.Endpoints
	st.counts.Pods += sign * c.counts.Pods
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

// merged is the node of name: the one contributor's node, or the union of
// several (addresses and PTRs deduplicated and sorted, as one build over
// all records makes them); nil when the name does not exist.
func (st *applied) merged(name string) *Node {
	ns, ok := st.names[name]
	switch {
	case !ok:
		return nil
	case len(ns.data) == 1:
		return ns.data[0].n
	case len(ns.data) == 0:
		return st.ent
	}
	m := &Node{TTL: ns.data[0].n.TTL}
	for _, r := range ns.data {
		for _, a := range r.n.A {
			addAddr(m, a)
		}
		for _, a := range r.n.AAAA {
			addAddr(m, a)
		}
		for _, p := range r.n.PTR {
			addPTR(m, p)
		}
		m.SRV = append(m.SRV, r.n.SRV...)
		m.TXT = append(m.TXT, r.n.TXT...)
		if m.CNAME == "" {
			m.CNAME = r.n.CNAME
		}
	}
	slices.SortFunc(m.A, netip.Addr.Compare)
	slices.SortFunc(m.AAAA, netip.Addr.Compare)
	slices.Sort(m.PTR)
	return m
}

// updateNamespaces adds or removes the names of the namespaces in d whose
// known state changed, and reports whether any did.
func (s *Store) updateNamespaces(d *delta) bool {
	st := s.state
	changed := false
	for ns := range d.ns {
		_, was := st.known[ns]
		is := st.nsRefs[ns] > 0
		if was == is {
			continue
		}
		changed = true
		u := unitKey{kind: unitNamespace, nsName: nsName{name: ns}}
		c := s.buildUnit(u)
		if is {
			st.known[ns] = struct{}{}
			st.add(u, c, 1, d)
		} else {
			delete(st.known, ns)
			st.add(u, c, -1, d)
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

// rebuild applies every unit to a new state and makes a Snapshot of it
// from scratch. s.mu is held.
func (s *Store) rebuild() *Snapshot {
	st := &applied{ent: &Node{TTL: s.opts.TTL}, names: make(map[string]nameState, 4*len(s.services)+2*len(s.pods)+16),
		nsRefs: map[string]int{}, known: map[string]struct{}{}, claims: map[netip.Addr][]nsCount{}}
	s.state = st
	d := newDelta()
	s.allUnits(func(u unitKey) { st.add(u, s.buildUnit(u), 1, d) })
	s.updateNamespaces(d)

	snap := s.newSnapshot()
	snap.names = newShardMap[string, *Node](len(st.names))
	ptrs := immutable.NewSortedMapBuilder[netip.Addr, struct{}](addrComparer{})
	for name := range st.names {
		n := st.merged(name)
		snap.names.put(name, n)
		if len(n.PTR) > 0 {
			if a, ok := reverseAddr(name); ok {
				ptrs.Set(a, struct{}{})
			}
		}
	}
	snap.ptrs = ptrs.Map()
	snap.podNS = newShardMap[netip.Addr, string](len(st.claims))
	for ip := range st.claims {
		v, _ := st.podNS(ip)
		snap.podNS.put(ip, v)
	}
	snap.namespaces = maps.Clone(st.known)
	s.finishCounts(snap)
	return snap
}

// apply applies the units touched since the last Publish to the state and
// makes the next Snapshot from prev: it returns the names whose node or
// existence changed. s.mu is held.
func (s *Store) apply(prev *Snapshot) (*Snapshot, []string) {
	st := s.state
	d := newDelta()
	for u, old := range s.dirty {
		st.add(u, old, -1, d)
		st.add(u, s.buildUnit(u), 1, d)
	}
	nsChanged := s.updateNamespaces(d)

	snap := s.newSnapshot()
	names := prev.names.edit()
	ptrs := prev.ptrs
	var changed []string
	for name := range d.names {
		n := st.merged(name)
		old, had := prev.names.get(name)
		if had && n != nil && (old == n || equalNode(old, n)) {
			continue
		}
		if !had && n == nil {
			continue
		}
		changed = append(changed, name)
		if n == nil {
			names.del(name)
		} else {
			names.set(name, n)
		}
		if a, ok := reverseAddr(name); ok {
			if n != nil && len(n.PTR) > 0 {
				ptrs = ptrs.Set(a, struct{}{})
			} else {
				ptrs = ptrs.Delete(a)
			}
		}
	}
	snap.names = names.done()
	snap.ptrs = ptrs
	snap.podNS = prev.podNS
	if len(d.ips) > 0 {
		pe := prev.podNS.edit()
		for ip := range d.ips {
			if v, ok := st.podNS(ip); ok {
				pe.set(ip, v)
			} else {
				pe.del(ip)
			}
		}
		snap.podNS = pe.done()
	}
	snap.namespaces = prev.namespaces
	if nsChanged {
		snap.namespaces = maps.Clone(st.known)
	}
	s.finishCounts(snap)
	slices.Sort(changed)
	return snap, changed
}

func (s *Store) newSnapshot() *Snapshot {
	return &Snapshot{Zone: s.zone, Options: s.opts, exposed: s.exposed}
}

// finishCounts fills the counts of snap from the state. s.mu is held.
func (s *Store) finishCounts(snap *Snapshot) {
	c := s.state.counts
	if !s.opts.NoEndpoints {
		c.EndpointSlices = s.labelled
	}
	c.Namespaces = len(s.state.known)
	c.Names = snap.names.len()
	snap.Counts = c
}

// equalNode reports whether two nodes hold the same data.
func equalNode(a, b *Node) bool {
	return a.TTL == b.TTL && a.CNAME == b.CNAME && slices.Equal(a.A, b.A) && slices.Equal(a.AAAA, b.AAAA) &&
		slices.Equal(a.SRV, b.SRV) && slices.Equal(a.PTR, b.PTR) && slices.Equal(a.TXT, b.TXT)
}

type addrComparer struct{}

func (addrComparer) Compare(a, b netip.Addr) int { return a.Compare(b) }
