package dnsmsg

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// WireQuery is what a plain query read from the wire says about the reply
// it needs: what ParseQuery reads without unpacking the message.
type WireQuery struct {
	ID     uint16
	RD, CD bool
	// Name is the question name as sent, in wire form (uncompressed labels
	// and the root label): a slice of the message ParseQuery read.
	Name          []byte
	Qtype, Qclass uint16
	// EDNS is whether the query has an OPT record (of version 0), and DO
	// and UDPSize are its DO bit and payload size.
	EDNS    bool
	DO      bool
	UDPSize uint16
}

// ReplySize is ReplySize for the query over UDP: the largest reply the
// client can receive.
func (q *WireQuery) ReplySize() int { return replySize(q.EDNS, q.UDPSize, false) }

// Shape is Shape for the query read from the wire.
func (q *WireQuery) Shape() uint32 { return shape(q.EDNS, q.UDPSize) }

// ParseQuery reads a plain query from its wire form b: not a response,
// opcode QUERY, one question, no answer nor authority records, and at most
// one additional record, an OPT of EDNS version 0 owned by the root whose
// options are only cookies and padding. The question name must be at most
// 255 octets of labels that print without escapes (bytes 0x21 to 0x7e but
// . ' ( ) ; @ " and \, as miekg/dns prints names), so that its text form
// is its labels joined by dots; nothing may follow the last record. It
// returns false for anything else, well-formed or not, which the caller
// then unpacks in full (dns.Msg.Unpack) and answers by the usual rules:
// ParseQuery reads only queries that miekg/dns unpacks without error into
// the same question, header bits and OPT.
func ParseQuery(b []byte) (WireQuery, bool) {
	var q WireQuery
	ok := q.Parse(b)
	return q, ok
}

// Parse is ParseQuery into q, which it sets whole: a caller keeping the
// query in a larger value reads it in place. q is not to be used when it
// is false.
func (q *WireQuery) Parse(b []byte) bool {
	*q = WireQuery{}
	if len(b) < 12 {
		return false
	}
	flags := binary.BigEndian.Uint16(b[2:])
	if flags&0x8000 != 0 || (flags>>11)&0xf != dns.OpcodeQuery {
		return false
	}
	qd, an, ns, ar := binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:]), binary.BigEndian.Uint16(b[8:]), binary.BigEndian.Uint16(b[10:])
	if qd != 1 || an != 0 || ns != 0 || ar > 1 {
		return false
	}
	q.ID = binary.BigEndian.Uint16(b)
	q.RD = flags&0x0100 != 0
	q.CD = flags&0x0010 != 0
	end, ok := PlainName(b, 12)
	if !ok || end+4 > len(b) {
		return false
	}
	q.Name = b[12:end]
	q.Qtype = binary.BigEndian.Uint16(b[end:])
	q.Qclass = binary.BigEndian.Uint16(b[end+2:])
	off := end + 4
	if ar == 1 {
		// The OPT: root owner, type, payload size, extended rcode,
		// version, flags, data length, options.
		if off+11 > len(b) || b[off] != 0 || binary.BigEndian.Uint16(b[off+1:]) != dns.TypeOPT || b[off+6] != 0 {
			return false
		}
		q.EDNS = true
		q.UDPSize = binary.BigEndian.Uint16(b[off+3:])
		q.DO = b[off+7]&0x80 != 0
		rdlen := int(binary.BigEndian.Uint16(b[off+9:]))
		off += 11
		if off+rdlen > len(b) {
			return false
		}
		for o, data := 0, b[off:off+rdlen]; o < len(data); {
			if o+4 > len(data) {
				return false
			}
			code, n := binary.BigEndian.Uint16(data[o:]), int(binary.BigEndian.Uint16(data[o+2:]))
			if (code != dns.EDNS0COOKIE && code != dns.EDNS0PADDING) || o+4+n > len(data) {
				return false
			}
			o += 4 + n
		}
		off += rdlen
	}
	if off != len(b) {
		return false
	}
	return true
}

// PlainName returns the end of the name at off in b when it is a name
// that ParseQuery reads: at most 255 octets of labels that print without
// escapes, no compression pointer.
func PlainName(b []byte, off int) (int, bool) {
	start := off
	for off < len(b) && off-start < 255 {
		n := int(b[off])
		switch {
		case n == 0:
			return off + 1, true
		case n > 63 || off+1+n > len(b):
			return 0, false
		}
		for _, c := range b[off+1 : off+1+n] {
			if c < 0x21 || c > 0x7e {
				return 0, false
			}
			switch c {
			case '.', '\'', '(', ')', ';', '@', '"', '\\':
				return 0, false
			}
		}
		off += 1 + n
	}
	return 0, false
}

// AppendName appends the text form of the wire name of a WireQuery (labels
// joined by dots, "." for the root), in lower case when lower is set.
func AppendName(dst, name []byte, lower bool) []byte {
	if len(name) <= 1 {
		return append(dst, '.')
	}
	for off := 0; off < len(name) && name[off] != 0; {
		n := int(name[off])
		for _, c := range name[off+1 : off+1+n] {
			if lower && 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
		}
		dst = append(dst, '.')
		off += 1 + n
	}
	return dst
}

// QuestionEnd is the offset past the name of the first question of the
// packed query q, if it is uncompressed and followed by its type and class.
func QuestionEnd(q []byte) (int, bool) {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) == 0 {
		return 0, false
	}
	off := 12
	for off < len(q) {
		l := int(q[off])
		if l == 0 {
			if off+5 > len(q) {
				return 0, false
			}
			return off + 1, true
		}
		if l >= 64 {
			return 0, false
		}
		off += l + 1
	}
	return 0, false
}

// QueryDO reports the DO bit of the packed query q whose question name
// ends at end (QuestionEnd): a plain query (one question, no answer or
// authority records) whose first additional record is an OPT for the root.
func QueryDO(q []byte, end int) bool {
	off := end + 4 // type and class
	if binary.BigEndian.Uint16(q[6:]) != 0 || binary.BigEndian.Uint16(q[8:]) != 0 || binary.BigEndian.Uint16(q[10:]) == 0 ||
		len(q) < off+11 || q[off] != 0 || binary.BigEndian.Uint16(q[off+1:]) != dns.TypeOPT {
		return false
	}
	// OPT's TTL: extended rcode, version, then the flags, DO first.
	return q[off+7]&0x80 != 0
}

// Rcode is the rcode of the packed reply b: the header's four bits, with
// the extended bits of its OPT record, if any (BADVERS); -1 for a message
// shorter than a header.
func Rcode(b []byte) int {
	if len(b) < 12 {
		return -1
	}
	rc := int(b[3] & 0x0f)
	if binary.BigEndian.Uint16(b[10:]) == 0 {
		return rc
	}
	if ext, ok := optExtRcode(b); ok {
		rc |= int(ext) << 4
	}
	return rc
}

// optExtRcode finds the OPT record of the packed message b and returns the
// upper eight bits of its extended rcode.
func optExtRcode(b []byte) (uint8, bool) {
	off, ok := 12, true
	for range binary.BigEndian.Uint16(b[4:]) {
		if off, ok = SkipName(b, off); !ok || off+4 > len(b) {
			return 0, false
		}
		off += 4
	}
	rrs := int(binary.BigEndian.Uint16(b[6:])) + int(binary.BigEndian.Uint16(b[8:])) + int(binary.BigEndian.Uint16(b[10:]))
	for range rrs {
		if off, ok = SkipName(b, off); !ok || off+10 > len(b) {
			return 0, false
		}
		if binary.BigEndian.Uint16(b[off:]) == dns.TypeOPT {
			return b[off+4], true
		}
		off += 10 + int(binary.BigEndian.Uint16(b[off+8:]))
	}
	return 0, false
}

// SkipName returns the offset after the name at off in b: its labels up to
// the root label or a compression pointer.
func SkipName(b []byte, off int) (int, bool) {
	for off < len(b) {
		switch c := int(b[off]); {
		case c == 0:
			return off + 1, true
		case c&0xc0 == 0xc0:
			return off + 2, off+2 <= len(b)
		case c&0xc0 != 0:
			return 0, false
		default:
			off += 1 + c
		}
	}
	return 0, false
}
