package store

import (
	"net/netip"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/pack"
)

// A Service unit built again after a change costs what its changed
// endpoints make, not all of them: the build keeps each endpoint's names
// for the next one (epMemo), and takes an endpoint's two nodes, its name's
// and its PTR's, from the unit's previous contribution when they are the
// same. A moved endpoint of a 50-endpoint Service then makes its own two
// names and the Service's aggregate ones (the Service name, the SRV
// records), not 100 names more.

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

// nodeSource is where a build takes endpoint nodes from: a previous
// contribution's names, or the published Snapshot's.
type nodeSource interface {
	Get(name string) (*Node, bool)
}

// contributed is a contribution's names as a nodeSource.
type contributed map[string]*Node

func (c contributed) Get(name string) (*Node, bool) {
	n, ok := c[name]
	return n, ok
}

// useMemo makes the builder keep endpoint names, taking them and the
// endpoint nodes from prev when it has them, else the nodes from
// published (nil: none).
//
// A unit's first build after a Publish makes what it contributed then, so
// the published node of one of its endpoint names that holds just what
// the endpoint makes (takeEndpoint) is that contribution's node, or one
// equal to it: an endpoint's host name is under its Service's name, and a
// PTR name two units make holds both targets.
func (b *builder) useMemo(prev *contribution, published *pack.Map[string, *Node]) {
	switch {
	case prev != nil:
		b.prev, b.memo = contributed(prev.names), prev.eps
	case published != nil:
		b.prev, b.published = published, published
	}
	if b.memo == nil {
		b.memo = &epMemo{}
	}
	b.memo.gen++
}

// endpointNames returns the names of endpoint address a of ep under the
// Service name base: from the memo when the builder keeps one.
func (b *builder) endpointNames(ep Endpoint, a netip.Addr, base string) served {
	if b.targets != nil {
		return served{addr: a, host: b.targetHost(ep, a, base)}
	}
	if b.memo == nil {
		return served{addr: a, host: b.concat(endpointLabel(ep, a, b.opts.EndpointPodNames), ".", base)}
	}
	k := epKey{a, ep.Hostname, ep.PodName}
	n, ok := b.memo.m[k]
	if !ok {
		n = b.newEndpointNames(ep, a, base)
		if b.memo.m == nil {
			b.memo.m = map[epKey]epNames{}
		}
	}
	n.seen = b.memo.gen
	b.memo.m[k] = n
	return served{addr: a, host: n.host, ptr: n.ptr}
}

// newEndpointNames makes the names of endpoint address a of ep under base.
// A build of what a unit published shares the published index's strings
// of the names it has, which are most: the names the memo keeps then cost
// nothing but the memo.
func (b *builder) newEndpointNames(ep Endpoint, a netip.Addr, base string) epNames {
	if b.published == nil {
		return epNames{host: b.concat(endpointLabel(ep, a, b.opts.EndpointPodNames), ".", base), ptr: b.reverseName(a)}
	}
	var buf [320]byte
	host := appendEndpointLabel(buf[:0], ep, a, b.opts.EndpointPodNames)
	host = append(append(host, '.'), base...)
	n := epNames{host: indexed(b.published, host)}
	n.ptr = indexed(b.published, appendReverseName(buf[:0], a))
	return n
}

// indexed is name as the index m holds it, or a copy of it when m does not
// have it; name is not kept.
func indexed(m *pack.Map[string, *Node], name []byte) string {
	if k, _, ok := m.Entry(pack.Borrow(name)); ok {
		return k
	}
	return string(name)
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

// addEndpointNames adds each served endpoint's name (its address) and its
// PTR (the name).
func (b *builder) addEndpointNames(eps []served) {
	for _, e := range eps {
		if b.takeEndpoint(e) {
			continue
		}
		ptr := e.ptr
		if ptr == "" {
			ptr = b.reverseName(e.addr)
		}
		b.node(e.host).AddAddr(e.addr)
		b.node(ptr).AddPTR(e.host)
	}
}

// takeEndpoint puts in the build the previous contribution's nodes of
// endpoint e when they hold just what e makes: its address, its name. It
// reports whether it did. Neither name may hold data of this build yet; a
// later endpoint that adds to one gets a copy (builder.node).
func (b *builder) takeEndpoint(e served) bool {
	if b.prev == nil || e.ptr == "" {
		return false
	}
	hn, ok := b.prev.Get(e.host)
	if !ok || !b.onlyAddr(hn, e.addr) {
		return false
	}
	pn, ok := b.prev.Get(e.ptr)
	if !ok || !b.onlyPTR(pn, e.host) {
		return false
	}
	if n, ok := b.names[e.host]; ok && n != b.ent {
		return false
	}
	if _, ok := b.names[e.ptr]; ok {
		return false
	}
	if _, ok := b.names[e.host]; !ok {
		b.ancestors(e.host)
	}
	b.names[e.host] = hn
	b.names[e.ptr] = pn
	return true
}

// onlyAddr reports whether n is a node of this build's TTL holding the
// one address a.
func (b *builder) onlyAddr(n *Node, a netip.Addr) bool {
	if n == b.ent || n.TTL != b.ttl || n.NumPTR()+n.NumTXT()+n.NumSRV() != 0 || n.HasCNAME() || n.NumA()+n.NumAAAA() != 1 {
		return false
	}
	if a.Is4() {
		return n.NumA() == 1 && n.AAt(0) == a
	}
	return n.NumAAAA() == 1 && n.AAAAAt(0) == a
}

// onlyPTR reports whether n is a node of this build's TTL holding the one
// PTR target.
func (b *builder) onlyPTR(n *Node, target string) bool {
	if n == b.ent || n.TTL != b.ttl || n.NumA()+n.NumAAAA()+n.NumTXT()+n.NumSRV() != 0 || n.HasCNAME() || n.NumPTR() != 1 {
		return false
	}
	return n.FirstPTR() == target
}
