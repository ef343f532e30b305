package clusterdns

import (
	"bytes"
	"encoding/binary"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// missWire answers from the wire a UDP query for a name of the cluster
// zone that ServeDNS would answer from the snapshot with one of two simple
// replies, written byte for byte as miekg/dns packs them, without
// unpacking the query or making a dns.Msg:
//   - NXDOMAIN with the zone's SOA, for a name the snapshot does not hold
//     (Resolve's answer);
//   - the one address of an A or AAAA query, for a name whose node holds
//     exactly one of that type and no alias (a ClusterIP Service's name):
//     one record, so there is nothing to rotate or cut.
//
// The namespace metrics count it as ServeDNS does. It returns false for
// every other answer, and for an insecure pod name. decide has routed q
// to the zone (routeZone); its name is in the zone (lname, lowercase).
// Its reply is not cached (it costs less than a cache entry).
func (h *Handler) missWire(dst []byte, z *zone, q *dnsmsg.WireQuery, lname string) ([]byte, bool) {
	if z.snap.Options.Pods == store.PodsInsecure && inZone(lname, "pod."+z.name) {
		return dst, false
	}
	var b []byte
	rcode := dns.RcodeNameError
	if n, ok := z.snap.Lookup(lname); ok {
		addr, ok := soleAddr(n, q.Qtype)
		if !ok {
			return dst, false
		}
		rcode = dns.RcodeSuccess
		b = appendAddr(dst, q, h.fwd != nil, n.TTL, addr)
	} else {
		soa, ok := z.soa[0].(*dns.SOA)
		if !ok {
			return dst, false
		}
		b = appendNXDOMAIN(dst, q, h.fwd != nil, soa)
	}
	if len(b) > q.ReplySize() {
		return dst, false // a long name: truncation is ServeDNS's
	}
	if h.amp != nil {
		// Record keeps no part of the name, so the name can borrow the
		// reply's spare room (a local array would escape through the
		// interface call).
		nb := dnsmsg.AppendName(b[len(b):len(b):cap(b)], q.Name, false)
		h.amp.Record(borrowString(nb), z.snap, rcode, false, nil)
	}
	return b, true
}

// soleAddr is the address an A or AAAA query for n is answered with, when
// n holds exactly one of that type and no CNAME.
func soleAddr(n *store.Node, qtype uint16) (netip.Addr, bool) {
	if n.CNAME() != "" {
		return netip.Addr{}, false
	}
	switch {
	case qtype == dns.TypeA && n.NumA() == 1:
		return n.AAt(0), true
	case qtype == dns.TypeAAAA && n.NumAAAA() == 1:
		return n.AAAAAt(0), true
	}
	return netip.Addr{}, false
}

// appendNXDOMAIN appends to dst[:0] the NXDOMAIN reply to q with soa in
// the authority section and, when q has EDNS0, dnsmsg.Finish's OPT: the
// bytes miekg/dns packs for that reply (SetReply, AA, RA when ra).
func appendNXDOMAIN(dst []byte, q *dnsmsg.WireQuery, ra bool, soa *dns.SOA) []byte {
	b, names := appendHeader(dst, q, ra, dns.RcodeNameError, 0, 1)
	var buf [256]byte
	b = names.append(b, wireName(buf[:0], soa.Hdr.Name))
	b = binary.BigEndian.AppendUint16(b, dns.TypeSOA)
	b = binary.BigEndian.AppendUint16(b, soa.Hdr.Class)
	b = binary.BigEndian.AppendUint32(b, soa.Hdr.Ttl)
	rdlen := len(b)
	b = append(b, 0, 0)
	b = names.append(b, wireName(buf[:0], soa.Ns))
	b = names.append(b, wireName(buf[:0], soa.Mbox))
	for _, v := range [...]uint32{soa.Serial, soa.Refresh, soa.Retry, soa.Expire, soa.Minttl} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	binary.BigEndian.PutUint16(b[rdlen:], uint16(len(b)-rdlen-2))
	return appendOPT(b, q)
}

// appendAddr appends to dst[:0] the reply to q answered with one address
// record of a, its owner the question's name: as appendNXDOMAIN, the bytes
// miekg/dns packs for it.
func appendAddr(dst []byte, q *dnsmsg.WireQuery, ra bool, ttl uint32, a netip.Addr) []byte {
	b, _ := appendHeader(dst, q, ra, dns.RcodeSuccess, 1, 0)
	b = append(b, 0xc0, 12) // the question's name, right after the header
	b = binary.BigEndian.AppendUint16(b, q.Qtype)
	b = binary.BigEndian.AppendUint16(b, dns.ClassINET)
	b = binary.BigEndian.AppendUint32(b, ttl)
	if a.Is4() {
		v := a.As4()
		b = binary.BigEndian.AppendUint16(b, 4)
		b = append(b, v[:]...)
	} else {
		v := a.As16()
		b = binary.BigEndian.AppendUint16(b, 16)
		b = append(b, v[:]...)
	}
	return appendOPT(b, q)
}

// appendHeader appends to dst[:0] the header of an authoritative reply to
// q with rcode and an answer and ns records (and q's OPT, when it has one,
// counted), then q's question; names holds the question's name, for
// compression.
func appendHeader(dst []byte, q *dnsmsg.WireQuery, ra bool, rcode int, an, ns uint16) ([]byte, nameTable) {
	flags := 0x8000 | 0x0400 | uint16(rcode) // QR, AA
	if q.RD {
		flags |= 0x0100
	}
	if ra {
		flags |= 0x0080
	}
	if q.CD {
		flags |= 0x0010
	}
	var ar uint16
	if q.EDNS {
		ar = 1
	}
	b := binary.BigEndian.AppendUint16(dst[:0], q.ID)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint16(b, an)
	b = binary.BigEndian.AppendUint16(b, ns)
	b = binary.BigEndian.AppendUint16(b, ar)
	var names nameTable
	b = names.append(b, q.Name)
	b = binary.BigEndian.AppendUint16(b, q.Qtype)
	b = binary.BigEndian.AppendUint16(b, q.Qclass)
	return b, names
}

// appendOPT appends dnsmsg.Finish's OPT when q has EDNS0.
func appendOPT(b []byte, q *dnsmsg.WireQuery) []byte {
	if !q.EDNS {
		return b
	}
	var ednsFlags uint16
	if q.DO {
		ednsFlags = 0x8000
	}
	b = append(b, 0) // the root
	b = binary.BigEndian.AppendUint16(b, dns.TypeOPT)
	b = binary.BigEndian.AppendUint16(b, dnsmsg.EDNSSize)
	b = append(b, 0, 0) // extended rcode, version
	b = binary.BigEndian.AppendUint16(b, ednsFlags)
	return binary.BigEndian.AppendUint16(b, 0)
}

// wireName appends the wire form of the fully qualified text name s (plain
// labels: the zone's names).
func wireName(dst []byte, s string) []byte {
	for len(s) > 0 && s != "." {
		i := 0
		for i < len(s) && s[i] != '.' {
			i++
		}
		dst = append(append(dst, byte(i)), s[:i]...)
		if i == len(s) {
			break
		}
		s = s[i+1:]
	}
	return append(dst, 0)
}

// nameTable is miekg/dns's name compression for one message: every name
// suffix is kept at the offset where it was first written, and a later
// name ending in an equal suffix (byte for byte, case included, as
// miekg/dns's map of names) points there.
type nameTable struct {
	offs [128]uint16
	n    int
}

// append appends the uncompressed wire name s to b, compressed.
func (t *nameTable) append(b, s []byte) []byte {
	for i := 0; i < len(s) && s[i] != 0; i += 1 + int(s[i]) {
		for _, o := range t.offs[:t.n] {
			if equalName(b, int(o), s[i:]) {
				return append(b, byte(0xc0|o>>8), byte(o))
			}
		}
		if len(b) < 0x3fff && t.n < len(t.offs) {
			t.offs[t.n] = uint16(len(b))
			t.n++
		}
		b = append(b, s[i:i+1+int(s[i])]...)
	}
	return append(b, 0)
}

// equalName reports whether the name at o in b (its pointers followed)
// is s, uncompressed, byte for byte. The name being written is not
// finished in b: it reaches the end of b and is longer than s.
func equalName(b []byte, o int, s []byte) bool {
	for {
		if o >= len(b) {
			return false
		}
		for b[o]&0xc0 == 0xc0 {
			o = int(binary.BigEndian.Uint16(b[o:]) & 0x3fff)
		}
		l := int(b[o])
		if len(s) < 1+l || int(s[0]) != l || !bytes.Equal(b[o+1:o+1+l], s[1:1+l]) {
			return false
		}
		if l == 0 {
			return true
		}
		o, s = o+1+l, s[1+l:]
	}
}
