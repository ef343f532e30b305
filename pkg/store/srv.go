package store

import (
	"cmp"
	"slices"
	"strings"
)

// A Service's SRV records, as CoreDNS serves them: a set at the bare
// Service name (bareSRV) and, for each named port, one under
// _<port>._<proto>.<svc> (addClusterIP, addHeadlessSRV).

// appendSRVKeys appends an endpoint's srvKey per port of its slice: an
// unnamed port's too, not one without a number or a named one without a
// protocol.
func appendSRVKeys(dst []srvKey, ports []Port, host string) []srvKey {
	for _, p := range ports {
		if p.Port != 0 && (p.Name == "" || p.Protocol != "") {
			dst = append(dst, srvKey{strings.ToLower(p.Name), p.Protocol, p.Port, host})
		}
	}
	return dst
}

// compareSRVKey orders srvKeys by port name, protocol, number and target.
func compareSRVKey(a, b srvKey) int {
	return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.proto, b.proto),
		cmp.Compare(a.port, b.port), strings.Compare(a.target, b.target))
}

// bareSRV is the SRV RRset at the bare Service name (a CoreDNS extension to
// the specification): one record per target and port number, named or not,
// whatever the protocol (CoreDNS keys its duplicates on target and port),
// weight 100/N, sorted by target and port.
func (b *builder) bareSRV(keys []srvKey) []SRV {
	if len(keys) == 0 {
		return nil
	}
	out := scratchList(b.reuse, b.scratch.bare, len(keys))
	for _, k := range keys {
		out = append(out, SRV{Port: k.port, Target: k.target})
	}
	b.scratch.bare = out
	// The keys differ by port name too: sorted, the repeats of a port
	// and target are neighbours.
	slices.SortFunc(out, compareSRV)
	out = slices.Compact(out)
	weighSRV(out)
	return out
}

// weighSRV gives each record of one RRset weight 100/N (at least 1) and
// sorts the set by target and port.
func weighSRV(g []SRV) {
	w := uint16(max(1, 100/len(g)))
	for i := range g {
		g[i].Weight = w
	}
	slices.SortFunc(g, compareSRV)
}

// compareSRV orders SRV records by target, then port.
func compareSRV(a, b SRV) int {
	if c := strings.Compare(a.Target, b.Target); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}

// addHeadlessSRV adds the SRV records of a headless Service: one per
// endpoint and named port, grouped by port, weight 100/N within a group.
// A variant's (suffix, variant.go) go under the SRV names and suffix; it
// returns those SRV names then.
func (b *builder) addHeadlessSRV(base, suffix string, srvs []srvKey) (variantNames []string) {
	// A Service has few named ports: the groups are found by a scan, and
	// each owner name is made once.
	type group struct {
		name, proto string
		n           int // its records, to size srv
		srv         []SRV
	}
	var groups []group
	find := func(k srvKey) int {
		return slices.IndexFunc(groups, func(g group) bool { return g.name == k.name && g.proto == k.proto })
	}
	for _, k := range srvs {
		if k.name == "" {
			continue
		}
		i := find(k)
		if i < 0 {
			i = len(groups)
			groups = append(groups, group{name: k.name, proto: k.proto})
		}
		groups[i].n++
	}
	total := 0
	for _, g := range groups {
		total += g.n
	}
	all := scratchList(b.reuse, b.scratch.named, total)[:total]
	b.scratch.named = all
	for i, off := 0, 0; i < len(groups); i++ {
		groups[i].srv = all[off : off : off+groups[i].n]
		off += groups[i].n
	}
	for _, k := range srvs {
		if k.name == "" {
			continue
		}
		g := &groups[find(k)]
		g.srv = append(g.srv, SRV{Port: k.port, Target: k.target})
	}
	for _, g := range groups {
		weighSRV(g.srv)
		if suffix == "" {
			b.node(b.concat("_", g.name, "._", g.proto, ".", base)).TakeSRV(g.srv)
			continue
		}
		name := "_" + g.name + "._" + g.proto + "." + base
		b.node(name + suffix).TakeSRV(g.srv)
		variantNames = append(variantNames, name)
	}
	return variantNames
}
