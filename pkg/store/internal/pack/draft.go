package pack

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/dnsconfigurer/dnsconfigurer/internal/unsafeptr"
)

// Draft is a node while a build makes it.
type Draft struct {
	// TTL of the node's records.
	TTL uint32
	// Stable says which chunk of a rebuild the node goes to (Nodes).
	Stable bool

	addrs []netip.Addr // A before AAAA
	nA    int
	cname string
	ptrs  []string
	txts  []string
	srv   []SRV
}

// A is the draft's IPv4 addresses.
func (d *Draft) A() []netip.Addr { return d.addrs[:d.nA:d.nA] }

// AAAA is the draft's IPv6 addresses.
func (d *Draft) AAAA() []netip.Addr { return d.addrs[d.nA:] }

// AddAddr adds a to d unless d has it.
func (d *Draft) AddAddr(a netip.Addr) {
	a = a.Unmap()
	if a.Is4() {
		if !slices.Contains(d.A(), a) {
			d.addrs = slices.Insert(d.addrs, d.nA, a)
			d.nA++
		}
		return
	}
	if !slices.Contains(d.AAAA(), a) {
		d.addrs = append(d.addrs, a)
	}
}

// AddAddrs adds addrs (in any order, repeated or not) to d, sorting once:
// the many addresses of a large Service cost O(n log n), not the O(n²) of
// adding each with AddAddr.
func (d *Draft) AddAddrs(addrs []netip.Addr) {
	all := d.addrs
	for _, a := range addrs {
		all = append(all, a.Unmap())
	}
	slices.SortFunc(all, netip.Addr.Compare) // IPv4 before IPv6
	all = slices.Compact(all)
	v6 := slices.IndexFunc(all, func(a netip.Addr) bool { return !a.Is4() })
	if v6 < 0 {
		v6 = len(all)
	}
	d.addrs, d.nA = all, v6
}

// AddPTR adds target to d unless d has it.
func (d *Draft) AddPTR(target string) {
	if !slices.Contains(d.ptrs, target) {
		d.ptrs = append(d.ptrs, target)
	}
}

// AddSRV adds srv to d's SRV records.
func (d *Draft) AddSRV(srv SRV) { d.srv = append(d.srv, srv) }

// TakeSRV adds srvs to d's SRV records.
func (d *Draft) TakeSRV(srvs []SRV) { d.srv = append(d.srv, srvs...) }

// SetCNAME makes target d's CNAME target.
func (d *Draft) SetCNAME(target string) { d.cname = target }

// AddTXT adds txt to d's TXT strings.
func (d *Draft) AddTXT(txt ...string) { d.txts = append(d.txts, txt...) }

// Sort sorts d's addresses of each family and its PTR targets.
func (d *Draft) Sort() {
	slices.SortFunc(d.A(), netip.Addr.Compare)
	slices.SortFunc(d.AAAA(), netip.Addr.Compare)
	slices.Sort(d.ptrs)
}

// words is the words the packed node of d takes.
func (d *Draft) words() int {
	n := header + 4*d.nA + 16*(len(d.addrs)-d.nA)
	str := func(s string) { n += uvarintLen(len(s)) + len(s) }
	d.eachStr(str)
	for _, s := range d.srv {
		n += 6
		str(s.Target)
	}
	return (n + 3) / 4
}

// eachStr calls f with d's strings in their packed order: the CNAME
// target, the PTR targets, the TXT strings.
func (d *Draft) eachStr(f func(string)) {
	if d.cname != "" {
		f(d.cname)
	}
	for _, s := range d.ptrs {
		f(s)
	}
	for _, s := range d.txts {
		f(s)
	}
}

func uvarintLen(x int) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// packInto packs d into w, of d.words() words, and returns the node.
func (d *Draft) packInto(w []uint32) *Node {
	n := nodeAt(w)
	*n = Node{TTL: d.TTL, nA: uint32(d.nA), n6: uint32(len(d.addrs) - d.nA),
		nPTR: uint32(len(d.ptrs)), nTXT: uint32(len(d.txts)), nSRV: uint32(len(d.srv))}
	if d.cname != "" {
		n.flags = flagCNAME
	}
	b := unsafeptr.Words(w)[header:header]
	for _, a := range d.A() {
		x := a.As4()
		b = append(b, x[:]...)
	}
	for _, a := range d.AAAA() {
		x := a.As16()
		b = append(b, x[:]...)
	}
	str := func(s string) { b = append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	d.eachStr(str)
	for _, s := range d.srv {
		b = binary.BigEndian.AppendUint16(b, s.Priority)
		b = binary.BigEndian.AppendUint16(b, s.Weight)
		b = binary.BigEndian.AppendUint16(b, s.Port)
		str(s.Target)
	}
	n.size = uint32(len(b))
	return n
}

// Pack is d packed in an allocation of its own.
func (d *Draft) Pack() *Node {
	return d.packInto(make([]uint32, d.words()))
}

// Unpack makes d, emptied, hold n's records.
func (n *Node) Unpack(d *Draft) {
	d.Reset(n.TTL)
	n.AddTo(d)
}

// AddTo adds n's records to d: its addresses after d's (A, then AAAA:
// in order for an empty d, and Merge sorts them), its PTR targets,
// TXT strings and SRV records after d's, its CNAME when d has none.
func (n *Node) AddTo(d *Draft) {
	for i := range n.NumA() {
		d.addrs = append(d.addrs, n.AAt(i))
	}
	for i := range n.NumAAAA() {
		d.addrs = append(d.addrs, n.AAAAAt(i))
	}
	d.nA += n.NumA()
	off := n.strStart()
	var s string
	if n.HasCNAME() {
		if s, off = n.str(off); d.cname == "" {
			d.cname = s
		}
	}
	for range n.nPTR {
		s, off = n.str(off)
		d.ptrs = append(d.ptrs, s)
	}
	for range n.nTXT {
		s, off = n.str(off)
		d.txts = append(d.txts, s)
	}
	d.srv = n.AppendSRV(d.srv)
}

// Reset empties d for a node of ttl; it keeps its lists' room and drops
// the strings they held.
func (d *Draft) Reset(ttl uint32) {
	clear(d.ptrs)
	clear(d.txts)
	clear(d.srv)
	*d = Draft{TTL: ttl, addrs: d.addrs[:0], ptrs: d.ptrs[:0], txts: d.txts[:0], srv: d.srv[:0]}
}

// Empty is a packed node of ttl without records.
func Empty(ttl uint32) *Node {
	d := Draft{TTL: ttl}
	return d.Pack()
}

// Merge is one node with the records of all of nodes (two or more of
// the same TTL): addresses and PTR targets deduplicated and sorted, SRV
// records and TXT strings in order, the first CNAME. It sorts once, so a
// name that many units share (an address behind many Services) costs
// O(k log k), not O(k²).
func Merge(nodes []*Node) *Node {
	m := &Draft{TTL: nodes[0].TTL}
	for _, n := range nodes {
		n.AddTo(m)
	}
	m.AddAddrs(nil) // sorts the families apart and counts the A records again
	slices.Sort(m.ptrs)
	m.ptrs = slices.Compact(m.ptrs)
	return m.Pack()
}

// DraftPool keeps the drafts of finished builds for the next ones, and
// the map of a build's drafts.
type DraftPool struct {
	free []*Draft
	m    map[string]*Draft
}

// Names is an empty map for a build's drafts.
func (p *DraftPool) Names() map[string]*Draft {
	m := p.m
	p.m = nil
	if m == nil {
		m = make(map[string]*Draft, 8)
	}
	return m
}

// PutNames gives m back, emptied; the pool keeps one of at most poolKeep
// drafts.
func (p *DraftPool) PutNames(m map[string]*Draft) {
	if len(m) <= poolKeep {
		clear(m)
		p.m = m
	}
}

// draftKeep is the longest list a pooled draft keeps, and poolKeep the
// drafts a pool keeps.
const (
	draftKeep = 256
	poolKeep  = 1024
)

// Get is an empty draft of ttl.
func (p *DraftPool) Get(ttl uint32) *Draft {
	if k := len(p.free); k > 0 {
		d := p.free[k-1]
		p.free = p.free[:k-1]
		d.TTL = ttl
		return d
	}
	return &Draft{TTL: ttl}
}

// Put gives d back, emptied.
func (p *DraftPool) Put(d *Draft) {
	d.Reset(0)
	if len(p.free) == poolKeep || cap(d.addrs) > draftKeep || cap(d.ptrs) > draftKeep || cap(d.txts) > draftKeep || cap(d.srv) > draftKeep {
		return
	}
	p.free = append(p.free, d)
}

// AddrNode is a packed node of ttl with the one address a: an
// endpoint's name.
func AddrNode(ttl uint32, a netip.Addr) *Node {
	a = a.Unmap()
	d := Draft{TTL: ttl, addrs: []netip.Addr{a}}
	if a.Is4() {
		d.nA = 1
	}
	return d.Pack()
}

// PTRNode is a packed node of ttl with the one PTR target: an
// endpoint's PTR name.
func PTRNode(ttl uint32, target string) *Node {
	d := Draft{TTL: ttl, ptrs: []string{target}}
	return d.Pack()
}
