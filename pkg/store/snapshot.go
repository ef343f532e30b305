package store

import (
	"net/netip"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
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
	pods       podView           // pod IP → namespace and node (podindex.go)
	nodeZones  map[string]string // node → topology zone; replaced, not modified
	ptrs       snapPTRs          // made on first use (ptrs.go)

	// seq numbers the Snapshots of a Store; log tells what changed
	// between two of them (ChangedSince).
	seq uint64
	log *changeLog
}

// PodNamespace returns the namespace of the pod with IP ip (pods verified
// only). An IP that pods of two namespaces claim (a reused IP the watch has
// not caught up with yet) is reported as unknown.
func (s *Snapshot) PodNamespace(ip netip.Addr) (string, bool) {
	f, _ := s.pods.facts.Get(ip.Unmap())
	return f.ns.String(), f.ns != (interned{})
}

// ClientTopology returns the node and the topology zone of the pod with
// IP ip, "" for what is unknown: no pod has ip (or pods of two nodes do),
// or its node has no topology zone label.
func (s *Snapshot) ClientTopology(ip netip.Addr) (zone, node string) {
	f, _ := s.pods.facts.Get(ip.Unmap())
	if f.node == (interned{}) {
		return "", ""
	}
	node = f.node.String()
	return s.nodeZones[node], node
}

// Lookup returns the node of a lowercase fully qualified name (with the
// trailing dot).
func (s *Snapshot) Lookup(name string) (*Node, bool) {
	if n, ok := s.names.Get(name); ok {
		return n, true
	}
	return s.made(name)
}

// LookupBytes is Lookup of a name held in bytes, without a copy: a name
// read from the wire, lowercased in place.
func (s *Snapshot) LookupBytes(name []byte) (*Node, bool) {
	return s.Lookup(pack.Borrow(name))
}

// made is the node of a name the index does not keep but Lookup makes: an
// implicit endpoint name or a verified pod name. It keeps no part of name.
func (s *Snapshot) made(name string) (*Node, bool) {
	head, ok := strings.CutSuffix(name, s.Zone)
	if !ok {
		return nil, false
	}
	if svc, ok := strings.CutSuffix(head, ".svc."); ok {
		return s.endpointName(svc, name)
	}
	if pod, ok := strings.CutSuffix(head, ".pod."); ok {
		return s.podName(pod)
	}
	return nil, false
}

// podName is the node of a verified pod name, <dashed-ip>.<ns>.pod.<zone>
// (head is <dashed-ip>.<ns>), made from the pod-IP index (podindex.go):
// the IP's canonical dashed form in a namespace whose pods claim it.
func (s *Snapshot) podName(head string) (*Node, bool) {
	if s.Options.Pods != PodsVerified {
		return nil, false
	}
	dashed, ns, ok := strings.Cut(head, ".")
	if !ok || strings.IndexByte(ns, '.') >= 0 {
		return nil, false
	}
	ip, ok := parseSpelled(dashed, appendDashedIP)
	if !ok || !s.pods.hasName(ip.Unmap(), ns) {
		return nil, false
	}
	return pack.AddrNode(s.Options.TTL, ip), true
}

// endpointName is the node of an implicit endpoint name,
// <dashed-ip>.<svc>.<ns>.svc.<zone> (head is <dashed-ip>.<svc>.<ns>;
// addEndpointNames): the address's PTR names it.
func (s *Snapshot) endpointName(head, name string) (*Node, bool) {
	if strings.Count(head, ".") != 2 {
		return nil, false
	}
	dashed, _, _ := strings.Cut(head, ".")
	ip, ok := parseSpelled(dashed, appendEndpointDashedIP)
	if !ok {
		return nil, false
	}
	var buf [80]byte
	ptr, ok := s.names.Get(pack.Borrow(appendReverseName(buf[:0], ip)))
	if !ok || !ptr.HasPTR(name) {
		return nil, false
	}
	return pack.AddrNode(s.Options.TTL, ip.Unmap()), true
}

// implicitNames calls f with the implicit endpoint names n's PTR targets
// name (n is the node of a PTR name).
func (s *Snapshot) implicitNames(n *Node, f func(name string, n *Node)) {
	for _, t := range n.PTR() {
		if _, ok := s.names.Get(t); ok {
			continue
		}
		if en, ok := s.made(t); ok {
			f(t, en)
		}
	}
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
	it := s.ptrSet().Iterator()
	it.Seek(p.Masked().Addr())
	a, _, ok := it.Next()
	return ok && p.Contains(a)
}

// ptrSet is the Snapshot's PTR address set, made on first use.
func (s *Snapshot) ptrSet() *ptrSet { return s.ptrs.get(s.names, s.log, s.seq) }

// ChangedSince calls f with every lowercase name whose node or existence
// may differ between old and s (a name may come more than once), and
// reports whether it could tell: false when old is not an earlier Snapshot
// of the same Store, when the log no longer reaches back to it, or when a
// rebuild (SetOptions, Replace) came between; then anything may have
// changed. Names outside the cluster zone are PTR owner names.
func (s *Snapshot) ChangedSince(old *Snapshot, f func(name string)) bool {
	if old == nil || old.log != s.log {
		return false
	}
	return s.log.changed(old.seq, s.seq, f)
}

// Names calls f for every name of the snapshot, in no particular order,
// without the variants.
func (s *Snapshot) Names(f func(name string, n *Node)) {
	s.names.All(func(name string, n *Node) {
		if !isVariantKey(name) {
			f(name, n)
		}
		if n.NumPTR() > 0 {
			s.implicitNames(n, f)
		}
	})
	if s.Options.Pods != PodsVerified || s.pods.facts == nil {
		return
	}
	pod := func(ip netip.Addr, ns string) { f(podNameOf(ip, ns, s.Zone), pack.AddrNode(s.Options.TTL, ip)) }
	s.pods.facts.All(func(ip netip.Addr, pf podEntry) {
		if pf.ns != (interned{}) {
			pod(ip, pf.ns.String())
		}
	})
	for ip, nss := range s.pods.splits {
		for _, ns := range nss {
			pod(ip, ns)
		}
	}
}

// What a query reads of a name with variants (variant.go).

// getKey looks up name followed by suffix without building the key.
func (s *Snapshot) getKey(name, suffix string) (*Node, bool) {
	var buf [320]byte
	return s.LookupBytes(append(append(buf[:0], name...), suffix...))
}

// HasVariants reports whether name (lowercase, fully qualified) has
// answers per client: the name or a SRV name of a headless Service with a
// traffic distribution and a ready endpoint.
func (s *Snapshot) HasVariants(name string) bool {
	if s.Counts.Variants == 0 {
		return false
	}
	_, ok := s.getKey(name, markVariants)
	return ok
}

// VariantFor is the variant a client on node in topology zone zone ("":
// unknown) gets for name: its node's when the name has one, else its
// topology zone's, else "" (the name's own node).
func (s *Snapshot) VariantFor(name, zone, node string) Variant {
	if (zone == "" && node == "") || !s.HasVariants(name) {
		return ""
	}
	if node != "" {
		if v := NodeVariant(node); s.hasVariant(name, v) {
			return v
		}
	}
	if zone != "" {
		if v := TopologyZoneVariant(zone); s.hasVariant(name, v) {
			return v
		}
	}
	return ""
}

func (s *Snapshot) hasVariant(name string, v Variant) bool {
	_, ok := s.getKey(name, string(v))
	return ok
}

// LookupVariant returns the node of variant v of name, which VariantFor
// or TopologyZoneVariant gave; v "" is Lookup.
func (s *Snapshot) LookupVariant(name string, v Variant) (*Node, bool) {
	if v == "" {
		return s.Lookup(name)
	}
	return s.getKey(name, string(v))
}
