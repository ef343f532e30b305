package replycache

import (
	"encoding/binary"
	"sync/atomic"
)

// Reply is a packed reply as the cache keeps it, with RD and CD clear
// (AppendTo sets them per request), and what a hit does to it: nothing,
// rotate its answer's RRsets one step (NewReply with rotate), or hand out
// the next window of an answer cut to a limit (NewWindow).
type Reply struct {
	wire []byte
	rot  *rotation // nil: served as it is
	win  *window   // nil: not cut
}

// NewReply returns the cached form of the packed reply wire, which it
// keeps and clears RD and CD in. With rotate, each hit rotates the runs of
// A, AAAA and same-priority SRV records of one owner one record on, when
// that can be done in place (planRotation).
func NewReply(wire []byte, rotate bool) Reply {
	wire[2] &^= 0x01
	wire[3] &^= 0x10
	r := Reply{wire: wire}
	if rotate {
		r.rot = planRotation(wire)
	}
	return r
}

// NewWindow returns the cached form of wire, a packed reply whose answer
// holds its whole run of A or AAAA records, that each hit cuts to the next
// limit records of the run: the window dnsmsg.LimitAnswer takes at hit
// counter c+1, c+2, ... It keeps wire and clears RD and CD in it. ok is
// false when the reply cannot be served so (planWindow). MaxLen says
// whether every window fits the client.
func NewWindow(wire []byte, limit int, c uint32) (r Reply, ok bool) {
	wire[2] &^= 0x01
	wire[3] &^= 0x10
	w := planWindow(wire, limit, c)
	if w == nil {
		return Reply{}, false
	}
	return Reply{wire: wire, win: w}, true
}

// Len is the length of the cached form: what the reply costs the cache.
func (r *Reply) Len() int { return len(r.wire) }

// MaxLen is the length of the longest reply a hit writes.
func (r *Reply) MaxLen() int {
	if r.win == nil {
		return len(r.wire)
	}
	return len(r.wire) - (r.win.end - r.win.start) + r.win.maxBytes()
}

// AppendTo writes the reply for a hit into dst (reused from its start):
// rotated or cut as NewReply or NewWindow said, with the request's id and
// its RD and CD bits. It is safe for concurrent use.
func (r *Reply) AppendTo(dst []byte, id uint16, rd, cd bool) []byte {
	var b []byte
	switch {
	case r.win != nil:
		b = r.win.apply(dst[:0], r.wire)
	case r.rot != nil:
		b = r.rot.apply(dst[:0], r.wire)
	default:
		b = append(dst[:0], r.wire...)
	}
	b[0], b[1] = byte(id>>8), byte(id)
	if rd {
		b[2] |= 0x01
	}
	if cd {
		b[3] |= 0x10
	}
	return b
}

// rotation is how a packed reply's answer RRsets are rotated on a cache hit
// without unpacking it: the byte ranges of the rotatable runs (consecutive
// A, AAAA, or same-priority SRV records of one owner) and the compression
// pointers elsewhere in the message that point into them, which are moved
// with the records they point into. n counts the hits: hit c starts each run
// at its record c mod len.
type rotation struct {
	runs  []rotRun
	fixes []rotFix
	n     atomic.Uint32
}

type rotRun struct {
	offs []int // the offset of each record; offs[0] is where the run starts
	end  int
}

// rotFix is a compression pointer at pos, outside every run, pointing at
// target inside record rr of run run.
type rotFix struct {
	pos, target, run, rr int
}

// planRotation returns the rotation of the packed reply b, or nil when its
// answer has nothing to rotate, or rotating it would break a compression
// pointer (one inside a run pointing into a run), or b holds a record type
// whose data may hold names that this parser does not know.
func planRotation(b []byte) *rotation {
	var ptrs [][2]int // position, target
	counts, off, ok := walkQuestions(b, &ptrs)
	if !ok {
		return nil
	}
	answer := make([]record, 0, counts[1])
	prev := ""
	for i := range counts[1] + counts[2] + counts[3] {
		rr, ok := walkRR(b, off, &ptrs, prev)
		if !ok {
			return nil
		}
		if i < counts[1] {
			answer = append(answer, rr)
		}
		off, prev = rr.end, rr.owner
	}
	if off != len(b) {
		return nil
	}
	var runs []rotRun
	for i := 0; i < len(answer); {
		j := i + 1
		if t := answer[i].rrtype; t == typeA || t == typeAAAA || t == typeSRV {
			for j < len(answer) && answer[j].rrtype == t && answer[j].owner == answer[i].owner && answer[j].prio == answer[i].prio {
				j++
			}
		}
		if j-i >= 2 {
			r := rotRun{end: answer[j-1].end, offs: make([]int, 0, j-i)}
			for _, rr := range answer[i:j] {
				r.offs = append(r.offs, rr.start)
			}
			runs = append(runs, r)
		}
		i = j
	}
	if len(runs) == 0 {
		return nil
	}
	p := &rotation{runs: runs}
	for _, pt := range ptrs {
		fix, ok := planPointer(b, runs, pt[0], pt[1])
		if !ok {
			return nil
		}
		if fix != nil {
			p.fixes = append(p.fixes, *fix)
		}
	}
	return p
}

// planPointer checks the compression pointer at pos, pointing at target,
// against the runs. It follows the whole name the pointer reads, since a
// name that starts outside a run may run on into one. The pointer needs no
// fix when every byte it reads lies outside the runs; it needs one when it
// lies outside the runs and its first hop reads within one record of a run
// (the record moves, the pointer follows it). Anything else would change a
// name when the records rotate: ok is false.
func planPointer(b []byte, runs []rotRun, pos, target int) (fix *rotFix, ok bool) {
	inRun, _ := findRun(runs, pos)
	for hop := 0; hop < 16; hop++ {
		end, next, ok := nameSegment(b, target)
		if !ok {
			return nil, false
		}
		if overlapsRun(runs, target, end) {
			run, rr := findRun(runs, target)
			lastRun, lastRR := findRun(runs, end-1)
			if hop > 0 || inRun >= 0 || run < 0 || run != lastRun || rr != lastRR || runs[run].end > maxPointer {
				return nil, false
			}
			// The rest of the chain starts inside the record and moves
			// with it: it must read nothing inside a run.
			fix = &rotFix{pos: pos, target: target, run: run, rr: rr}
		}
		if next < 0 {
			return fix, true
		}
		target = next
	}
	return nil, false
}

// nameSegment reads the labels at off up to the root label or a pointer.
// It returns the offset after them and the pointer's target (-1 at the
// root label).
func nameSegment(b []byte, off int) (end, next int, ok bool) {
	for off < len(b) {
		c := int(b[off])
		switch c & 0xc0 {
		case 0x00:
			if c == 0 {
				return off + 1, -1, true
			}
			off += 1 + c
		case 0xc0:
			if off+2 > len(b) {
				return 0, 0, false
			}
			return off + 2, int(binary.BigEndian.Uint16(b[off:])) & maxPointer, true
		default:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// overlapsRun reports whether [start, end) shares a byte with a run.
func overlapsRun(runs []rotRun, start, end int) bool {
	for _, r := range runs {
		if start < r.end && end > r.offs[0] {
			return true
		}
	}
	return false
}

// findRun returns the run and the record in it that hold offset off, or -1.
func findRun(runs []rotRun, off int) (run, rr int) {
	for i, r := range runs {
		if off < r.offs[0] || off >= r.end {
			continue
		}
		for k := len(r.offs) - 1; k >= 0; k-- {
			if off >= r.offs[k] {
				return i, k
			}
		}
	}
	return -1, -1
}

// apply writes src, the reply planRotation was given, into dst rotated for the
// next hit, and returns it. It is safe for concurrent use.
func (p *rotation) apply(dst, src []byte) []byte {
	dst = append(dst[:0], src...)
	c := p.n.Add(1)
	for _, r := range p.runs {
		k := int(c % uint32(len(r.offs)))
		if k == 0 {
			continue
		}
		start, mid := r.offs[0], r.offs[k]
		n := copy(dst[start:], src[mid:r.end])
		copy(dst[start+n:], src[start:mid])
	}
	for _, f := range p.fixes {
		r := p.runs[f.run]
		k := int(c % uint32(len(r.offs)))
		t := f.target
		if f.rr >= k {
			t -= r.offs[k] - r.offs[0]
		} else {
			t += r.end - r.offs[k]
		}
		binary.BigEndian.PutUint16(dst[f.pos:], 0xc000|uint16(t))
	}
	return dst
}

// window hands out a cached reply's cut RRset on each hit, without
// unpacking it. The stored reply holds the whole run of records. Hit c
// writes limit records from record c*limit mod len, wrapping round: the
// window dnsmsg.LimitAnswer takes at c.
type window struct {
	start, end int   // the run's bytes in the stored reply
	offs       []int // the offset of each record of the run
	limit      int
	ancount    int // of the stored reply
	n          atomic.Uint32
}

// planWindow returns the window of the packed reply b whose answer holds
// exactly one run of A or AAAA records longer than limit, or nil: when it
// holds none or more than one, when a compression pointer reads at or
// after the run's start (the bytes there move). c is the counter of the
// reply made when b was (the first hit takes the next window).
func planWindow(b []byte, limit int, c uint32) *window {
	var ptrs [][2]int
	counts, off, ok := walkQuestions(b, &ptrs)
	if !ok {
		return nil
	}
	var w *window
	var run []record
	flush := func() bool {
		if len(run) <= limit {
			return true
		}
		if w != nil {
			return false
		}
		w = &window{start: run[0].start, end: run[len(run)-1].end, limit: limit, ancount: counts[1]}
		for _, rr := range run {
			w.offs = append(w.offs, rr.start)
		}
		return true
	}
	prev := ""
	for i := range counts[1] + counts[2] + counts[3] {
		rr, ok := walkRR(b, off, &ptrs, prev)
		if !ok {
			return nil
		}
		off, prev = rr.end, rr.owner
		if i >= counts[1] {
			continue
		}
		addr := rr.rrtype == typeA || rr.rrtype == typeAAAA
		if len(run) > 0 && (!addr || rr.rrtype != run[0].rrtype || rr.owner != run[0].owner) {
			if !flush() {
				return nil
			}
			run = run[:0]
		}
		if addr {
			run = append(run, rr)
		}
	}
	if off != len(b) || !flush() || w == nil {
		return nil
	}
	for _, p := range ptrs {
		if p[1] >= w.start {
			return nil
		}
	}
	w.n.Store(c)
	return w
}

// offset is where record k of the run starts (k = len: where it ends).
func (w *window) offset(k int) int {
	if k < len(w.offs) {
		return w.offs[k]
	}
	return w.end
}

// recordLen is the length of record k of the run.
func (w *window) recordLen(k int) int { return w.offset(k+1) - w.offs[k] }

// maxBytes is the length of the longest window.
func (w *window) maxBytes() int {
	n := len(w.offs)
	sum := 0
	for k := range w.limit {
		sum += w.recordLen(k)
	}
	most := sum
	for s := 1; s < n; s++ {
		sum += w.recordLen((s+w.limit-1)%n) - w.recordLen(s-1)
		most = max(most, sum)
	}
	return most
}

// apply writes src, the reply planWindow was given, with the next
// window of the run into dst, and returns it. It is safe for concurrent
// use.
func (w *window) apply(dst, src []byte) []byte {
	c := w.n.Add(1)
	n := len(w.offs)
	first := int(uint64(c) * uint64(w.limit) % uint64(n))
	dst = append(dst[:0], src[:w.start]...)
	// The window is one range of the run, or two when it wraps round.
	if last := first + w.limit; last <= n {
		dst = append(dst, src[w.offs[first]:w.offset(last)]...)
	} else {
		dst = append(dst, src[w.offs[first]:w.end]...)
		dst = append(dst, src[w.start:w.offs[last-n]]...)
	}
	dst = append(dst, src[w.end:]...)
	binary.BigEndian.PutUint16(dst[6:], uint16(w.ancount-n+w.limit))
	return dst
}

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
