package store

import (
	"net/netip"
	"slices"
)

// Node is one name of a Snapshot. A Node without data is an empty
// non-terminal: the name exists (NOERROR, no answer) but holds no records.
//
// Most names hold one kind of record. So a Node keeps three slices, not one
// a type: the addresses (A before AAAA), the strings (the CNAME target,
// then PTR targets, then TXT strings) and the SRV records. A Node is read
// through its methods.
type Node struct {
	addrs []netip.Addr
	strs  []string
	srv   []SRV
	// TTL of the node's records.
	TTL   uint32
	nA    uint32 // addrs[:nA] are A records
	nPTR  uint32 // strs[c:c+nPTR] are PTR targets, c = 1 with a CNAME
	cname bool   // strs[0] is the CNAME target
}

// A is the node's IPv4 addresses.
func (n *Node) A() []netip.Addr { return n.addrs[:n.nA:n.nA] }

// AAAA is the node's IPv6 addresses.
func (n *Node) AAAA() []netip.Addr { return n.addrs[n.nA:] }

// SRV is the node's SRV records.
func (n *Node) SRV() []SRV { return n.srv }

// CNAME is the node's CNAME target, "" when it has none.
func (n *Node) CNAME() string {
	if n.cname {
		return n.strs[0]
	}
	return ""
}

// PTR is the node's PTR targets.
func (n *Node) PTR() []string {
	c := n.ptrStart()
	return n.strs[c : c+n.nPTR : c+n.nPTR]
}

// TXT is the node's TXT strings.
func (n *Node) TXT() []string { return n.strs[n.ptrStart()+n.nPTR:] }

func (n *Node) ptrStart() uint32 {
	if n.cname {
		return 1
	}
	return 0
}

// room is what a new node is allocated with room for, in the same object:
// most nodes hold one record, and the collector's work grows with the
// number of objects.
type room uint8

const (
	roomNone room = iota
	roomAddr
	roomPTR
	roomSRV
)

// newNode is an empty node of ttl with room r.
func newNode(ttl uint32, r room) *Node {
	switch r {
	case roomAddr:
		return withRoom(ttl, func(n *Node) *[]netip.Addr { return &n.addrs })
	case roomPTR:
		return withRoom(ttl, func(n *Node) *[]string { return &n.strs })
	case roomSRV:
		return withRoom(ttl, func(n *Node) *[]SRV { return &n.srv })
	}
	return &Node{TTL: ttl}
}

// roomy is a node with room for one record of T behind it.
type roomy[T any] struct {
	n Node
	r [1]T
}

// withRoom is a node of ttl allocated with one record of room behind it,
// as the capacity of the slice that field gives.
func withRoom[T any](ttl uint32, field func(*Node) *[]T) *Node {
	x := &roomy[T]{n: Node{TTL: ttl}}
	*field(&x.n) = x.r[:0:1]
	return &x.n
}

// addAddr adds a to n unless n has it.
func addAddr(n *Node, a netip.Addr) {
	a = a.Unmap()
	if a.Is4() {
		if !slices.Contains(n.A(), a) {
			n.addrs = slices.Insert(n.addrs, int(n.nA), a)
			n.nA++
		}
		return
	}
	if !slices.Contains(n.AAAA(), a) {
		n.addrs = append(n.addrs, a)
	}
}

// addAddrs adds addrs (in any order, repeated or not) to n, sorting
// once: the many addresses of a large Service cost O(n log n), not the
// O(n²) of adding each with addAddr.
func addAddrs(n *Node, addrs []netip.Addr) {
	all := make([]netip.Addr, 0, len(n.addrs)+len(addrs))
	all = append(all, n.addrs...)
	for _, a := range addrs {
		all = append(all, a.Unmap())
	}
	slices.SortFunc(all, netip.Addr.Compare) // IPv4 before IPv6
	all = slices.Compact(all)
	v6 := slices.IndexFunc(all, func(a netip.Addr) bool { return !a.Is4() })
	if v6 < 0 {
		v6 = len(all)
	}
	n.addrs, n.nA = all, uint32(v6)
}

// addPTR adds target to n unless n has it.
func addPTR(n *Node, target string) {
	if !slices.Contains(n.PTR(), target) {
		n.strs = slices.Insert(n.strs, int(n.ptrStart()+n.nPTR), target)
		n.nPTR++
	}
}

// addSRV adds srv to n's SRV records.
func addSRV(n *Node, srv SRV) { n.srv = append(n.srv, srv) }

// takeSRV adds srvs to n's SRV records. A node without any takes the slice
// itself.
func takeSRV(n *Node, srvs []SRV) {
	if n.srv == nil {
		n.srv = slices.Clip(srvs)
		return
	}
	n.srv = append(n.srv, srvs...)
}

// setCNAME makes target n's CNAME target.
func setCNAME(n *Node, target string) {
	if n.cname {
		n.strs[0] = target
		return
	}
	n.strs = slices.Insert(n.strs, 0, target)
	n.cname = true
}

// addTXT adds txt to n's TXT strings.
func addTXT(n *Node, txt ...string) { n.strs = append(n.strs, txt...) }

// sortRecords sorts n's addresses of each family and its PTR targets.
func sortRecords(n *Node) {
	slices.SortFunc(n.addrs[:n.nA], netip.Addr.Compare)
	slices.SortFunc(n.addrs[n.nA:], netip.Addr.Compare)
	slices.Sort(n.PTR())
}

// mergeNodes is one node with the records of all of nodes (two or more of
// the same TTL): addresses and PTR targets deduplicated and sorted, SRV
// records and TXT strings in order, the first CNAME. It sorts once, so a
// name that many units share (an address behind many Services) costs
// O(k log k), not O(k²).
func mergeNodes(nodes []*Node) *Node {
	m := &Node{TTL: nodes[0].TTL}
	var addrs []netip.Addr
	var ptrs, txt []string
	cname := ""
	for _, n := range nodes {
		addrs = append(addrs, n.addrs...)
		ptrs = append(ptrs, n.PTR()...)
		txt = append(txt, n.TXT()...)
		m.srv = append(m.srv, n.srv...)
		if cname == "" {
			cname = n.CNAME()
		}
	}
	addAddrs(m, addrs)
	slices.Sort(ptrs)
	ptrs = slices.Compact(ptrs)
	m.nPTR = uint32(len(ptrs))
	if cname != "" {
		m.strs = append(m.strs, cname)
		m.cname = true
	}
	m.strs = append(append(m.strs, ptrs...), txt...)
	return m
}

// cloneNode is a copy of n that shares no slice with it.
func cloneNode(n *Node) *Node {
	m := *n
	m.addrs, m.strs, m.srv = slices.Clone(n.addrs), slices.Clone(n.strs), slices.Clone(n.srv)
	return &m
}

// equalNode reports whether two nodes hold the same data.
func equalNode(a, b *Node) bool {
	return a.TTL == b.TTL && a.nA == b.nA && a.nPTR == b.nPTR && a.cname == b.cname &&
		slices.Equal(a.addrs, b.addrs) && slices.Equal(a.strs, b.strs) && slices.Equal(a.srv, b.srv)
}
