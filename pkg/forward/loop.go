package forward

import (
	"bytes"
	"math/rand/v2"

	"github.com/miekg/dns"
)

// tagLen is the length of an upstream's tag in its loop marker, after the
// Forwarder's 8 bytes.
const tagLen = 4

// newMark returns a loop marker for a new upstream: the Forwarder's marker
// and a random tag.
func (f *Forwarder) newMark() []byte {
	mark := make([]byte, len(f.marker)+tagLen)
	copy(mark, f.marker[:])
	for i := len(f.marker); i < len(mark); i++ {
		mark[i] = byte(rand.Uint32())
	}
	return mark
}

// CheckLoop returns ErrLoop when m went round a forwarding loop back to
// this Forwarder: it carries our loop marker, the markers of more than
// MaxHops forwarders, or it is our own loop probe. Such a query is counted
// (dnsconfigurer_forward_loops_total) and logged at error level, naming the
// upstream it was sent to, at most once per upstream every 10s. Exchange
// checks first; a cache in front of the Forwarder checks before it asks
// (pkg/dnscache's LoopChecker): the query that came back is otherwise
// identical to the one in flight, its own, one lap earlier, and would wait
// for it until the timeout.
func (f *Forwarder) CheckLoop(m *dns.Msg) error {
	code := f.cfg.LoopOptionCode
	hops := 0
	for _, rr := range m.Extra {
		o, ok := rr.(*dns.OPT)
		if !ok {
			continue
		}
		for _, e := range o.Option {
			l, ok := e.(*dns.EDNS0_LOCAL)
			if !ok || e.Option() != code {
				continue
			}
			if len(l.Data) == len(f.marker)+tagLen && bytes.Equal(l.Data[:len(f.marker)], f.marker[:]) {
				f.loopBack(l.Data)
				return ErrLoop
			}
			hops++
		}
	}
	if hops > MaxHops {
		f.loops.Add(1)
		if ok, suppressed := f.strayLog.allow(f.now(), logEvery); ok {
			f.log.Error("forwarding loop: a query came through more forwarders than allowed; answering SERVFAIL",
				"name", questionName(m), "markers", hops, "max", MaxHops, "suppressed", suppressed)
		}
		return ErrLoop
	}
	if len(m.Question) == 1 && f.ownProbe(m.Question[0].Name) {
		f.loops.Add(1)
		return ErrLoop
	}
	return nil
}

// loopBack counts and logs a query that came back with our marker mark,
// naming the upstream it was sent to.
func (f *Forwarder) loopBack(mark []byte) {
	f.loops.Add(1)
	for _, u := range f.list().ups {
		if !bytes.Equal(u.mark, mark) {
			continue
		}
		if !u.loopSeen.Swap(true) {
			f.loopDetected.Add(1)
		}
		if ok, suppressed := u.loopLog.allow(f.now(), logEvery); ok {
			f.log.Error("forwarding loop: a query sent to this upstream came back to this server; answering SERVFAIL",
				"upstream", u.name, "suppressed", suppressed)
		}
		return
	}
	// Sent to an upstream since dropped from the list.
	if ok, suppressed := f.strayLog.allow(f.now(), logEvery); ok {
		f.log.Error("forwarding loop: a query came back to this server through an upstream no longer listed; answering SERVFAIL",
			"suppressed", suppressed)
	}
}

func questionName(m *dns.Msg) string {
	if len(m.Question) == 0 {
		return ""
	}
	return m.Question[0].Name
}
