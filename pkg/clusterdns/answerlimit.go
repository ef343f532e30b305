package clusterdns

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// WithUDPAnswerLimit cuts, in every UDP reply this server makes (the
// zone's and autopath's, not a forwarded one), an A or AAAA RRset of more
// than n records to n: dnsmsg.LimitAnswer, TC clear. Over TCP the reply
// holds them all. 0 (default) is off.
func WithUDPAnswerLimit(n int) Option { return func(h *Handler) { h.udpLimit = n } }

// udpCut is how a UDP reply was cut to the answer limit: its answer
// before the cut and the counter its window was taken at.
type udpCut struct {
	full []dns.RR
	c    uint32
}

// limitUDP cuts m's answer to the UDP answer limit (a TCP reply is left
// whole), and says how; nil when nothing was cut.
func (h *Handler) limitUDP(m *dns.Msg, tcp bool) *udpCut {
	if tcp || h.udpLimit <= 0 || len(m.Answer) <= h.udpLimit {
		return nil
	}
	c := h.cutN.Add(1)
	cut := dnsmsg.LimitAnswer(m.Answer, h.udpLimit, c)
	if len(cut) == len(m.Answer) {
		return nil
	}
	full := m.Answer
	m.Answer = cut
	return &udpCut{full: full, c: c}
}

// window hands out a cached reply's cut RRset on each hit, without
// unpacking it: the stored reply holds the whole run of records, and hit
// c writes the window of limit records dnsmsg.LimitAnswer would take at
// c, wrapping round.
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
// after the run's start (the bytes there move), or when a window could
// make the reply larger than size. c is the counter of the reply made
// when b was (the first hit takes the next window).
func planWindow(b []byte, limit, size int, c uint32) *window {
	var ptrs [][2]int
	counts, off, ok := walkQuestions(b, &ptrs)
	if !ok {
		return nil
	}
	var w *window
	var run []wireRR
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
		addr := rr.rrtype == dns.TypeA || rr.rrtype == dns.TypeAAAA
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

// apply writes src with the next window of the run into dst and returns
// it.
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

// windowReply is what the reply cache keeps of m, a finished UDP reply
// whose answer was cut: m packed with its whole answer and the window
// that hands it out, the next records on each hit; nil when it cannot be
// served that way (m truncated, or planWindow's reasons). Loadbalance
// adds nothing: the window moves on every hit.
func (h *Handler) windowReply(m *dns.Msg, cut *udpCut, size int) ([]byte, *window) {
	if m.Truncated {
		return nil, nil
	}
	whole := *m
	whole.Answer = cut.full
	b, err := whole.Pack()
	if err != nil {
		return nil, nil
	}
	// The cached form has RD and CD clear; they are set per request.
	b[2] &^= 0x01
	b[3] &^= 0x10
	w := planWindow(b, h.udpLimit, size, cut.c)
	if w == nil {
		return nil, nil
	}
	return b, w
}
