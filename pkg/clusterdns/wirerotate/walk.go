package wirerotate

import "encoding/binary"

// The record types whose data the walk knows.
const (
	typeA     = 1
	typeNS    = 2
	typeCNAME = 5
	typeSOA   = 6
	typePTR   = 12
	typeHINFO = 13
	typeTXT   = 16
	typeAAAA  = 28
	typeSRV   = 33
	typeOPT   = 41
)

// maxPointer is the largest offset a compression pointer can hold.
const maxPointer = 0x3fff

// record is one resource record of a packed message.
type record struct {
	start, end int
	owner      string // lowercase, for grouping
	rrtype     uint16
	prio       uint16 // SRV priority
}

// walkQuestions reads the section counts of the packed message b and
// walks its questions, appending their compression pointers to ptrs; off
// is where the answer section starts. ok is false when b is cut short.
func walkQuestions(b []byte, ptrs *[][2]int) (counts [4]int, off int, ok bool) {
	if len(b) < 12 {
		return counts, 0, false
	}
	for i := range counts {
		counts[i] = int(binary.BigEndian.Uint16(b[4+2*i:]))
	}
	off = 12
	for range counts[0] {
		if off, ok = walkName(b, off, ptrs); !ok || off+4 > len(b) {
			return counts, 0, false
		}
		off += 4
	}
	return counts, off, true
}

// walkName skips the name at off, appending its compression pointer (if
// any) to ptrs, and returns the offset after it.
func walkName(b []byte, off int, ptrs *[][2]int) (int, bool) {
	for off < len(b) {
		c := int(b[off])
		switch c & 0xc0 {
		case 0x00:
			if c == 0 {
				return off + 1, true
			}
			off += 1 + c
		case 0xc0:
			if off+2 > len(b) {
				return 0, false
			}
			*ptrs = append(*ptrs, [2]int{off, int(binary.BigEndian.Uint16(b[off:])) & maxPointer})
			return off + 2, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// walkRR parses the record at off.
func walkRR(b []byte, off int, ptrs *[][2]int, prevOwner string) (record, bool) {
	rr := record{start: off}
	end, ok := walkName(b, off, ptrs)
	if !ok || end+10 > len(b) {
		return rr, false
	}
	rr.owner = readName(b, off, prevOwner)
	rr.rrtype = binary.BigEndian.Uint16(b[end:])
	rdlen := int(binary.BigEndian.Uint16(b[end+8:]))
	rd := end + 10
	rr.end = rd + rdlen
	if rr.end > len(b) {
		return rr, false
	}
	// The names in the data of the types the handler makes; any other type
	// (which might hold a compressed name) disables the rotation.
	names, skip := 0, 0
	switch rr.rrtype {
	case typeA, typeAAAA, typeTXT, typeHINFO, typeOPT:
	case typeCNAME, typePTR, typeNS:
		names = 1
	case typeSRV:
		if rdlen < 6 {
			return rr, false
		}
		rr.prio = binary.BigEndian.Uint16(b[rd:])
		names, skip = 1, 6
	case typeSOA:
		names = 2
	default:
		return rr, false
	}
	o := rd + skip
	for range names {
		if o, ok = walkName(b, o, ptrs); !ok || o > rr.end {
			return rr, false
		}
	}
	return rr, true
}

// maxNameBytes bounds a name's presentation form: 255 octets on the wire.
const maxNameBytes = 256

// readName returns the lowercase presentation form of the name at off,
// following at most 16 compression pointers ("" when it is malformed or
// longer than a name can be). It returns prev itself when the name is
// prev: the records of an RRset share their owner's string.
func readName(b []byte, off int, prev string) string {
	var buf [maxNameBytes]byte
	name := buf[:0]
	for hops := 0; off < len(b); {
		c := int(b[off])
		switch {
		case c == 0:
			if string(name) == prev {
				return prev
			}
			return string(name)
		case c&0xc0 == 0xc0:
			if hops++; hops > 16 || off+2 > len(b) {
				return ""
			}
			off = int(binary.BigEndian.Uint16(b[off:])) & maxPointer
		case c&0xc0 == 0 && off+1+c <= len(b) && len(name)+c+1 <= len(buf):
			for _, x := range b[off+1 : off+1+c] {
				if 'A' <= x && x <= 'Z' {
					x += 'a' - 'A'
				}
				name = append(name, x)
			}
			name = append(name, '.')
			off += 1 + c
		default:
			return ""
		}
	}
	return ""
}
