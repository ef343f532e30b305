package store

import "net/netip"

// A Service unit built again after a change costs what its changed
// endpoints make, not all of them: the build keeps each endpoint's names
// for the next one (epMemo), and takes an endpoint's two nodes, its name's
// and its PTR's, from the unit's previous contribution when they are the
// same (endpoints.go). A moved endpoint of a 50-endpoint Service then
// makes its own two names and the Service's aggregate ones (the Service
// name, the SRV records), not 100 names more.

// epKey is an endpoint address of a Service as its records give it. With
// the Service and the options, which do not change while a memo lives
// (SetOptions rebuilds everything), it decides the endpoint's names.
type epKey struct {
	addr              netip.Addr
	hostname, podName string
}

// epNames are the names one endpoint address makes.
type epNames struct {
	host, ptr string
	seen      uint32 // the build that last used them
}

// epMemo keeps a Service unit's endpoint names from one build to the next.
// It passes from a unit's contribution to the next one; the earlier one is
// dropped by then.
type epMemo struct {
	m   map[epKey]epNames
	gen uint32 // the current build
}

// prune forgets the names of endpoints the last build did not see, once
// they are many.
func (m *epMemo) prune() {
	if m == nil {
		return
	}
	stale := 0
	for _, n := range m.m {
		if n.seen != m.gen {
			stale++
		}
	}
	if stale <= 16+len(m.m)/4 {
		return
	}
	for k, n := range m.m {
		if n.seen != m.gen {
			delete(m.m, k)
		}
	}
}
