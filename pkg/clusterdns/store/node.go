package store

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"unsafe"
)

// Node is one name of a Snapshot. A Node without data is an empty
// non-terminal: the name exists (NOERROR, no answer) but holds no records.
//
// A published Node is packed: this header, then its records in bytes of
// the same allocation, which holds no pointer. The collector marks a
// packed node and never scans it, so the index of a large cluster costs a
// collection little more than its names (see arena.go): a node of three
// slices cost a collection at 100k Services twice the time. The bytes
// hold the A addresses (4 bytes each), the AAAA addresses (16), the CNAME
// target, the PTR targets and the TXT strings (each a uvarint length and
// its bytes), then the SRV records (priority, weight and port, 2 bytes
// each, and the target as a string). A Node is read through its methods;
// the strings they return share the node's bytes, which never change.
//
// A build makes its nodes as drafts (draft), which it packs when it
// finishes.
type Node struct {
	// TTL of the node's records.
	TTL  uint32
	size uint32 // bytes of records after the header
	nA   uint32
	n6   uint32
	nPTR uint32
	nTXT uint32
	nSRV uint32
	// cname says that the strings start with a CNAME target.
	cname bool
}

// nodeHeader is the bytes a packed node takes before its records.
const nodeHeader = int(unsafe.Sizeof(Node{}))

// data is the node's record bytes.
func (n *Node) data() []byte {
	if n.size == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(n), nodeHeader)), n.size)
}

// NumA is the number of the node's IPv4 addresses.
func (n *Node) NumA() int { return int(n.nA) }

// NumAAAA is the number of the node's IPv6 addresses.
func (n *Node) NumAAAA() int { return int(n.n6) }

// AAt is the node's IPv4 address i (i < NumA), without a copy of the
// others.
func (n *Node) AAt(i int) netip.Addr {
	return netip.AddrFrom4([4]byte(n.data()[4*i:]))
}

// AAAAAt is the node's IPv6 address i (i < NumAAAA).
func (n *Node) AAAAAt(i int) netip.Addr {
	return netip.AddrFrom16([16]byte(n.data()[4*int(n.nA)+16*i:]))
}

// A is the node's IPv4 addresses, in a new slice.
func (n *Node) A() []netip.Addr { return addrList(n.NumA(), n.AAt) }

// AAAA is the node's IPv6 addresses, in a new slice.
func (n *Node) AAAA() []netip.Addr { return addrList(n.NumAAAA(), n.AAAAAt) }

// addrList is the count addresses at gives, in a new slice.
func addrList(count int, at func(int) netip.Addr) []netip.Addr {
	if count == 0 {
		return nil
	}
	out := make([]netip.Addr, count)
	for i := range out {
		out[i] = at(i)
	}
	return out
}

// CNAME is the node's CNAME target, "" when it has none.
func (n *Node) CNAME() string {
	if !n.cname {
		return ""
	}
	s, _ := n.str(n.strStart())
	return s
}

// PTR is the node's PTR targets, in a new slice.
func (n *Node) PTR() []string {
	off := n.strStart()
	if n.cname {
		_, off = n.str(off)
	}
	return n.strs(off, n.nPTR)
}

// TXT is the node's TXT strings, in a new slice.
func (n *Node) TXT() []string {
	off := n.strStart()
	for range n.skipped() {
		_, off = n.str(off)
	}
	return n.strs(off, n.nTXT)
}

// SRV is the node's SRV records, in a new slice.
func (n *Node) SRV() []SRV {
	if n.nSRV == 0 {
		return nil
	}
	return n.appendSRV(make([]SRV, 0, n.nSRV))
}

// appendSRV appends the node's SRV records to dst.
func (n *Node) appendSRV(dst []SRV) []SRV {
	off := n.strStart()
	for range n.skipped() + int(n.nTXT) {
		_, off = n.str(off)
	}
	d := n.data()
	for range n.nSRV {
		s := SRV{Priority: binary.BigEndian.Uint16(d[off:]), Weight: binary.BigEndian.Uint16(d[off+2:]),
			Port: binary.BigEndian.Uint16(d[off+4:])}
		s.Target, off = n.str(off + 6)
		dst = append(dst, s)
	}
	return dst
}

// strStart is the offset of the node's first string.
func (n *Node) strStart() int { return 4*int(n.nA) + 16*int(n.n6) }

// skipped is the strings before the TXT strings.
func (n *Node) skipped() int {
	k := int(n.nPTR)
	if n.cname {
		k++
	}
	return k
}

// str is the string at offset off of the node's bytes and the offset
// after it. The string shares the bytes.
func (n *Node) str(off int) (string, int) {
	d := n.data()
	l, k := binary.Uvarint(d[off:])
	off += k
	if l == 0 {
		return "", off
	}
	return unsafe.String(&d[off], int(l)), off + int(l)
}

// strs is the count strings from offset off, in a new slice.
func (n *Node) strs(off int, count uint32) []string {
	if count == 0 {
		return nil
	}
	out := make([]string, count)
	for i := range out {
		out[i], off = n.str(off)
	}
	return out
}

// equalNode reports whether two nodes hold the same data.
func equalNode(a, b *Node) bool { return *a == *b && bytes.Equal(a.data(), b.data()) }

// draft is a node while a build makes it.
type draft struct {
	ttl   uint32
	addrs []netip.Addr // A before AAAA
	nA    int
	cname string
	ptrs  []string
	txts  []string
	srv   []SRV
	// stable says which chunk of a rebuild the node goes to (arena.go).
	stable bool
}

// A is the draft's IPv4 addresses.
func (d *draft) A() []netip.Addr { return d.addrs[:d.nA:d.nA] }

// AAAA is the draft's IPv6 addresses.
func (d *draft) AAAA() []netip.Addr { return d.addrs[d.nA:] }

// addAddr adds a to d unless d has it.
func addAddr(d *draft, a netip.Addr) {
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

// addAddrs adds addrs (in any order, repeated or not) to d, sorting once:
// the many addresses of a large Service cost O(n log n), not the O(n²) of
// adding each with addAddr.
func addAddrs(d *draft, addrs []netip.Addr) {
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

// addPTR adds target to d unless d has it.
func addPTR(d *draft, target string) {
	if !slices.Contains(d.ptrs, target) {
		d.ptrs = append(d.ptrs, target)
	}
}

// addSRV adds srv to d's SRV records.
func addSRV(d *draft, srv SRV) { d.srv = append(d.srv, srv) }

// takeSRV adds srvs to d's SRV records.
func takeSRV(d *draft, srvs []SRV) { d.srv = append(d.srv, srvs...) }

// setCNAME makes target d's CNAME target.
func setCNAME(d *draft, target string) { d.cname = target }

// addTXT adds txt to d's TXT strings.
func addTXT(d *draft, txt ...string) { d.txts = append(d.txts, txt...) }

// sortRecords sorts d's addresses of each family and its PTR targets.
func sortRecords(d *draft) {
	slices.SortFunc(d.A(), netip.Addr.Compare)
	slices.SortFunc(d.AAAA(), netip.Addr.Compare)
	slices.Sort(d.ptrs)
}

// packedSize is the bytes the packed node of d takes.
func (d *draft) packedSize() int {
	n := nodeHeader + 4*d.nA + 16*(len(d.addrs)-d.nA)
	str := func(s string) { n += uvarintLen(len(s)) + len(s) }
	d.eachStr(str)
	for _, s := range d.srv {
		n += 6
		str(s.Target)
	}
	return n
}

// eachStr calls f with d's strings in their packed order: the CNAME
// target, the PTR targets, the TXT strings.
func (d *draft) eachStr(f func(string)) {
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

// packInto packs d into buf, of d.packedSize() bytes at least and
// aligned for a Node, and returns the node.
func (d *draft) packInto(buf []byte) *Node {
	n := (*Node)(unsafe.Pointer(&buf[0]))
	*n = Node{TTL: d.ttl, nA: uint32(d.nA), n6: uint32(len(d.addrs) - d.nA),
		nPTR: uint32(len(d.ptrs)), nTXT: uint32(len(d.txts)), nSRV: uint32(len(d.srv)), cname: d.cname != ""}
	b := buf[nodeHeader:nodeHeader]
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

// pack is d packed in an allocation of its own.
func (d *draft) pack() *Node {
	return d.packInto(make([]byte, d.packedSize()))
}

// unpack makes d, emptied, hold n's records.
func (n *Node) unpack(d *draft) {
	d.reset(n.TTL)
	n.addTo(d)
}

// addTo adds n's records to d: its addresses after d's (A, then AAAA:
// in order for an empty d, and mergeNodes sorts them), its PTR targets,
// TXT strings and SRV records after d's, its CNAME when d has none.
func (n *Node) addTo(d *draft) {
	for i := range n.NumA() {
		d.addrs = append(d.addrs, n.AAt(i))
	}
	for i := range n.NumAAAA() {
		d.addrs = append(d.addrs, n.AAAAAt(i))
	}
	d.nA += n.NumA()
	off := n.strStart()
	var s string
	if n.cname {
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
	d.srv = n.appendSRV(d.srv)
}

// reset empties d for a node of ttl; it keeps its lists' room and drops
// the strings they held.
func (d *draft) reset(ttl uint32) {
	clear(d.ptrs)
	clear(d.txts)
	clear(d.srv)
	*d = draft{ttl: ttl, addrs: d.addrs[:0], ptrs: d.ptrs[:0], txts: d.txts[:0], srv: d.srv[:0]}
}

// emptyNode is a packed node of ttl without records.
func emptyNode(ttl uint32) *Node {
	d := draft{ttl: ttl}
	return d.pack()
}

// mergeNodes is one node with the records of all of nodes (two or more of
// the same TTL): addresses and PTR targets deduplicated and sorted, SRV
// records and TXT strings in order, the first CNAME. It sorts once, so a
// name that many units share (an address behind many Services) costs
// O(k log k), not O(k²).
func mergeNodes(nodes []*Node) *Node {
	m := &draft{ttl: nodes[0].TTL}
	for _, n := range nodes {
		n.addTo(m)
	}
	addAddrs(m, nil) // sorts the families apart and counts the A records again
	slices.Sort(m.ptrs)
	m.ptrs = slices.Compact(m.ptrs)
	return m.pack()
}

// draftPool keeps the drafts of finished builds for the next ones, and
// the map of a build's drafts.
type draftPool struct {
	free []*draft
	m    map[string]*draft
}

// names is an empty map for a build's drafts.
func (p *draftPool) names() map[string]*draft {
	m := p.m
	p.m = nil
	if m == nil {
		m = make(map[string]*draft, 8)
	}
	return m
}

// putNames gives m back, emptied; the pool keeps one of at most poolKeep
// drafts.
func (p *draftPool) putNames(m map[string]*draft) {
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

// get is an empty draft of ttl.
func (p *draftPool) get(ttl uint32) *draft {
	if k := len(p.free); k > 0 {
		d := p.free[k-1]
		p.free = p.free[:k-1]
		d.ttl = ttl
		return d
	}
	return &draft{ttl: ttl}
}

// put gives d back, emptied.
func (p *draftPool) put(d *draft) {
	d.reset(0)
	if len(p.free) == poolKeep || cap(d.addrs) > draftKeep || cap(d.ptrs) > draftKeep || cap(d.txts) > draftKeep || cap(d.srv) > draftKeep {
		return
	}
	p.free = append(p.free, d)
}
