package wirerotate

import (
	"encoding/binary"
	"sync/atomic"
)

// Rotation is how a packed reply's answer RRsets are rotated on a cache hit
// without unpacking it: the byte ranges of the rotatable runs (consecutive
// A, AAAA, or same-priority SRV records of one owner) and the compression
// pointers elsewhere in the message that point into them, which are moved
// with the records they point into. n counts the hits: hit c starts each run
// at its record c mod len.
type Rotation struct {
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

// Plan returns the rotation of the packed reply b, or nil when its
// answer has nothing to rotate, or rotating it would break a compression
// pointer (one inside a run pointing into a run), or b holds a record type
// whose data may hold names that this parser does not know.
func Plan(b []byte) *Rotation {
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
	p := &Rotation{runs: runs}
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

// Apply writes src, the reply Plan was given, into dst rotated for the
// next hit, and returns it. It is safe for concurrent use.
func (p *Rotation) Apply(dst, src []byte) []byte {
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
