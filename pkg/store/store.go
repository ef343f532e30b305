package store

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/pack"
)

// Store holds the slim records and publishes Snapshots. Its methods are safe
// for concurrent use. Mutations take effect for readers at the next Publish,
// which applies only the units they touched (see unit.go).
type Store struct {
	zone string // lowercase, trailing dot

	mu         sync.Mutex
	opts       Options
	exposed    map[string]struct{}
	services   map[nsName]svcRecord
	slices     map[nsName]EndpointSlice
	pods       map[nsName]Pod
	namespaces map[string]struct{}
	// bySvc indexes the slices by the Service of their label.
	bySvc  map[nsName]map[string]struct{}
	serial uint32
	// labelled counts the slices with a Service label.
	labelled int

	// full is set until the next Publish rebuilds everything: before the
	// first one, after SetOptions and Replace.
	full bool
	// dirty holds, for each unit touched since the last Publish, what it
	// contributed then (built from the records before the first touch),
	// or nil for a Service unit, whose records then are in olds.
	dirty map[unitKey]*contribution
	olds  map[unitKey]*oldRecords
	// deltas counts the Service changes applied as deltas (delta.go).
	deltas       int
	deltaScratch deltaScratch
	// recent keeps the published contributions of recently changed units
	// of many names, so that their next change does not build what they
	// contribute again (see keepRecent).
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
	// (arena.go).
	arena *rebuildArena
	// records is where the Services set while full is set keep their
	// names and lists (arena.go); nil otherwise.
	records *recordArena
	// scratch is the lists the last build outside a rebuild made and
	// dropped, for the next one (build.go), and drafts the drafts of
	// nodes the builds made and packed (package pack).
	scratch buildScratch
	drafts  pack.DraftPool
	// topo is the pod-IP and node index (topology.go).
	topo topoIndex

	snap atomic.Pointer[Snapshot]
}

type nsName struct{ ns, name string }

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
		slices:     map[nsName]EndpointSlice{},
		pods:       map[nsName]Pod{},
		namespaces: map[string]struct{}{},
		bySvc:      map[nsName]map[string]struct{}{},
		full:       true,
		dirty:      map[unitKey]*contribution{},
		olds:       map[unitKey]*oldRecords{},
		log:        &changeLog{},
		ptrIdx:     &ptrIndex{},
		topo:       newTopoIndex(),
	}
	return s, nil
}

// Zone returns the lowercase cluster zone with its trailing dot.
func (s *Store) Zone() string { return s.zone }

// touch records what unit u contributes now, before its first change since
// the last Publish: a Service unit's records, which the Publish applies as
// a delta when it can (delta.go), else the contribution. s.mu is held.
func (s *Store) touch(u unitKey) {
	if s.full {
		return
	}
	if _, ok := s.dirty[u]; ok {
		return
	}
	if len(s.dirty) >= s.wideChange() {
		// A wide change (a resync, a drain that moves every endpoint):
		// applying each unit would cost several rebuilds (issue 55 row 7:
		// 21.9 s against 2.9 s at 80k Services), so the next Publish
		// rebuilds, and no unit keeps what it contributed.
		s.full = true
		s.wide++
		clear(s.dirty)
		clear(s.olds)
		return
	}
	kept, _ := s.recent.take(u)
	if u.kind == unitService {
		svc, had := s.service(u.nsName)
		s.olds[u] = &oldRecords{svc: svc, had: had, slices: s.serviceSlices(u.nsName), kept: kept}
		s.dirty[u] = nil
		return
	}
	if kept == nil {
		kept = s.buildUnit(u, nil)
	}
	s.dirty[u] = kept
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
	if old.Service != "" {
		svc := nsName{old.Namespace, old.Service}
		s.touch(unitKey{kind: unitService, nsName: svc})
		delete(s.bySvc[svc], old.Name)
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
	s.slices[nsName{v.Namespace, v.Name}] = v
}

// SetPod adds or replaces a Pod.
func (s *Store) SetPod(v Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := v.key()
	if old, ok := s.pods[k]; ok {
		s.topo.claim(old, -1)
	}
	s.topo.claim(v, 1)
	s.touch(unitKey{kind: unitPod, nsName: k})
	s.pods[k] = v
}

// DeletePod removes a Pod.
func (s *Store) DeletePod(ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := nsName{ns, name}
	old, ok := s.pods[k]
	if !ok {
		return
	}
	s.topo.claim(old, -1)
	s.touch(unitKey{kind: unitPod, nsName: k})
	delete(s.pods, k)
}

// SetNamespace adds a Namespace.
func (s *Store) SetNamespace(v Namespace) {
	setIn(s, &s.namespaces, unitKey{kind: unitNamespaceObject, nsName: nsName{name: v.Name}}, v.Name, struct{}{})
}

// DeleteNamespace removes a Namespace (not the objects in it).
func (s *Store) DeleteNamespace(name string) {
	deleteIn(s, &s.namespaces, unitKey{kind: unitNamespaceObject, nsName: nsName{name: name}}, name)
}

func (v Service) key() nsName { return nsName{v.Namespace, v.Name} }
func (v Pod) key() nsName     { return nsName{v.Namespace, v.Name} }

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

// setIn stores v under k in *m after recording what unit u contributes
// now. It takes s.mu; m points at a field of s because Replace swaps
// the maps.
func setIn[K comparable, V any](s *Store, m *map[K]V, u unitKey, k K, v V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(u)
	(*m)[k] = v
}

// deleteIn deletes k from *m, if there, after recording what unit u
// contributes now. It takes s.mu, as setIn does.
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
	s.slices = make(map[nsName]EndpointSlice, len(o.EndpointSlices))
	s.bySvc = map[nsName]map[string]struct{}{}
	s.labelled = 0
	for _, v := range o.EndpointSlices {
		s.removeSlice(nsName{v.Namespace, v.Name})
		s.addSlice(v)
	}
	s.pods = make(map[nsName]Pod, len(o.Pods))
	for _, v := range o.Pods {
		s.pods[v.key()] = v
	}
	s.namespaces = make(map[string]struct{}, len(o.Namespaces))
	for _, v := range o.Namespaces {
		s.namespaces[v.Name] = struct{}{}
	}
	s.topo.reset(s.pods, o.Nodes)
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

// Keys returns the keys of the objects of kind k the Store holds, in no
// order: a relist deletes those its list no longer has, and the feed keeps
// no copy of them.
func (s *Store) Keys(k ObjectKind) []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch k {
	case KindService:
		return keysOf(s.services)
	case KindEndpointSlice:
		return keysOf(s.slices)
	case KindPod:
		return keysOf(s.pods)
	case KindNamespace:
		out := make([]Key, 0, len(s.namespaces))
		for name := range s.namespaces {
			out = append(out, Key{Name: name})
		}
		return out
	case KindNode:
		out := make([]Key, 0, len(s.topo.zones))
		for name := range s.topo.zones {
			out = append(out, Key{Name: name})
		}
		return out
	}
	return nil
}

func keysOf[V any](m map[nsName]V) []Key {
	out := make([]Key, 0, len(m))
	for k := range m {
		out = append(out, Key{k.ns, k.name})
	}
	return out
}

// Snapshot returns the current Snapshot, nil before the first Publish.
func (s *Store) Snapshot() *Snapshot { return s.snap.Load() }

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
	if s.full || s.state == nil {
		s.recent.clear()
		snap = s.rebuild()
		s.log.add(snap, nil, true)
	} else if next, changed, ok := s.apply(prev); ok {
		snap = next
		s.log.add(snap, changed, false)
	} else {
		s.lost++
		s.recent.clear()
		snap = s.rebuild()
		s.log.add(snap, nil, true)
	}
	snap.Serial = serial
	s.topo.publish(prev, snap)
	s.full = false
	s.records = nil
	clear(s.dirty)
	clear(s.olds)
	s.snap.Store(snap)
	return snap
}
