package store

import "strings"

// A headless Service with a traffic distribution answers its name and its
// SRV names per client (pkg/topology's Prefer): the ready endpoints on the
// client's node (PreferSameNode only), else those in its topology zone,
// else all. The build keeps, for each such name, a variant per topology
// zone and (PreferSameNode) per node that holds a ready endpoint: its
// addresses and SRV records over those endpoints alone. An endpoint is in
// at most one zone variant and one node variant, and a Service without a
// traffic distribution has none. A client whose node and topology zone
// have no variant gets the name's own node: every endpoint. The build
// makes them (service.go); Snapshot.VariantFor picks a client's.

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
