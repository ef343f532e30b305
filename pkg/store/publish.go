package store

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// A Publish swaps, for each unit touched since the last one, what it
// contributed then for what it contributes now in the published state
// (applied.go), or applies a Service's change as a delta (delta.go).

// Publish applies the changes since the last Publish and swaps in a new
// Snapshot. The first Publish, and the first after SetOptions or Replace,
// builds everything; the others cost what the changed records contribute.
func (s *Store) Publish() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	serial := uint32(time.Now().Unix())
	if serial <= s.serial {
		serial = s.serial + 1
	}
	s.serial = serial
	prev := s.snap.Load()
	var snap *Snapshot
	var changed []string
	full := s.full || s.state == nil
	if !full {
		var ok bool
		if snap, changed, ok = s.apply(prev); !ok {
			s.lost++
			full = true
		}
	}
	if full {
		s.recent.clear()
		snap = s.rebuild()
	}
	snap.seq, snap.log = s.log.add(changed, full), s.log
	snap.Serial = serial
	var zones map[string]string
	if prev != nil {
		zones = prev.nodeZones
	}
	snap.nodeZones = s.zones.publish(zones)
	s.full = false
	s.records = nil
	clear(s.olds)
	s.snap.Store(snap)
	return snap
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
	st := newApplied(s.opts.TTL, len(s.pods))
	s.state = st
	d := newDelta()
	names := pack.NewMap[string, *Node](s.sizeHint())
	s.buildAll(func(c *contribution) { st.add(names, c, 1, d) })
	s.updateNamespaces(names, d)
	st.finish(names, d)

	snap := s.newSnapshot()
	snap.names = names.Compact().Resized()
	snap.pods = st.pods.publish(podView{}, nil, nil)
	snap.namespaces = maps.Clone(st.known)
	s.finishCounts(snap)
	return snap
}

// sizeHint is about the number of names the records make. s.mu is held.
func (s *Store) sizeHint() int {
	n := 4*len(s.services) + 16
	for _, sl := range s.slices {
		n += 2 * len(sl.eps)
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
	for u, rec := range s.olds {
		if u.kind == unitService && s.applyDelta(o, u, rec, d) {
			continue
		}
		old := rec.kept
		if old == nil {
			old = s.buildRecords(u, rec, nil)
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
		// The implicit endpoint names a PTR names come and go with it.
		if had && old.NumPTR() > 0 {
			changed = append(changed, old.PTR()...)
		}
		if has {
			if n.NumPTR() > 0 {
				changed = append(changed, n.PTR()...)
			}
			names.Set(name, n)
		} else {
			names.Del(name)
		}
	}
	snap.names = names.Done()
	snap.pods = st.pods.publish(prev.pods, d.ips, func(ip netip.Addr, ns string) {
		changed = append(changed, podNameOf(ip, ns, s.zone))
	})
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

// buildUnit runs the record rules over the records of unit u as they are
// now. Outside a rebuild (which cuts its names from an arena), a Service
// keeps its endpoints' names for its next build; prev, when not nil, is
// its previous contribution, whose endpoint nodes the build takes where
// they are the same (see addEndpointNames). s.mu is held and s.state is
// set.
func (s *Store) buildUnit(u unitKey, prev *contribution) *contribution {
	rec := s.recordsOf(u)
	return s.buildRecords(u, &rec, prev)
}

// buildRecords is buildUnit over the records rec, as they are or as they
// were.
func (s *Store) buildRecords(u unitKey, rec *unitRecords, prev *contribution) *contribution {
	b := s.startBuild(8)
	defer s.endBuild(b)
	switch u.kind {
	case unitFixed:
		b.addFixedNames()
	case unitService:
		if rec.had {
			if n := namesHint(rec.slices); n > 8 {
				b.names = make(map[string]*Node, n)
			}
			if s.arena == nil {
				b.useMemo(prev, s.published(prev))
			}
			b.addService(&rec.svc, rec.slices)
		}
	case unitPod:
		if rec.had {
			b.addPod(&rec.pod)
		}
	case unitNamespaceObject:
		if rec.had {
			b.expose(strings.ToLower(u.name))
		}
	case unitNamespace:
		b.addNamespaceNames(u.name)
	}
	b.finish()
	c := &contribution{names: b.names, counts: b.counts, claims: b.claims, eps: b.memo}
	b.memo.prune()
	for ns := range b.namespaces {
		c.ns = ns
	}
	return c
}

// published is the published name index when a build of a unit without
// prev makes what the unit contributed to it (from the records touch
// kept), else nil. s.mu is held.
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
