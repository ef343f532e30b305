package corefile

import (
	"fmt"
	"slices"
	"strings"
)

// Multi-Cluster Services (KEP-1645): the kubernetes plugin's multicluster
// option becomes clustersetZone; two plugins of other CoreDNS builds that
// answer the clusterset zone are dropped with a workaround.

// outOfTree are plugins of other CoreDNS builds that convert knows: stock
// CoreDNS refuses them (Unknown directive), their own builds run them.
var outOfTree = []string{"multicluster", "lighthouse"}

// IsOutOfTree reports a plugin of another CoreDNS build that convert
// knows and reports dropped, where stock CoreDNS refuses it as an unknown
// directive.
func IsOutOfTree(plugin string) bool { return slices.Contains(outOfTree, plugin) }

// kubeMulticluster reads the kubernetes plugin's multicluster option as
// CoreDNS 1.15's setup does: the last line wins, its zones normalized
// (none when it has no argument), each one of the plugin's zones or
// refused. It returns the zones, which are no cluster domain.
func (c *converter) kubeMulticluster(d Directive, zones []string) []string {
	last := -1
	for i, o := range d.Options {
		if o.Name == "multicluster" {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	o := d.Options[last]
	for _, e := range d.Options[:last] {
		if e.Name == "multicluster" {
			c.add(e.Where, d.Name, Converted, "multicluster %s: replaced by the multicluster at %s, as in CoreDNS, which keeps the last", strings.Join(e.Args, " "), o.Where)
		}
	}
	var mc []string
	for _, z := range o.Args {
		mc = append(mc, exactZones(z)...)
	}
	if len(mc) == 0 {
		c.add(o.Where, d.Name, Converted, "multicluster with no zone: CoreDNS serves no multicluster zone then; nothing to set")
		return nil
	}
	var auth []string
	for _, z := range zones {
		auth = append(auth, exactZones(z)...)
	}
	for _, z := range mc {
		if !slices.Contains(auth, z) {
			// CoreDNS's words (plugin/kubernetes/setup.go).
			c.refuse(o.Where, d.Name, "is not authoritative for the multicluster zone %s (authoritative zones: %v)", z, auth)
			return nil
		}
	}
	return mc
}

// exactZones are the zones CoreDNS's plugin.Host.NormalizeExact makes of
// a zone argument: the name as an FQDN, a CIDR's reverse zones, nothing
// for a CIDR CoreDNS ignores.
func exactZones(z string) []string {
	p, cidr, bad := cidrZone(z)
	switch {
	case bad:
		return nil
	case cidr:
		var out []string
		for _, n := range splitCIDR(p) {
			out = append(out, reverseZoneName(n))
		}
		return out
	}
	return []string{fqdn(z)}
}

// clusterset sets clustersetZone from the multicluster zones mc, once the
// cluster domain is known, and says what became of each.
func (c *converter) clusterset(d Directive, mc []string) {
	if len(mc) == 0 {
		return
	}
	where := d.Where
	for _, o := range d.Options {
		if o.Name == "multicluster" {
			where = o.Where
		}
	}
	zone := strings.TrimSuffix(mc[0], ".")
	cluster := fqdn(c.clusterDomain())
	if mc[0] == cluster || strings.HasSuffix(mc[0], "."+cluster) || strings.HasSuffix(cluster, "."+mc[0]) {
		c.add(where, d.Name, Dropped, "multicluster %s: the zone overlaps the cluster domain %s, whose names serve answers from the cluster's own Services; workaround: a zone of its own for the ServiceImports, %s as KEP-1645 names it",
			zone, strings.TrimSuffix(cluster, "."), kepZone)
		return
	}
	c.cfg.ClustersetZone = zone
	c.add(where, d.Name, Converted, "clustersetZone %s: <svc>.<ns>.svc.%s answered from the cluster's ServiceImports (multicluster.x-k8s.io) and their EndpointSlices, as CoreDNS's multicluster option", zone, zone)
	// What serve answers otherwise in the zone (test/convert's corpus 63).
	c.add(where, d.Name, Differs, "in %s, pods' names (<ip>.<ns>.pod) are NXDOMAIN (CoreDNS answers them as in the cluster domain), "+
		"the SOA serial is the imports' last change (CoreDNS: 0 until an import is updated) and dns-version's TTL 28800 is not capped by the cache (CoreDNS's cache caps it)", zone)
	for _, z := range mc[1:] {
		z = strings.TrimSuffix(z, ".")
		c.add(where, d.Name, Dropped, "multicluster zone %s: one clustersetZone (%s); workaround: rewrite name suffix %s %s, as both zones answer the same ServiceImports", z, zone, z, zone)
	}
}

// kepZone is the clusterset zone KEP-1645 names.
const kepZone = "clusterset.local"

// outOfTreeReason is the dropped finding of a plugin of outOfTree: what
// it answers, and a workaround whose answers stay right.
func outOfTreeReason(s scope, d Directive) string {
	var zones []string
	for _, z := range d.Args {
		zones = append(zones, strings.TrimSuffix(fqdn(z), "."))
	}
	if len(zones) == 0 {
		for _, z := range s.zones {
			zones = append(zones, strings.TrimSuffix(z, "."))
		}
	}
	one := kepZone
	if len(zones) > 0 && zones[0] != "" {
		one = zones[0]
	}
	z := strings.Join(zones, " ")
	if strings.TrimSpace(z) == "" {
		z = "the root zone"
	}
	if d.Name == "multicluster" {
		return fmt.Sprintf("the out-of-tree multicluster plugin (github.com/coredns/multicluster, in a CoreDNS build of its own) answers %s from the cluster's ServiceImports; "+
			"workaround: clustersetZone: %s, which answers the same ServiceImports (multicluster.x-k8s.io) and their EndpointSlices, as the kubernetes plugin of CoreDNS 1.12.2+ does with multicluster %s", z, one, one)
	}
	return fmt.Sprintf("Submariner Lighthouse's plugin (lighthouse-coredns, a CoreDNS build of its own) answers %s from what Lighthouse's agent writes, choosing clusters by their Submariner gateways' health, which serve does not read; "+
		"workaround: keep Lighthouse's CoreDNS (Service submariner-lighthouse-coredns, namespace submariner-operator) and route the zone to it: forward: [{zone: %s, upstreams: [its ClusterIP]}], as Submariner's operator does in the cluster DNS", z, one)
}
