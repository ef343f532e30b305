package store

import (
	"net/netip"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store/pack"
)

// A headless Service with a traffic distribution answers its name and its
// SRV names per client (pkg/topology's Prefer): the ready endpoints on the
// client's node (PreferSameNode only), else those in its topology zone,
// else all. The build keeps, for each such name, a variant per topology
// zone and (PreferSameNode) per node that holds a ready endpoint: its
// addresses and SRV records over those endpoints alone. An endpoint is in
// at most one zone variant and one node variant, and a Service without a
// traffic distribution has none. A client whose node and topology zone
// have no variant gets the name's own node: every endpoint.
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

// The traffic distributions (spec.trafficDistribution) that make
// variants; variant_test.go ties them to pkg/topology's Prefer.
const (
	preferSameZone = "PreferSameZone"
	preferClose    = "PreferClose" // deprecated: PreferSameZone
	preferSameNode = "PreferSameNode"
)

// variantKinds reports which variants a traffic distribution makes.
func variantKinds(td string) (zones, nodes bool) {
	switch td {
	case preferSameZone, preferClose:
		return true, false
	case preferSameNode:
		return true, true
	}
	return false, false
}

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

// variantGroup is what one variant of a Service holds: its endpoints'
// addresses and SRV keys.
type variantGroup struct {
	addrs []netip.Addr
	srvs  []srvKey
}

// addVariants adds the variants of a headless Service's name and SRV
// names, when its traffic distribution makes them.
func (b *builder) addVariants(svc *Service, sls []*EndpointSlice, base string) {
	zones, nodes := variantKinds(svc.TrafficDistribution)
	if !zones && !nodes {
		return
	}
	groups := map[Variant]*variantGroup{}
	add := func(v Variant, sa servedAddr, host string) {
		g := groups[v]
		if g == nil {
			g = &variantGroup{}
			groups[v] = g
		}
		g.addrs = append(g.addrs, sa.addr)
		g.srvs = appendSRVKeys(g.srvs, sa.slice.Ports, host)
	}
	for sa := range servedAddrs(svc, sls) {
		if !sa.ep.Ready {
			continue
		}
		host := b.endpointNames(*sa.ep, sa.addr, base).host
		if zones && sa.ep.TopologyZone != "" {
			add(TopologyZoneVariant(sa.ep.TopologyZone), sa, host)
		}
		if nodes && sa.ep.NodeName != "" {
			add(NodeVariant(sa.ep.NodeName), sa, host)
		}
	}
	if len(groups) == 0 {
		return
	}
	marked := map[string]struct{}{base: {}}
	for v, g := range groups {
		srvs := dedup(g.srvs, compareSRVKey)
		n := b.node(base + string(v))
		n.AddAddrs(g.addrs)
		for _, name := range b.addHeadlessSRV(base, string(v), srvs) {
			marked[name] = struct{}{}
		}
		n.TakeSRV(b.bareSRV(srvs))
	}
	for name := range marked {
		b.names[name+markVariants] = b.ent
	}
	b.counts.Variants += len(marked)
}
