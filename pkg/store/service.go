package store

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// The rules of a Service unit: its name (its ClusterIPs, its served
// endpoints' addresses or a CNAME), its SRV records (srv.go), its
// endpoints' names and PTRs (endpoints.go) and its variants (variant.go).

// addService adds the names of one Service: its own, its SRV records, and
// the names and PTRs of its endpoints (from its slices).
func (b *builder) addService(svc *Service, epSlices []*EndpointSlice) {
	ns := strings.ToLower(svc.Namespace)
	name := strings.ToLower(svc.Name)
	if !b.expose(ns) {
		return
	}
	base := b.concat(name, ".", ns, ".svc.", b.zone)
	b.addExternal(svc, base)
	if svc.Type == Headless && b.opts.NoEndpoints {
		return
	}
	b.stable = svc.Type != Headless
	defer func() { b.stable = false }()
	if svc.Type == ExternalName {
		b.ensure(ns + ".svc." + b.zone)
		b.node(base).SetCNAME(svc.ExternalName)
		b.counts.Services++
		return
	}
	b.implicit = !b.allNames && implicitAllowed(svc, epSlices, b.opts.EndpointPodNames)
	eps, srvs := b.servedEndpoints(svc, epSlices, base)
	if b.opts.IgnoreEmptyService && len(eps) == 0 {
		return
	}
	b.counts.Services++
	if svc.Type == Headless && len(eps) == 0 {
		// A headless Service without a served endpoint has no name (as
		// CoreDNS: NXDOMAIN, not NODATA); its namespace still exists.
		b.ensure(ns + ".svc." + b.zone)
		return
	}
	b.counts.Endpoints += len(eps)
	b.ensure(ns + ".svc." + b.zone)
	svcNode := b.node(base)
	switch svc.Type {
	case ClusterIP:
		b.addClusterIP(svc, svcNode, base)
	case Headless:
		addrs := scratchList(b.reuse, b.scratch.addrs, len(eps))
		for _, e := range eps {
			addrs = append(addrs, e.addr)
		}
		svcNode.AddAddrs(addrs)
		b.scratch.addrs = addrs
		b.addHeadlessSRV(base, "", srvs)
		svcNode.TakeSRV(b.bareSRV(srvs))
		if !b.ownOnly {
			b.addVariants(svc, epSlices, base)
		}
	}
	// Endpoint names and PTRs, for every Service with endpoints (as
	// CoreDNS does).
	if !b.ownOnly {
		b.stable = false
		b.addEndpointNames(eps, base)
	}
}

// servedEndpoints collects the endpoints served under a Service (ready ones,
// or all with PublishNotReadyAddresses), deduplicated, and for a headless
// Service one srvKey per endpoint and port (name empty for unnamed ports).
func (b *builder) servedEndpoints(svc *Service, epSlices []*EndpointSlice, base string) ([]served, []srvKey) {
	n, ports := 0, 0
	for _, sl := range epSlices {
		n += len(sl.Endpoints)
		ports = max(ports, len(sl.Ports))
	}
	if b.memo != nil && b.memo.m == nil {
		b.memo.m = make(map[epKey]epNames, n)
	}
	eps := scratchList(b.reuse, b.scratch.eps, n)
	var srvs []srvKey
	if svc.Type == Headless {
		srvs = scratchList(b.reuse, b.scratch.srvs, n*ports)
	}
	defer func() {
		b.scratch.eps = eps
		if srvs != nil { // a ClusterIP Service makes none: keep the list
			b.scratch.srvs = srvs
		}
	}()
	for sa := range servedAddrs(svc, epSlices) {
		e := b.endpointNames(*sa.ep, sa.addr, base)
		eps = append(eps, e)
		if svc.Type != Headless {
			continue
		}
		srvs = appendSRVKeys(srvs, sa.slice.Ports, e.host)
	}
	if b.distinct {
		return eps, srvs // no repeats; addService sorts what it publishes
	}
	return dedup(eps, compareServed), dedup(srvs, compareSRVKey)
}

// addClusterIP adds the addresses, PTRs and named-port SRV records of a
// ClusterIP Service.
func (b *builder) addClusterIP(svc *Service, svcNode *pack.Draft, base string) {
	for _, ip := range svc.ClusterIPs {
		svcNode.AddAddr(ip)
		b.node(b.reverseName(ip)).AddPTR(base)
	}
	var bare []srvKey
	for _, p := range svc.Ports {
		if p.Port != 0 {
			bare = append(bare, srvKey{port: p.Port, target: base})
		}
		if p.Name == "" || p.Protocol == "" {
			continue
		}
		n := b.node(b.concat("_", strings.ToLower(p.Name), "._", p.Protocol, ".", base))
		n.AddSRV(SRV{Priority: 0, Weight: 100, Port: p.Port, Target: base})
	}
	svcNode.TakeSRV(b.bareSRV(bare))
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

// dedupScan is the longest list dedup scans for repeats; a longer one is
// sorted, so that a Service of thousands of endpoints costs a build of
// O(n log n), not O(n²). A variable for the tests only.
var dedupScan = 32

// dedup removes the repeats of s in place: in its order when short, else
// sorted by cmp. The builds do not depend on the order.
func dedup[T comparable](s []T, cmp func(a, b T) int) []T {
	if len(s) > dedupScan {
		slices.SortFunc(s, cmp)
		return slices.Compact(s)
	}
	out := s[:0]
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// compareServed orders served endpoints by address, then name (the PTR
// name follows from the address).
func compareServed(a, b served) int {
	if c := a.addr.Compare(b.addr); c != 0 {
		return c
	}
	if c := strings.Compare(a.host, b.host); c != 0 {
		return c
	}
	return strings.Compare(a.ptr, b.ptr)
}
