package wirerotate

import (
	"encoding/binary"
	"sync/atomic"
)

// Window hands out a cached reply's cut RRset on each hit, without
// unpacking it. The stored reply holds the whole run of records. Hit c
// writes limit records from record c*limit mod len, wrapping round: the
// window dnsmsg.LimitAnswer takes at c.
type Window struct {
	start, end int   // the run's bytes in the stored reply
	offs       []int // the offset of each record of the run
	limit      int
	ancount    int // of the stored reply
	n          atomic.Uint32
}

// PlanWindow returns the window of the packed reply b whose answer holds
// exactly one run of A or AAAA records longer than limit, or nil: when it
// holds none or more than one, when a compression pointer reads at or
// after the run's start (the bytes there move), or when a window could
// make the reply larger than size. c is the counter of the reply made
// when b was (the first hit takes the next window).
func PlanWindow(b []byte, limit, size int, c uint32) *Window {
	var ptrs [][2]int
	counts, off, ok := walkQuestions(b, &ptrs)
	if !ok {
		return nil
	}
	var w *Window
	var run []record
	flush := func() bool {
		if len(run) <= limit {
			return true
		}
		if w != nil {
			return false
		}
		w = &Window{start: run[0].start, end: run[len(run)-1].end, limit: limit, ancount: counts[1]}
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
	if len(b)-(w.end-w.start)+w.maxBytes() > size {
		return nil
	}
	w.n.Store(c)
	return w
}

// offset is where record k of the run starts (k = len: where it ends).
func (w *Window) offset(k int) int {
	if k < len(w.offs) {
		return w.offs[k]
	}
	return w.end
}

// recordLen is the length of record k of the run.
func (w *Window) recordLen(k int) int { return w.offset(k+1) - w.offs[k] }

// maxBytes is the length of the longest window.
func (w *Window) maxBytes() int {
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

// Apply writes src, the reply PlanWindow was given, with the next
// window of the run into dst, and returns it. It is safe for concurrent
// use.
func (w *Window) Apply(dst, src []byte) []byte {
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
