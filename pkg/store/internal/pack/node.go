package pack

import (
	"bytes"
	"encoding/binary"
	"net/netip"

	"github.com/dnsconfigurer/dnsconfigurer/internal/unsafeptr"
)

// SRV is one SRV record of a node.
type SRV struct {
	Priority uint16
	Weight   uint16
	Port     uint16
	// Target is a lowercase fully qualified name inside the zone.
	Target string
}

// Node is one name of a Snapshot. A Node without data is an empty
// non-terminal: the name exists (NOERROR, no answer) but holds no records.
//
// A packed Node is this header, then its records in bytes of the same
// allocation, which holds no pointer. The collector marks a packed node
// and never scans it: a node of three slices cost a collection at 100k
// Services twice the time. The bytes hold the A addresses (4 bytes
// each), the AAAA addresses (16), the CNAME target, the PTR targets and
// the TXT strings (each a uvarint length and its bytes), then the SRV
// records (priority, weight and port, 2 bytes each, and the target as a
// string). A Node is read through its methods; the strings they return
// share the node's bytes, which never change.
//
// The allocation is a []uint32, and the header is eight uint32 fields:
// its first eight words read as a Node (nodeAt).
type Node struct {
	// TTL of the node's records.
	TTL   uint32
	size  uint32 // bytes of records after the header
	nA    uint32
	n6    uint32
	nPTR  uint32
	nTXT  uint32
	nSRV  uint32
	flags uint32 // flagCNAME
}

// flagCNAME says that the strings start with a CNAME target.
const flagCNAME = 1

// headerWords is the words a packed node takes before its records, and
// header its bytes.
const (
	headerWords = 8
	header      = 4 * headerWords
)

// nodeAt is the node whose header is w's first words: Node and
// [headerWords]uint32 share one layout (unsafeptr.View panics if their
// sizes differ, and TestHeader checks it).
func nodeAt(w []uint32) *Node {
	return unsafeptr.View[Node]((*[headerWords]uint32)(w))
}

// data is the node's record bytes: they follow the header in the same
// allocation.
func (n *Node) data() []byte { return unsafeptr.Tail(n, int(n.size)) }

// NumA is the number of the node's IPv4 addresses.
func (n *Node) NumA() int { return int(n.nA) }

// NumAAAA is the number of the node's IPv6 addresses.
func (n *Node) NumAAAA() int { return int(n.n6) }

// NumPTR is the number of the node's PTR targets.
func (n *Node) NumPTR() int { return int(n.nPTR) }

// NumTXT is the number of the node's TXT strings.
func (n *Node) NumTXT() int { return int(n.nTXT) }

// NumSRV is the number of the node's SRV records.
func (n *Node) NumSRV() int { return int(n.nSRV) }

// HasCNAME reports whether the node holds a CNAME target.
func (n *Node) HasCNAME() bool { return n.flags&flagCNAME != 0 }

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
	if !n.HasCNAME() {
		return ""
	}
	s, _ := n.str(n.strStart())
	return s
}

// PTR is the node's PTR targets, in a new slice.
func (n *Node) PTR() []string {
	off := n.strStart()
	if n.HasCNAME() {
		_, off = n.str(off)
	}
	return n.strs(off, n.nPTR)
}

// FirstPTR is the node's first PTR target, "" when it has none.
func (n *Node) FirstPTR() string {
	if n.nPTR == 0 {
		return ""
	}
	off := n.strStart()
	if n.HasCNAME() {
		_, off = n.str(off)
	}
	s, _ := n.str(off)
	return s
}

// HasPTR reports whether target is one of the node's PTR targets.
func (n *Node) HasPTR(target string) bool {
	off := n.strStart()
	if n.HasCNAME() {
		_, off = n.str(off)
	}
	for range n.nPTR {
		var t string
		t, off = n.str(off)
		if t == target {
			return true
		}
	}
	return false
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
	return n.AppendSRV(make([]SRV, 0, n.nSRV))
}

// AppendSRV appends the node's SRV records to dst.
func (n *Node) AppendSRV(dst []SRV) []SRV {
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
	if n.HasCNAME() {
		k++
	}
	return k
}

// str is the string at offset off of the node's bytes and the offset
// after it. The string shares the bytes, which never change.
func (n *Node) str(off int) (string, int) {
	d := n.data()
	l, k := binary.Uvarint(d[off:])
	off += k
	if l == 0 {
		return "", off
	}
	return unsafeptr.String(d[off : off+int(l)]), off + int(l)
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

// Equal reports whether two nodes hold the same data.
func Equal(a, b *Node) bool { return *a == *b && bytes.Equal(a.data(), b.data()) }
