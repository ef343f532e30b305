package store

import (
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// Store holds the slim records and publishes Snapshots. Its methods are safe
// for concurrent use. Mutations take effect for readers at the next Publish,
// which applies only the units they touched (publish.go).
type Store struct {
	zone string // lowercase, trailing dot

	mu         sync.Mutex
	opts       Options
	exposed    map[string]struct{}
	services   map[nsName]svcRecord
	slices     map[nsName]sliceRecord
	pods       map[nsName]podRecord
	namespaces map[string]struct{}
	// bySvc indexes the slices by the Service of their label.
	bySvc map[nsName]map[string]struct{}
	// labelled counts the slices with a Service label.
	labelled int
	// zones places the nodes of the pod-IP index (topology.go).
	zones  nodeZones
	serial uint32

	// full is set until the next Publish rebuilds everything: before the
	// first one, after SetOptions and Replace.
	full bool
	// olds holds, for each unit touched since the last Publish, its
	// records then: the Publish builds what it contributed from them, or
	// applies a Service's change as a delta.
	olds map[unitKey]*unitRecords
	// deltas counts the Service changes applied as deltas (delta.go).
	deltas       int
	deltaScratch deltaScratch
	// recent keeps the published contributions of recently changed units
	// of many names, so that their next change does not build what they
	// contribute again (recent.go).
	recent recentUnits
	// state is what the last Publish applied (nil before the first).
	state *applied
	// lost counts the Publishes that found the index not matching the
	// records and rebuilt everything (a bug; the tests want none).
	lost int
	// wide counts the changes wide enough to rebuild (wideChange).
	wide int
	log  *changeLog
	// ptrIdx makes the PTR sets of the Snapshots (ptrs.go).
	ptrIdx *ptrIndex
	// arena is what the builds of a rebuild share while it runs
	// (build.go).
	arena *rebuildArena
	// records is where the Services set while full is set keep their
	// names and lists (svcrecord.go); nil otherwise.
	records *recordArena
	// scratch is the lists the last build outside a rebuild made and
	// dropped, for the next one (build.go), and drafts the drafts of
	// nodes the builds made and packed (package pack).
	scratch buildScratch
	drafts  pack.DraftPool

	snap atomic.Pointer[Snapshot]
}

// New returns an empty Store. Snapshot returns nil until the first Publish,
// which is how the wire layer knows the first sync has not happened.
func New(opts Options) (*Store, error) {
	zone, err := checkOptions(opts)
	if err != nil {
		return nil, err
	}
	s := &Store{
		opts:       opts,
		zone:       zone,
		exposed:    exposedSet(opts.Namespaces),
		services:   map[nsName]svcRecord{},
		slices:     map[nsName]sliceRecord{},
		pods:       map[nsName]podRecord{},
		namespaces: map[string]struct{}{},
		bySvc:      map[nsName]map[string]struct{}{},
		zones:      newNodeZones(nil),
		full:       true,
		olds:       map[unitKey]*unitRecords{},
		log:        &changeLog{},
		ptrIdx:     &ptrIndex{},
	}
	return s, nil
}

// Zone returns the lowercase cluster zone with its trailing dot.
func (s *Store) Zone() string { return s.zone }

// touch records unit u's records before its first change since the last
// Publish, with its published contribution when recentUnits keeps it.
// s.mu is held.
func (s *Store) touch(u unitKey) {
	if s.full {
		return
	}
	if _, ok := s.olds[u]; ok {
		return
	}
	if len(s.olds) >= s.wideChange() {
		// A wide change (a resync, a drain that moves every endpoint):
		// applying each unit would cost several rebuilds (issue 55 row 7:
		// 21.9 s against 2.9 s at 80k Services), so the next Publish
		// rebuilds, and no unit keeps what it contributed.
		s.full = true
		s.wide++
		clear(s.olds)
		return
	}
	rec := s.recordsOf(u)
	rec.kept, _ = s.recent.take(u)
	s.olds[u] = &rec
}

// recordsOf is unit u's records as they are. s.mu is held.
func (s *Store) recordsOf(u unitKey) unitRecords {
	var r unitRecords
	switch u.kind {
	case unitService:
		if r.svc, r.had = s.service(u.nsName); r.had {
			r.slices = s.serviceSlices(u.nsName)
		}
	case unitPod:
		var p podRecord
		if p, r.had = s.pods[u.nsName]; r.had {
			r.pod = p.pod(u.nsName)
		}
	case unitNamespaceObject:
		_, r.had = s.namespaces[u.name]
	}
	return r
}

// wideChange is how many units a change may touch before the next Publish
// rebuilds instead of applying them: an eighth of the objects, at least
// minWideChange. Applying a unit costs about four times what it costs in a
// rebuild, so a change past it publishes in at most about 1.5 rebuilds.
func (s *Store) wideChange() int {
	return max(minWideChange, (len(s.services)+len(s.slices)+len(s.pods))/8)
}

// minWideChange is a variable for the tests, which make every change wide.
var minWideChange = 256

// SetService adds or replaces a Service.
func (s *Store) SetService(v Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := v.key()
	var r svcRecord
	if a := s.recordArena(); a != nil {
		k.name, r = a.service(&v)
	} else {
		r = newSvcRecord(&v)
	}
	if old, ok := s.services[k]; ok && old == r {
		return // a relist's copy, or a change of nothing the records read
	}
	s.touch(unitKey{kind: unitService, nsName: k})
	s.services[k] = r
}

// service is the Service record of k. s.mu is held.
func (s *Store) service(k nsName) (Service, bool) {
	r, ok := s.services[k]
	if !ok {
		return Service{}, false
	}
	return r.service(k), true
}

// DeleteService removes a Service.
func (s *Store) DeleteService(ns, name string) { deleteObject(s, &s.services, unitService, ns, name) }

// SetEndpointSlice adds or replaces an EndpointSlice.
func (s *Store) SetEndpointSlice(v EndpointSlice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.slices[nsName{v.Namespace, v.Name}]; ok && old.equal(&v) {
		return // a relist's copy: no unit is touched
	}
	s.removeSlice(nsName{v.Namespace, v.Name})
	s.addSlice(v)
}

// DeleteEndpointSlice removes an EndpointSlice.
func (s *Store) DeleteEndpointSlice(ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeSlice(nsName{ns, name})
}

// removeSlice drops a slice and its index entry. s.mu is held.
func (s *Store) removeSlice(k nsName) {
	old, ok := s.slices[k]
	if !ok {
		return
	}
	if old.service != "" {
		svc := nsName{k.ns, old.service}
		s.touch(unitKey{kind: unitService, nsName: svc})
		delete(s.bySvc[svc], k.name)
		if len(s.bySvc[svc]) == 0 {
			delete(s.bySvc, svc)
		}
		s.labelled--
	}
	delete(s.slices, k)
}

// addSlice stores a slice and indexes it by its Service. s.mu is held.
func (s *Store) addSlice(v EndpointSlice) {
	if v.Service != "" {
		svc := nsName{v.Namespace, v.Service}
		s.touch(unitKey{kind: unitService, nsName: svc})
		if s.bySvc[svc] == nil {
			s.bySvc[svc] = map[string]struct{}{}
		}
		s.bySvc[svc][v.Name] = struct{}{}
		s.labelled++
	}
	s.slices[nsName{v.Namespace, v.Name}] = newSliceRecord(&v)
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
		key := nsName{k.ns, n}
		rec := s.slices[key]
		sl := rec.slice(key)
		out[i] = &sl
	}
	return out
}

// SetPod adds or replaces a Pod.
func (s *Store) SetPod(v Pod) {
	k := v.key()
	setIn(s, &s.pods, unitKey{kind: unitPod, nsName: k}, k, newPodRecord(v), (*podRecord).equal)
}

// DeletePod removes a Pod.
func (s *Store) DeletePod(ns, name string) { deleteObject(s, &s.pods, unitPod, ns, name) }

// SetNamespace adds a Namespace.
func (s *Store) SetNamespace(v Namespace) {
	setIn(s, &s.namespaces, unitKey{kind: unitNamespaceObject, nsName: nsName{name: v.Name}}, v.Name, struct{}{},
		func(*struct{}, *struct{}) bool { return true })
}

// DeleteNamespace removes a Namespace (not the objects in it).
func (s *Store) DeleteNamespace(name string) {
	deleteIn(s, &s.namespaces, unitKey{kind: unitNamespaceObject, nsName: nsName{name: name}}, name)
}

// SetNodeTopology adds or replaces a node's topology zone.
func (s *Store) SetNodeTopology(v NodeTopology) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zones.set(v)
}

// DeleteNodeTopology removes a node.
func (s *Store) DeleteNodeTopology(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zones.remove(name)
}

// recordArena is the record arena while a full Publish is pending, else
// nil. s.mu is held.
func (s *Store) recordArena() *recordArena {
	if !s.full {
		return nil
	}
	if s.records == nil {
		s.records = &recordArena{}
	}
	return s.records
}

// deleteObject is deleteIn for an object that is a unit of its own.
func deleteObject[V any](s *Store, m *map[nsName]V, kind unitKind, ns, name string) {
	k := nsName{ns, name}
	deleteIn(s, m, unitKey{kind: kind, nsName: k}, k)
}

// setIn stores v under k in *m after touch keeps unit u's records. It
// takes s.mu; m points at a field of s because Replace swaps the maps.
func setIn[K comparable, V any](s *Store, m *map[K]V, u unitKey, k K, v V, equal func(a, b *V) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := (*m)[k]; ok && equal(&old, &v) {
		return // a relist's copy: unit u is not touched
	}
	s.touch(u)
	(*m)[k] = v
}

// deleteIn deletes k from *m, if there, after touch keeps unit u's
// records. It takes s.mu, as setIn does.
func deleteIn[K comparable, V any](s *Store, m *map[K]V, u unitKey, k K) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := (*m)[k]; !ok {
		return
	}
	s.touch(u)
	delete(*m, k)
}

// Replace swaps the whole data set, as a manifest reload does; the next
// Publish rebuilds everything.
func (s *Store) Replace(o Objects) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.full = true
	a := s.recordArena()
	s.services = make(map[nsName]svcRecord, len(o.Services))
	for _, v := range o.Services {
		k := v.key()
		var r svcRecord
		k.name, r = a.service(&v)
		s.services[k] = r
	}
	s.slices = make(map[nsName]sliceRecord, len(o.EndpointSlices))
	s.bySvc = map[nsName]map[string]struct{}{}
	s.labelled = 0
	for _, v := range o.EndpointSlices {
		s.removeSlice(nsName{v.Namespace, v.Name})
		s.addSlice(v)
	}
	s.pods = make(map[nsName]podRecord, len(o.Pods))
	for _, v := range o.Pods {
		s.pods[v.key()] = newPodRecord(v)
	}
	s.namespaces = make(map[string]struct{}, len(o.Namespaces))
	for _, v := range o.Namespaces {
		s.namespaces[v.Name] = struct{}{}
	}
	s.zones = newNodeZones(o.Nodes)
}

// ObjectKind is a kind of object the Store holds, for Keys.
type ObjectKind uint8

// The kinds of object a Store holds.
const (
	KindService ObjectKind = iota
	KindEndpointSlice
	KindPod
	KindNamespace
	KindNode
)

// Key is an object's namespace ("" for a Namespace) and name.
type Key struct{ Namespace, Name string }

// Keys yields the keys of the objects of kind k the Store holds, in no
// order: a relist deletes those its list no longer has, and the feed keeps
// no copy of them. The Store is locked while it yields: the loop must not
// call it.
func (s *Store) Keys(k ObjectKind) iter.Seq[Key] {
	return func(yield func(Key) bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch k {
		case KindService:
			yieldKeys(s.services, yield)
		case KindEndpointSlice:
			yieldKeys(s.slices, yield)
		case KindPod:
			yieldKeys(s.pods, yield)
		case KindNamespace:
			for name := range s.namespaces {
				if !yield(Key{Name: name}) {
					return
				}
			}
		case KindNode:
			for name := range s.zones.m {
				if !yield(Key{Name: name}) {
					return
				}
			}
		}
	}
}

func yieldKeys[V any](m map[nsName]V, yield func(Key) bool) {
	for k := range m {
		if !yield(Key{k.ns, k.name}) {
			return
		}
	}
}

// Snapshot returns the current Snapshot, nil before the first Publish.
func (s *Store) Snapshot() *Snapshot { return s.snap.Load() }

// Options returns the options the Store builds snapshots with.
func (s *Store) Options() Options {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts
}

// SetOptions changes the options of the snapshots built from now on (a
// config reload): the next Publish applies them to the records the Store
// holds, rebuilding everything. The zone cannot change: its names index the
// records.
func (s *Store) SetOptions(opts Options) error {
	zone, err := checkOptions(opts)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if zone != s.zone {
		return fmt.Errorf("%w: zone %q: the store serves %q", ErrBadOptions, opts.Zone, s.zone)
	}
	s.opts, s.exposed = opts, exposedSet(opts.Namespaces)
	s.full = true
	return nil
}

// startBuild is a builder of the Store's options over its lists and
// drafts, or over the rebuild's while one runs; endBuild takes the lists
// back for the next build. s.mu is held and s.state is set.
func (s *Store) startBuild(size int) *builder {
	b := newBuilder(s.zone, s.opts, s.exposed, s.state.ent, size)
	b.arena, b.reuse = s.arena, true
	if s.arena == nil {
		b.pool, b.scratch = &s.drafts, s.scratch
	} else {
		b.pool, b.scratch = &s.arena.drafts, s.arena.scratch
	}
	return b
}

// endBuild keeps the lists of b's build for the next one.
func (s *Store) endBuild(b *builder) {
	if s.arena == nil {
		s.scratch = b.scratch.kept()
	} else {
		s.arena.scratch = b.scratch.kept()
	}
}
