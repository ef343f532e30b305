package store

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// A Service whose only change since the last Publish is in the endpoints
// of its slices is applied as a delta of its endpoints: the endpoints that
// went take out their two names (the endpoint's and its PTR), the ones that
// came put in theirs, and a headless Service's own name and SRV names are
// made again from the served addresses. Neither what the Service
// contributed before nor all it contributes now is built, so a moved
// endpoint costs its own names and one pass over the Service's endpoints,
// with no lookup of the unchanged ones in the index.
//
// The delta is taken only where it is exact: the Service record, its
// slices' names and ports, and which slices serve an endpoint are the same;
// it serves an endpoint before and after; every served address and every
// endpoint label is its own, and no ClusterIP is the address of an
// endpoint that changed (each endpoint name holds one address, each PTR
// of the Service one target); and no label or PTR name makes an empty
// non-terminal. Anything else is built as before, from the records the
// Service had at its first change (unitRecords).

// sameService reports whether a and b are the same record.
func sameService(a, b *Service) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.Type == b.Type &&
		slices.Equal(a.ClusterIPs, b.ClusterIPs) && a.ExternalName == b.ExternalName &&
		slices.Equal(a.Ports, b.Ports) && a.PublishNotReadyAddresses == b.PublishNotReadyAddresses &&
		a.TrafficDistribution == b.TrafficDistribution && slices.Equal(a.ExternalIPs, b.ExternalIPs)
}

// sameShape reports whether two lists of a Service's slices have the same
// names and ports, and the same slices serving an endpoint: then the
// Service's SRV names are the same.
func sameShape(svc *Service, was, is []*EndpointSlice) bool {
	serves := func(sl *EndpointSlice) bool {
		for range servedAddrs(svc, []*EndpointSlice{sl}) {
			return true
		}
		return false
	}
	return slices.EqualFunc(was, is, func(a, b *EndpointSlice) bool {
		return a.Name == b.Name && slices.Equal(a.Ports, b.Ports) && serves(a) == serves(b)
	})
}

// applyDelta applies the change of Service unit u, whose records were
// old, as a delta of its endpoints when it is one (see above), and
// reports whether it did. It changes nothing when it does not. s.mu is
// held.
func (s *Store) applyDelta(t nameTable, u unitKey, old *unitRecords, d *delta) bool {
	st := s.state
	svc, ok := s.service(u.nsName)
	// A Service with variants is built again: a change of its endpoints
	// may make or drop variant names, which the delta does not follow.
	if zones, _ := variantKinds(svc.TrafficDistribution); zones && svc.Type == Headless {
		return false
	}
	if !ok || !old.had || s.opts.NoEndpoints || (svc.Type != ClusterIP && svc.Type != Headless) ||
		!sameService(&svc, &old.svc) || !namespaceExposed(s.exposed, strings.ToLower(svc.Namespace)) {
		return false
	}
	sls := s.serviceSlices(u.nsName)
	if !sameShape(&svc, old.slices, sls) {
		return false
	}
	sc := &s.deltaScratch
	defer sc.trim(scratchKeep)
	was, is := &sc.sets[0], &sc.sets[1]
	// With the same slices serving, is has endpoints when was has.
	podNames := s.opts.EndpointPodNames
	if sc.labels, ok = was.fill(sc.labels, &svc, old.slices, podNames); !ok || len(was.eps) == 0 {
		return false
	}
	if sc.labels, ok = is.fill(sc.labels, &svc, sls, podNames); !ok {
		return false
	}
	gone, came := diffServed(was, is)
	base := strings.ToLower(svc.Name) + "." + strings.ToLower(svc.Namespace) + ".svc." + s.zone
	ptrs := make([]string, 0, len(gone)+len(came))
	for _, e := range slices.Concat(gone, came) {
		// A ClusterIP's PTR is a second target on the endpoint's.
		if slices.ContainsFunc(svc.ClusterIPs, func(ip netip.Addr) bool { return ip.Unmap() == e.addr }) {
			return false
		}
		ptr := ReverseName(e.addr)
		if strings.HasSuffix(ptr, "."+s.zone) {
			return false
		}
		ptrs = append(ptrs, ptr)
	}
	var own map[string]*Node
	if svc.Type == Headless {
		if own = s.headlessNames(&svc, sls, base, t, !is.repeats && portsDistinct(sls)); own == nil {
			return false
		}
	}

	// From here on the delta is applied.
	for i, e := range gone {
		host := was.host(e, base)
		if !implicitHost(host, e.addr, base) {
			st.removeName(t, host, pack.AddrNode(s.opts.TTL, e.addr), d)
		}
		st.removeName(t, ptrs[i], pack.PTRNode(s.opts.TTL, host), d)
	}
	for i, e := range came {
		host := is.host(e, base)
		if !implicitHost(host, e.addr, base) {
			st.addName(t, host, pack.AddrNode(s.opts.TTL, e.addr), d)
		}
		st.addName(t, ptrs[len(gone)+i], pack.PTRNode(s.opts.TTL, host), d)
	}
	for name, n := range own {
		t.Set(name, n)
	}
	st.counts.Endpoints += len(is.eps) - len(was.eps)
	s.deltas++
	return true
}

// headlessNames makes the data names a headless Service contributes
// besides its endpoints' (its name and its SRV names) from its records as
// they are, and returns those that changed, or nil when one is not in t
// as the Service's alone. The endpoint names are taken from the SRV
// targets the Service name has in t (targetHost), so the unchanged ones
// cost neither a lookup nor a copy. distinct is builder.distinct.
func (s *Store) headlessNames(svc *Service, sls []*EndpointSlice, base string, t nameTable, distinct bool) map[string]*Node {
	st := s.state
	prev, ok := t.Get(base)
	if !ok || prev == st.ent {
		return nil
	}
	b := s.startBuild(8)
	defer s.endBuild(b)
	b.ownOnly, b.distinct = true, distinct
	b.targets = prev.AppendSRV(b.scratch.targets[:0])
	b.scratch.targets = b.targets
	b.addService(svc, sls)
	b.finish()
	changed := map[string]*Node{}
	for name, n := range b.names {
		if n == st.ent {
			continue
		}
		if _, shared := st.shared[name]; shared {
			return nil
		}
		p, ok := t.Get(name)
		if !ok || p == st.ent {
			return nil
		}
		if !pack.Equal(p, n) {
			changed[name] = n
		}
	}
	return changed
}

// portsDistinct reports whether each slice of sls lists each port (name,
// protocol, number) once.
func portsDistinct(sls []*EndpointSlice) bool {
	for _, sl := range sls {
		for i, p := range sl.Ports {
			for _, q := range sl.Ports[:i] {
				if p.Port == q.Port && p.Protocol == q.Protocol && strings.EqualFold(p.Name, q.Name) {
					return false
				}
			}
		}
	}
	return true
}
