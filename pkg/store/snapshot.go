package store

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/pack"
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

// Counts are the sizes of a Snapshot, for metrics.
type Counts struct {
	Services       int
	EndpointSlices int
	Endpoints      int
	Pods           int
	Namespaces     int
	Names          int
	// Variants counts the names with answers per client (variant.go).
	Variants int
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

// namespaceExposed reports whether the filter exposed (exposedSet's) lets
// ns, lowercase, through.
func namespaceExposed(exposed map[string]struct{}, ns string) bool {
	if exposed == nil {
		return true
	}
	_, ok := exposed[ns]
	return ok
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
// without the variants.
func (s *Snapshot) Names(f func(name string, n *Node)) {
	s.names.All(func(name string, n *Node) {
		if !isVariantKey(name) {
			f(name, n)
		}
	})
}

// What a query reads of a name with variants (variant.go builds them).
//
// A variant lives in the index under a key no query makes: the name, a
// 0x00 byte and an uppercase letter (queries are lowercased), then the
// lowercase topology zone (Z) or node (N). The name with 0x00 V marks a
// name that has variants. An endpoint name (web-0.web.ns.svc) names one
// pod and has none.

// Variant names the answer a client got for a name: "" is the name's own
// node, anything else a variant of it. It goes in the reply cache's key.
type Variant string

// The marks of the variant keys.
const (
	markVariants = "\x00V"
	markZone     = "\x00Z"
	markNode     = "\x00N"
)

// TopologyZoneVariant is the variant of the endpoints in a topology zone.
func TopologyZoneVariant(zone string) Variant {
	return Variant(markZone + strings.ToLower(zone))
}

// NodeVariant is the variant of the endpoints on a node.
func NodeVariant(node string) Variant { return Variant(markNode + strings.ToLower(node)) }

// isVariantKey reports whether an index key is a variant's or a mark's.
func isVariantKey(name string) bool { return strings.IndexByte(name, 0) >= 0 }

// variantBase is the name of a variant key, the key itself otherwise.
func variantBase(key string) string {
	if i := strings.IndexByte(key, 0); i >= 0 {
		return key[:i]
	}
	return key
}

// getKey looks up name followed by suffix without building the key.
func (s *Snapshot) getKey(name, suffix string) (*Node, bool) {
	var buf [320]byte
	k := append(append(buf[:0], name...), suffix...)
	return s.names.Get(pack.Borrow(k))
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

// ClientTopology returns the node and the topology zone of the pod with
// IP ip, "" for what is unknown: no pod has ip (or pods of two nodes do),
// or its node has no topology zone label.
func (s *Snapshot) ClientTopology(ip netip.Addr) (zone, node string) {
	if s.podNode == nil {
		return "", ""
	}
	node, _ = s.podNode.Get(ip.Unmap())
	if node == "" {
		return "", ""
	}
	return s.nodeZones[node], node
}

// How names spell addresses: the dashed labels of pods and endpoints
// and the reverse names. The build makes them, a query parses them.

// DashedIP is the label a pod or an endpoint without a hostname gets:
// 10-1-2-3 for IPv4, the compressed IPv6 form with ':' replaced by '-'
// (fd00--1) for IPv6.
func DashedIP(a netip.Addr) string { return string(appendDashedIP(nil, a)) }

// appendDashedIP appends DashedIP(a) to dst.
func appendDashedIP(dst []byte, a netip.Addr) []byte {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		dst = strconv.AppendUint(dst, uint64(b[0]), 10)
		for _, x := range b[1:] {
			dst = append(dst, '-')
			dst = strconv.AppendUint(dst, uint64(x), 10)
		}
		return dst
	}
	start := len(dst)
	dst = a.WithZone("").AppendTo(dst)
	for i := start; i < len(dst); i++ {
		if dst[i] == ':' {
			dst[i] = '-'
		}
	}
	return dst
}

// EndpointDashedIP is the label of an endpoint without a hostname:
// DashedIP, with a "0" after a trailing '-' (an IPv6 address ending in
// "::"), as CoreDNS names endpoints. Pod names keep DashedIP, as CoreDNS's
// verified mode matches them.
func EndpointDashedIP(a netip.Addr) string { return string(appendEndpointDashedIP(nil, a)) }

// appendEndpointDashedIP appends EndpointDashedIP(a) to dst.
func appendEndpointDashedIP(dst []byte, a netip.Addr) []byte {
	start := len(dst)
	dst = appendDashedIP(dst, a)
	if len(dst) > start && dst[len(dst)-1] == '-' {
		dst = append(dst, '0')
	}
	return dst
}

// ParseDashedIP is the inverse of DashedIP. A label with exactly three dashes
// and no "--" is IPv4, anything else is tried as IPv6.
func ParseDashedIP(label string) (netip.Addr, bool) {
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", "."))
		if err != nil || !a.Is4() {
			return netip.Addr{}, false
		}
		return a, true
	}
	if !strings.Contains(label, "-") {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ":"))
	if err != nil || !a.Is6() || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a, true
}

const hexDigits = "0123456789abcdef"

// The reverse zones of IPv4 and IPv6 addresses.
const (
	reverse4 = "in-addr.arpa."
	reverse6 = "ip6.arpa."
)

// ReverseName is the PTR owner name of an address: d.c.b.a.in-addr.arpa. for
// IPv4 and the 32-nibble form under ip6.arpa. for IPv6.
func ReverseName(a netip.Addr) string {
	var buf [74]byte
	return string(appendReverseName(buf[:0], a))
}

// ReverseZone is the reverse name of an octet-aligned (IPv4) or
// nibble-aligned (IPv6) masked prefix: "10.in-addr.arpa." for 10.0.0.0/8.
func ReverseZone(p netip.Prefix) string {
	var buf [74]byte
	return string(appendReverse(buf[:0], p.Addr(), p.Bits()))
}

// appendReverseName appends ReverseName(a) to dst.
func appendReverseName(dst []byte, a netip.Addr) []byte {
	a = a.Unmap()
	return appendReverse(dst, a, a.BitLen())
}

// appendReverse appends the reverse name of the first bits of a, whole
// octets (IPv4) or nibbles (IPv6).
func appendReverse(dst []byte, a netip.Addr, bits int) []byte {
	if a.Is4() {
		b := a.As4()
		for i := bits/8 - 1; i >= 0; i-- {
			dst = strconv.AppendUint(dst, uint64(b[i]), 10)
			dst = append(dst, '.')
		}
		return append(dst, reverse4...)
	}
	b := a.As16()
	for i := bits/4 - 1; i >= 0; i-- {
		nib := b[i/2] >> 4
		if i%2 == 1 {
			nib = b[i/2] & 0xf
		}
		dst = append(dst, hexDigits[nib], '.')
	}
	return append(dst, reverse6...)
}

// ParseReverse is the inverse of ReverseZone: the prefix a lowercase
// reverse name stands for, 96.10.in-addr.arpa. for 10.96.0.0/16, a nibble
// name under ip6.arpa. for a prefix of 4 bits per label. ok is false for
// names that stand for no address (labels that are not octets or nibbles,
// too many labels).
func ParseReverse(name string) (p netip.Prefix, ok bool) {
	rest, v4 := strings.CutSuffix(name, reverse4)
	if !v4 {
		if rest, ok = strings.CutSuffix(name, reverse6); !ok {
			return p, false
		}
	}
	if rest != "" && rest[len(rest)-1] != '.' {
		return p, false // not a label boundary: "xin-addr.arpa."
	}
	labels := strings.Split(rest, ".")
	labels = labels[:len(labels)-1] // the empty string after the last dot
	if v4 {
		if len(labels) > 4 {
			return p, false
		}
		var a [4]byte
		for i, l := range labels {
			n, err := strconv.ParseUint(l, 10, 8)
			if err != nil || strconv.FormatUint(n, 10) != l {
				return p, false
			}
			a[len(labels)-1-i] = byte(n)
		}
		return netip.PrefixFrom(netip.AddrFrom4(a), 8*len(labels)), true
	}
	if len(labels) > 32 {
		return p, false
	}
	var a [16]byte
	for i, l := range labels {
		nib := -1
		if len(l) == 1 {
			nib = strings.IndexByte(hexDigits, l[0])
		}
		if nib < 0 {
			return p, false
		}
		pos := len(labels) - 1 - i // nibble position from the left
		if pos%2 == 0 {
			a[pos/2] |= byte(nib) << 4
		} else {
			a[pos/2] |= byte(nib)
		}
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), 4*len(labels)), true
}

// reverseAddr is the inverse of ReverseName: the address of a full PTR owner
// name, false for any other name.
func reverseAddr(name string) (netip.Addr, bool) {
	p, ok := ParseReverse(name)
	if !ok || p.Bits() != p.Addr().BitLen() {
		return netip.Addr{}, false
	}
	return p.Addr(), true
}
