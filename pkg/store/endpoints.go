package store

import (
	"net/netip"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// A Service's endpoint names: each served endpoint address makes a name
// under the Service's and its PTR. A build after a change takes them from
// the memo and their nodes from the last build where it can (epmemo.go).

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
		var buf [320]byte
		host := b.appendHost(buf[:0], ep, a, base)
		if b.implicit && implicitHost(pack.Borrow(host), a, base) {
			// Not kept: a string of its own, not one to pin the arena.
			return served{addr: a, host: string(host)}
		}
		return served{addr: a, host: b.nameArena().CopyBytes(host)}
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

// appendHost appends to dst the name of endpoint address a of ep under
// the Service name base.
func (b *builder) appendHost(dst []byte, ep Endpoint, a netip.Addr, base string) []byte {
	dst = append(appendEndpointLabel(dst, ep, a, b.opts.EndpointPodNames), '.')
	return append(dst, base...)
}

// newEndpointNames makes the names of endpoint address a of ep under base.
// A build of what a unit published shares the published index's strings
// of the names it has, which are most: the names the memo keeps then cost
// nothing but the memo.
func (b *builder) newEndpointNames(ep Endpoint, a netip.Addr, base string) epNames {
	var buf [320]byte
	host := b.appendHost(buf[:0], ep, a, base)
	if b.published == nil {
		return epNames{host: b.nameArena().CopyBytes(host), ptr: b.reverseName(a)}
	}
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

// addEndpointNames adds each served endpoint's name (its address) and its
// PTR (the name), under the Service name base. A name that is the endpoint's dashed address is not
// kept when the build may leave it implicit: its PTR says it exists, and
// Lookup makes its node (Snapshot.endpointName). At 150,000 endpoints
// the names cost 20 MB (issue 71).
func (b *builder) addEndpointNames(eps []served, base string) {
	for _, e := range eps {
		implicit := b.implicit && implicitHost(e.host, e.addr, base)
		if b.takeEndpoint(e, implicit) {
			continue
		}
		ptr := e.ptr
		if ptr == "" {
			ptr = b.reverseName(e.addr)
		}
		if !implicit {
			b.node(e.host).AddAddr(e.addr)
		}
		b.node(ptr).AddPTR(e.host)
	}
}

// takeEndpoint puts in the build the previous contribution's nodes of
// endpoint e when they hold just what e makes: its address, its name (its
// PTR's alone when its name is implicit). It reports whether it did.
// Neither name may hold data of this build yet; a later endpoint that
// adds to one gets a copy (builder.node).
func (b *builder) takeEndpoint(e served, implicit bool) bool {
	if b.prev == nil || e.ptr == "" {
		return false
	}
	if implicit {
		pn, ok := b.prev.Get(e.ptr)
		if !ok || !b.onlyPTR(pn, e.host) {
			return false
		}
		if _, ok := b.names[e.ptr]; ok {
			return false
		}
		b.names[e.ptr] = pn
		return true
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

// targetHost is the name of endpoint address a of ep under base, the
// string of b.targets when one of them is that name.
func (b *builder) targetHost(ep Endpoint, a netip.Addr, base string) string {
	var buf [320]byte
	host := b.appendHost(buf[:0], ep, a, base)
	lo, hi := 0, len(b.targets)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b.targets[m].Target < string(host) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(b.targets) && b.targets[lo].Target == string(host) {
		return b.targets[lo].Target
	}
	return string(host)
}
