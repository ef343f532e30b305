package store

import (
	"net/netip"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store/pack"
)

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
