package store

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store/pack"
)

// PodMode is how pod records (<dashed-ip>.<ns>.pod.<zone>) are answered, as
// CoreDNS's "pods" option.
type PodMode uint8

// The pod modes.
const (
	// PodsDisabled answers no pod records (NXDOMAIN).
	PodsDisabled PodMode = iota
	// PodsInsecure answers any well-formed dashed IP in an exposed namespace
	// without checking that such a pod exists (kube-dns behaviour).
	PodsInsecure
	// PodsVerified answers only IPs of pods that exist in that namespace.
	PodsVerified
)

// ParsePodMode parses "disabled", "insecure" or "verified".
func ParsePodMode(s string) (PodMode, error) {
	switch s {
	case "disabled":
		return PodsDisabled, nil
	case "insecure":
		return PodsInsecure, nil
	case "verified":
		return PodsVerified, nil
	}
	return 0, fmt.Errorf("pods mode %q: want disabled, insecure or verified", s)
}

func (m PodMode) String() string {
	switch m {
	case PodsInsecure:
		return "insecure"
	case PodsVerified:
		return "verified"
	}
	return "disabled"
}

// VersionTTL is the TTL of dns-version.<zone>, as CoreDNS.
const VersionTTL = 28800

// SchemaVersion is the version of the specification served.
const SchemaVersion = "1.1.0"

// MaxTTL is the largest --ttl accepted (CoreDNS's bound): a copy of
// v1alpha1.MaxRecordTTL that test/apidefaults ties to it.
const MaxTTL = 3600

// Options shape what a Snapshot holds. They are the CoreDNS-parity options.
type Options struct {
	// Zone is the cluster domain, e.g. "cluster.local" (case and a trailing
	// dot do not matter).
	Zone string
	// TTL of every record but dns-version, and the SOA minimum.
	TTL uint32
	// Pods is the pod record mode.
	Pods PodMode
	// Namespaces, when not empty, are the only namespaces served.
	Namespaces []string
	// IgnoreEmptyService makes Services without a ready endpoint NXDOMAIN.
	IgnoreEmptyService bool
	// EndpointPodNames names endpoints without a hostname after their pod.
	EndpointPodNames bool
	// NoEndpoints serves no endpoint records: headless Services and endpoint
	// names are NXDOMAIN.
	NoEndpoints bool
}

// ErrBadOptions is wrapped by New for invalid Options.
var ErrBadOptions = errors.New("store: bad options")

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

// checkOptions validates opts and returns the lowercase zone with its
// trailing dot.
func checkOptions(opts Options) (string, error) {
	if err := v1alpha1.ValidateClusterDomain(opts.Zone); err != nil {
		return "", fmt.Errorf("%w: zone: %w", ErrBadOptions, err)
	}
	zone := strings.ToLower(strings.TrimSuffix(opts.Zone, "."))
	if opts.TTL > MaxTTL {
		return "", fmt.Errorf("%w: ttl %d above %d", ErrBadOptions, opts.TTL, MaxTTL)
	}
	return zone + ".", nil
}

// exposedSet is the namespace filter of names (nil: every namespace).
func exposedSet(names []string) map[string]struct{} {
	if len(names) == 0 {
		return nil
	}
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[strings.ToLower(n)] = struct{}{}
	}
	return set
}

// namespaceExposed reports whether the filter exposed (exposedSet's) lets
// ns, lowercase, through.
func namespaceExposed(exposed map[string]struct{}, ns string) bool {
	if exposed == nil {
		return true
	}
	_, ok := exposed[ns]
	return ok
}

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

// Snapshot is an immutable view of the records. Callers must not modify it or
// anything reachable from it. Snapshots of one Store share what did not
// change between them.
type Snapshot struct {
	// Zone is the lowercase cluster zone with its trailing dot.
	Zone string
	// Options the snapshot was built with.
	Options Options
	// Serial is the SOA serial: it grows with every Publish.
	Serial uint32
	Counts Counts

	names      *pack.Map[string, *Node]
	namespaces map[string]struct{} // replaced, not modified, when it changes
	exposed    map[string]struct{}
	podNS      *pack.Map[netip.Addr, string] // verified mode: pod IP → namespace, "" when two namespaces share the IP
	podNode    *pack.Map[netip.Addr, string] // pod IP → node, "" when two nodes share the IP (topology.go)
	nodeZones  map[string]string             // node → topology zone; replaced, not modified
	ptrs       snapPTRs                      // made on first use (ptrs.go)

	// seq numbers the Snapshots of a Store; log tells what changed
	// between two of them (ChangedSince).
	seq uint64
	log *changeLog
}

// PodNamespace returns the namespace of the pod with IP ip (pods verified
// only). An IP that pods of two namespaces claim (a reused IP the watch has
// not caught up with yet) is reported as unknown.
func (s *Snapshot) PodNamespace(ip netip.Addr) (string, bool) {
	ns, ok := s.podNS.Get(ip.Unmap())
	return ns, ok && ns != ""
}

// Lookup returns the node of a lowercase fully qualified name (with the
// trailing dot).
func (s *Snapshot) Lookup(name string) (*Node, bool) {
	return s.names.Get(name)
}

// NamespaceExposed reports whether the namespace filter lets ns through.
func (s *Snapshot) NamespaceExposed(ns string) bool {
	return namespaceExposed(s.exposed, ns)
}

// HasNamespace reports whether ns is known (a Namespace object or any object
// in it) and exposed.
func (s *Snapshot) HasNamespace(ns string) bool {
	_, ok := s.namespaces[ns]
	return ok
}

// HasPTRIn reports whether the address of a PTR name of the snapshot lies
// in p.
func (s *Snapshot) HasPTRIn(p netip.Prefix) bool {
	it := s.ptrs.idx.of(s).Iterator()
	it.Seek(p.Masked().Addr())
	a, _, ok := it.Next()
	return ok && p.Contains(a)
}

// Names calls f for every name of the snapshot, in no particular order,
// without the variants (variant.go).
func (s *Snapshot) Names(f func(name string, n *Node)) {
	s.names.All(func(name string, n *Node) {
		if !isVariantKey(name) {
			f(name, n)
		}
	})
}
