package store

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// oracleView is what one build over every record makes: the whole-snapshot
// build the store had before it applied changes per unit. Tests compare
// every Snapshot with it.
type oracleView struct {
	names      map[string]*Node
	counts     Counts
	podNS      map[netip.Addr]string // "" when two namespaces claim the IP
	podNode    map[netip.Addr]string // "" when two nodes claim the IP
	namespaces map[string]struct{}
}

// oracle builds the records of s from scratch, in one builder, with every
// name a name of its own: the names a Snapshot makes at Lookup (verified
// pods', implicit endpoints') too. Counts.Names counts those of the
// index, as a second build without allNames gives them.
func (s *Store) oracle() *oracleView {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.oracleBuild(true)
	o.counts.Names = s.oracleBuild(false).counts.Names
	return o
}

func (s *Store) oracleBuild(allNames bool) *oracleView {
	b := newBuilder(s.zone, s.opts, s.exposed, pack.Empty(s.opts.TTL), 16)
	b.allNames = allNames
	for ns := range s.namespaces {
		b.expose(strings.ToLower(ns))
	}
	b.addFixedNames()
	stored := map[nsName]EndpointSlice{}
	for k := range s.slices {
		stored[k] = s.storedSlice(k)
	}
	bySvc := oracleSlicesByService(b, stored)
	for k, r := range s.services {
		svc := r.service(k)
		b.addService(&svc, bySvc[k])
	}
	for k, r := range s.pods {
		p := r.pod(k)
		b.addPod(&p)
	}
	o := &oracleView{podNS: map[netip.Addr]string{}, podNode: map[netip.Addr]string{}}
	for _, c := range b.claims {
		if c.ns != (interned{}) {
			putAgreed(o.podNS, c.ip, c.ns.String())
		}
	}
	// The nodes come from the records, not from the build's claims.
	for _, p := range s.pods {
		for _, ip := range p.ips.addrs() {
			if p.node != (interned{}) {
				putAgreed(o.podNode, ip.Unmap(), p.node.String())
			}
		}
	}
	for ns := range b.namespaces {
		b.addNamespaceNames(ns)
	}
	b.finish()
	o.names = maps.Clone(b.names)
	o.namespaces = maps.Clone(b.namespaces)
	o.counts = b.counts
	o.counts.Namespaces = len(b.namespaces)
	o.counts.Names = len(b.names)
	// A verified pod's names are not in the name index: the Snapshot
	// answers them from the pod-IP index, as these nodes.
	for _, c := range b.claims {
		if c.ns != (interned{}) {
			o.names[podNameOf(c.ip, c.ns.String(), b.zone)] = pack.AddrNode(b.ttl, c.ip)
		}
	}
	return o
}

// putAgreed sets m[ip] to v, or to "" when it holds another value.
func putAgreed(m map[netip.Addr]string, ip netip.Addr, v string) {
	if have, dup := m[ip]; dup && have != v {
		v = ""
	}
	m[ip] = v
}

// oracleSlicesByService groups the endpoint slices by Service, in the order
// of their namespace and name (none with NoEndpoints), and counts them.
func oracleSlicesByService(b *builder, all map[nsName]EndpointSlice) map[nsName][]*EndpointSlice {
	bySvc := map[nsName][]*EndpointSlice{}
	if b.opts.NoEndpoints {
		return bySvc
	}
	keys := slices.SortedFunc(maps.Keys(all), compareNsName)
	for _, k := range keys {
		sl := all[k]
		if sl.Service == "" {
			continue
		}
		sk := nsName{sl.Namespace, sl.Service}
		bySvc[sk] = append(bySvc[sk], &sl)
		b.counts.EndpointSlices++
	}
	return bySvc
}

func compareNsName(a, b nsName) int {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// storedSlice is the slice the Store holds under k, as it was set.
func (s *Store) storedSlice(k nsName) EndpointSlice {
	r := s.slices[k]
	return r.slice(k)
}
