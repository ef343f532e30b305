package dnscache

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// MaxForms is the most finished replies (Keep) kept with one cached
// answer: the shapes and spellings of its question that are asked (with
// and without EDNS0, say). An answer asked in more stays answered by
// unpacking it until it is replaced.
const MaxForms = 4

// formOverhead is what a kept form costs besides its bytes: the form and
// the slot of the entry pointing at it.
const formOverhead = 64

// Ticket names the cached answer a reply was made from (AnswerTicket's
// Hit) and how old it was then, so that the caller can Keep its finished
// reply with it. The zero Ticket names none.
type Ticket struct {
	e   *entry
	age uint32
}

// form is a caller's finished reply made from an entry, for queries of one
// shape and one question name as sent: its ID is to be set, RD and CD
// set as asked, and the TTLs at ttls aged. It is never modified.
type form struct {
	shape uint32
	wire  []byte // the finished reply with every TTL as cached (age 0)
	ttls  []uint16
	cost  int64
}

// Keep keeps reply, the caller's finished wire form of the reply that
// AnswerTicket gave with t, with the cached answer t names, so that
// AnswerWire answers further queries of the same shape for it without
// unpacking it. shape is the caller's number for what besides the cache
// key (name, type, class, DO and CD) and the question name as sent (its
// case) made reply what it is: EDNS0 and the size limit, say; the ID, the
// RD and CD bits and the TTLs are set per query by AnswerWire. reply is
// copied, and its size counted against the capacity of the answer's kind
// (evicting the least recently used other answers of that kind).
//
// Nothing is kept when the answer has been replaced or has expired since,
// when it has MaxForms already or one for shape and that name, when reply
// is malformed or not a reply to the answer's question with a name that
// dnsmsg.ParseQuery reads, or when AnswerTicket's aging took one of its
// TTLs to 0 (the TTL as cached is then unknown).
func (c *Cache) Keep(t Ticket, shape uint32, reply []byte) {
	e := t.e
	if e == nil || len(reply) < 12 || binary.BigEndian.Uint16(reply[4:]) != 1 {
		return
	}
	end, ok := dnsmsg.PlainName(reply, 12)
	if !ok || end+4 > len(reply) || binary.BigEndian.Uint16(reply[end:]) != e.key.qtype ||
		binary.BigEndian.Uint16(reply[end+2:]) != e.key.qclass {
		return
	}
	var buf [256]byte
	if string(dnsmsg.AppendName(buf[:0], reply[12:end], true)) != e.key.name {
		return
	}
	c.mu.Lock()
	skip := c.items[e.key] != e || e.forms[MaxForms-1] != nil || e.form(shape, reply[12:end]) != nil
	c.mu.Unlock()
	if skip {
		return
	}
	ttls, ok := ttlOffsets(reply, end+4)
	if !ok {
		return
	}
	w := append(make([]byte, 0, len(reply)), reply...)
	for _, o := range ttls {
		switch ttl := binary.BigEndian.Uint32(w[o:]); {
		case ttl > 0:
			binary.BigEndian.PutUint32(w[o:], ttl+t.age)
		case t.age > 0:
			return
		}
	}
	f := &form{shape: shape, wire: w, ttls: ttls,
		cost: int64(allocSize(len(w))+allocSize(2*len(ttls))) + formOverhead}

	now := c.nanos()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items[e.key] != e || now >= e.expires || e.form(shape, reply[12:end]) != nil {
		return
	}
	slot := -1
	for i, g := range e.forms {
		if g == nil {
			slot = i
			break
		}
	}
	if slot < 0 {
		return
	}
	l := &c.kinds[e.kind]
	for l.bytes+f.cost > l.capacity {
		v := l.root.prev
		if v == e {
			v = e.prev
		}
		if v == &l.root {
			return // e with the form would not fit on its own
		}
		c.unlink(v)
		l.evicted++
	}
	e.forms[slot] = f
	e.cost += f.cost
	l.bytes += f.cost
}

// form returns e's form for shape and the question name (wire form) as
// sent, or nil (c.mu held).
func (e *entry) form(shape uint32, name []byte) *form {
	for _, f := range e.forms {
		if f == nil {
			return nil
		}
		if f.shape == shape && bytes.HasPrefix(f.wire[12:], name) {
			return f
		}
	}
	return nil
}

// AnswerWire answers the query q (read with dnsmsg.ParseQuery; by value, so
// a caller through an interface keeps it on its stack) from a form
// kept with its cached answer for shape (Keep): the form with q's ID, RD
// and CD bits, and its TTLs aged by the time the answer has been cached,
// appended to dst[:0]. The answer must be fresh (not expired: stale answers
// are AnswerTicket's); the hit is counted, refreshes the answer's place in
// the cache and may start its prefetch, as AnswerTicket's hits. It returns
// false, having done nothing, when there is no such form: the caller then
// answers by AnswerTicket, and may Keep the form.
func (c *Cache) AnswerWire(dst []byte, q dnsmsg.WireQuery, shape uint32) ([]byte, bool) {
	var buf [256]byte
	name := dnsmsg.AppendName(buf[:0], q.Name, true)
	now := c.nanos()
	c.mu.Lock()
	e := c.items[key{name: string(name), qtype: q.Qtype, qclass: q.Qclass, do: q.DO, cd: q.CD, rd: q.RD}]
	if e == nil || now >= e.expires {
		c.mu.Unlock()
		return dst, false
	}
	f := e.form(shape, q.Name)
	if f == nil {
		c.mu.Unlock()
		return dst, false
	}
	age := uint32((now - e.stored) / int64(time.Second))
	c.touch(e)
	refresh := c.duePrefetch(e, now)
	kind := e.kind
	c.mu.Unlock()
	c.hits[kind].Add(1)
	if refresh {
		go c.refresh(e.key, wireMsg(&q), e)
	}
	b := append(dst[:0], f.wire...)
	b[0], b[1] = byte(q.ID>>8), byte(q.ID)
	b[2] &^= 0x01
	if q.RD {
		b[2] |= 0x01
	}
	b[3] &^= 0x10
	if q.CD {
		b[3] |= 0x10
	}
	for _, o := range f.ttls {
		ttl := binary.BigEndian.Uint32(b[o:])
		if ttl > age {
			ttl -= age
		} else {
			ttl = 0
		}
		binary.BigEndian.PutUint32(b[o:], ttl)
	}
	return b, true
}

// wireMsg is the query q as a message, for a prefetch: what the next step
// reads of it (the question as sent, CD, and an OPT with the DO bit).
func wireMsg(q *dnsmsg.WireQuery) *dns.Msg {
	m := new(dns.Msg)
	m.Id = q.ID
	m.RecursionDesired = q.RD
	m.CheckingDisabled = q.CD
	m.Question = []dns.Question{{Name: string(dnsmsg.AppendName(nil, q.Name, false)), Qtype: q.Qtype, Qclass: q.Qclass}}
	if q.EDNS {
		m.SetEdns0(q.UDPSize, q.DO)
	}
	return m
}

// ttlOffsets returns the offsets of the TTL fields of the records of the
// message b, whose records start at off, but of the OPT records of its
// additional section: the cache keeps none there (an upstream's OPT is
// dropped), so those are the caller's, whose TTL field holds flags. False
// when b is malformed or has more than 0xffff bytes.
func ttlOffsets(b []byte, off int) ([]uint16, bool) {
	if len(b) > 0xffff {
		return nil, false
	}
	an, ns, ar := int(binary.BigEndian.Uint16(b[6:])), int(binary.BigEndian.Uint16(b[8:])), int(binary.BigEndian.Uint16(b[10:]))
	var ttls []uint16
	for i := range an + ns + ar {
		var ok bool
		if off, ok = dnsmsg.SkipName(b, off); !ok || off+10 > len(b) {
			return nil, false
		}
		if i < an+ns || binary.BigEndian.Uint16(b[off:]) != dns.TypeOPT {
			ttls = append(ttls, uint16(off+4))
		}
		off += 10 + int(binary.BigEndian.Uint16(b[off+8:]))
		if off > len(b) {
			return nil, false
		}
	}
	return ttls, off == len(b)
}
