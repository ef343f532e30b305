package store

import (
	"net/netip"
)

// A headless Service with a traffic distribution answers its name and its
// SRV names per client (pkg/topology's Prefer): the ready endpoints on the
// client's node (PreferSameNode only), else those in its topology zone,
// else all. The build keeps, for each such name, a variant per topology
// zone and (PreferSameNode) per node that holds a ready endpoint: its
// addresses and SRV records over those endpoints alone. An endpoint is in
// at most one zone variant and one node variant, and a Service without a
// traffic distribution has none. A client whose node and topology zone
// have no variant gets the name's own node: every endpoint. The variant
// keys and their lookups are in snapshot.go.

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
