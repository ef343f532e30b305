package clusterdns

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// DefaultReplyCacheBytes bounds the packed replies a Handler caches
// unless WithReplyCache says otherwise: about 60,000 replies of a cluster
// zone (a reply with its key and overhead costs about 250 bytes), room for
// the search-list misses of a busy cluster's working set. It is
// v1alpha1's DefaultZoneBytes.
var DefaultReplyCacheBytes = v1alpha1.DefaultZoneBytes.Bytes()

// cacheKey is everything of a request that shapes the reply besides its ID
// and the RD and CD bits (patched per request): the question as sent (case
// included, since it is echoed), whether the reply carries an OPT and its DO
// bit, and the size the reply was truncated to.
type cacheKey struct {
	name   string
	qtype  uint16
	qclass uint16
	edns   bool
	do     bool
	limit  uint16
}

type wireEntry struct {
	wire  []byte
	rcode int
	// lb rotates the answer's RRsets per hit (WithLoadBalance); nil when
	// the reply has nothing to rotate or cannot be rotated in place.
	lb *rotation
	// win hands out the next records of an answer cut to the UDP answer
	// limit per hit (WithUDPAnswerLimit); wire then holds them all.
	win *window
	// amp is what the query adds to the namespace metrics
	// (WithAmplification); nil when they are off or do not count it.
	amp *ampCount
	// deps are the names the reply was made from: it is served while none
	// of them has changed.
	deps []*nameTag
}

// valid reports whether none of the names the reply was made from has
// changed since.
func (e *wireEntry) valid() bool {
	for _, t := range e.deps {
		if t.stale.Load() {
			return false
		}
	}
	return true
}

// nameTag stands for one lowercase name in the entries made from it; a
// change of the name marks the tag stale, which retires every such entry
// at once.
type nameTag struct {
	stale atomic.Bool
	name  string
	refs  int // entries holding the tag; under wireCache.mu
}

// wireCache holds the packed replies of a Handler across snapshots. Each
// entry names the names its reply was made from (the question's, SRV
// targets, CNAME targets, what the namespace metrics looked at); when a new
// snapshot comes, advance retires the entries of the names that changed
// (Snapshot.ChangedSince), and all of them when that is unknown.
//
// It keeps two generations of at most half of max bytes each: when the
// current one is full it becomes the previous one (the older is dropped),
// and a hit in the previous generation is moved to the current one, so the
// replies in use stay while a flood of one-off names (random NXDOMAIN) only
// churns the generations. The current generation also becomes the previous
// one at the first put or snapshot once it is idle old (replyIdle in a
// Handler). So a reply nobody asked for in two such periods goes at the
// next put or snapshot, and the cache's memory follows what clients ask
// rather than every name ever asked. Reads take no lock; puts, moves,
// rotations and advance take mu.
type wireCache struct {
	max  int64         // bytes of both generations together
	idle time.Duration // the age that rotates a generation; 0: none
	now  func() time.Time
	gen  atomic.Pointer[wireGens]

	mu   sync.Mutex
	tags map[string]*nameTag // the live tag of each name
	// snap is the snapshot the entries answer for: a reply made from
	// another is not put.
	snap *store.Snapshot
}

type wireGens struct{ cur, prev *wireGen }

type wireGen struct {
	tab  atomic.Pointer[wireTable] // nil until the first store
	size atomic.Int64              // changed under wireCache.mu
	born time.Time
}

// replyIdle is the age at which the reply cache's current generation
// becomes the previous one: a reply unasked for one to two periods is
// dropped.
const replyIdle = time.Minute

// clock is the cache's time: now, or time.Now.
func (c *wireCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// rotate makes a new current generation, the current one the previous one,
// and drops the previous one. c.mu is held.
func (c *wireCache) rotate(g *wireGens) *wireGens {
	if g.prev != nil {
		c.releaseGen(g.prev)
	}
	g = &wireGens{cur: &wireGen{born: c.clock()}, prev: g.cur}
	c.gen.Store(g)
	return g
}

// aged reports whether g holds replies and is idle old. c.mu is held.
func (c *wireCache) aged(g *wireGen) bool {
	return c.idle > 0 && g.size.Load() > 0 && c.clock().Sub(g.born) >= c.idle
}

func (c *wireCache) gens() *wireGens {
	if g := c.gen.Load(); g != nil {
		return g
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gensLocked()
}

func (c *wireCache) gensLocked() *wireGens {
	if g := c.gen.Load(); g != nil {
		return g
	}
	g := &wireGens{cur: &wireGen{born: c.clock()}}
	c.gen.Store(g)
	return g
}

func (c *wireCache) get(k cacheKey) (wireEntry, bool) {
	g := c.gens()
	h := hashKey(k)
	if e, ok := g.cur.load(h, k); ok {
		return e, e.valid()
	}
	if g.prev == nil {
		return wireEntry{}, false
	}
	e, ok := g.prev.load(h, k)
	if !ok || !e.valid() {
		return wireEntry{}, false
	}
	c.mu.Lock()
	if e.valid() {
		k.name = strings.Clone(k.name) // k may borrow its name (wireKey)
		c.store(h, k, e)
	}
	c.mu.Unlock()
	return e, true
}

// put caches the reply e to k, made from snap and from the lowercase names
// deps, unless the cache has moved on to another snapshot.
func (c *wireCache) put(k cacheKey, e wireEntry, snap *store.Snapshot, deps []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if snap != c.snap {
		return
	}
	if c.tags == nil {
		c.tags = map[string]*nameTag{}
	}
	e.deps = make([]*nameTag, 0, len(deps))
	for _, d := range deps {
		t := c.tags[d]
		if t == nil {
			t = &nameTag{name: d}
			c.tags[d] = t
		}
		if !slices.Contains(e.deps, t) {
			e.deps = append(e.deps, t)
		}
	}
	c.store(hashKey(k), k, e)
}

func entryCost(k cacheKey, e wireEntry) int64 {
	return int64(len(e.wire) + len(k.name) + 96 + 8*len(e.deps))
}

// store puts e into the current generation, rotating it first when it is
// full. c.mu is held; h is hashKey(k).
func (c *wireCache) store(h uint64, k cacheKey, e wireEntry) {
	// e's references count first: releasing the entry it replaces (the
	// same question, made again after another of its names changed) or a
	// generation being dropped must not forget a tag e holds, or a later
	// change of that name would not retire e.
	for _, t := range e.deps {
		t.refs++
	}
	cost := entryCost(k, e)
	g := c.gensLocked()
	if g.cur.size.Load()+cost > c.max/2 || c.aged(g.cur) {
		g = c.rotate(g)
	}
	if old, ok := g.cur.store(h, k, e); ok {
		g.cur.size.Add(-entryCost(k, old))
		c.release(old)
	}
	g.cur.size.Add(cost)
}

// releaseGen drops the tag references of a generation being dropped.
// c.mu is held.
func (c *wireCache) releaseGen(g *wireGen) {
	g.all(c.release)
}

// release drops e's tag references, forgetting tags no entry holds. c.mu
// is held.
func (c *wireCache) release(e wireEntry) {
	for _, t := range e.deps {
		if t.refs--; t.refs <= 0 && c.tags[t.name] == t {
			delete(c.tags, t.name)
		}
	}
}

// advance moves the cache on to the snapshot next, from prev (nil: none
// yet): it retires the entries made from the names that changed between
// them, and from the names always in changed (apexes whose SOA serial
// moved), or every entry when the snapshot cannot tell what changed.
func (c *wireCache) advance(prev, next *store.Snapshot, always []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snap = next
	if g := c.gen.Load(); g != nil && c.aged(g.cur) {
		c.rotate(g)
	}
	if prev == nil {
		return
	}
	if !next.ChangedSince(prev, c.retire) {
		c.gen.Store(&wireGens{cur: &wireGen{born: c.clock()}})
		for _, t := range c.tags {
			t.stale.Store(true)
		}
		c.tags = nil
		return
	}
	for _, n := range always {
		c.retire(n)
	}
}

// retire marks the entries made from name stale. A reverse name's
// ancestors are retired too: whether they exist (authoritative reverse
// zones) depends on the addresses below them. c.mu is held.
func (c *wireCache) retire(name string) {
	c.retireOne(name)
	rz := reverseZone(name)
	if rz == "" {
		return
	}
	for rest := name; len(rest) > len(rz); {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			return
		}
		rest = rest[i+1:]
		c.retireOne(rest)
	}
}

func (c *wireCache) retireOne(name string) {
	if t := c.tags[name]; t != nil {
		t.stale.Store(true)
		delete(c.tags, name)
	}
}

// cacheKeyOf returns the cache key of a request, and false for requests
// whose reply is not cacheable: responses, and queries dnsmsg.Check rejects
// (not exactly one question, not a plain query, EDNS versions other than 0).
// The size limit is dnsmsg.ReplySize, the size Finish truncates to.
func cacheKeyOf(req *dns.Msg, tcp bool) (cacheKey, bool) {
	opt, rcode := dnsmsg.Check(req)
	return checkedKey(req, opt, rcode, tcp)
}

// checkedKey is cacheKeyOf for a request dnsmsg.Check has read: opt and
// rcode are what it returned.
func checkedKey(req *dns.Msg, opt *dns.OPT, rcode int, tcp bool) (cacheKey, bool) {
	if req.Response || rcode != dns.RcodeSuccess {
		return cacheKey{}, false
	}
	q := req.Question[0]
	k := cacheKey{name: q.Name, qtype: q.Qtype, qclass: q.Qclass, limit: uint16(dnsmsg.ReplySize(opt, tcp))}
	if opt != nil {
		k.edns, k.do = true, opt.Do()
	}
	return k, true
}

// wireKey is cacheKeyOf for a UDP query read by dnsmsg.ParseQuery (which
// reads only plain queries dnsmsg.Check accepts), name being its name as
// dnsmsg.AppendName writes it: the same key as for the same query
// unpacked. The key borrows name, so it is good for get only, and only
// while name is.
func wireKey(q *dnsmsg.WireQuery, name []byte) cacheKey {
	return cacheKey{name: borrowString(name), qtype: q.Qtype, qclass: q.Qclass,
		edns: q.EDNS, do: q.DO, limit: uint16(q.ReplySize())}
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

// maxPointer is the largest offset a compression pointer can hold.
const maxPointer = 0x3fff

// wireRR is one resource record of a packed message.
type wireRR struct {
	start, end int
	owner      string // lowercase, for grouping
	rrtype     uint16
	prio       uint16 // SRV priority
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
	answer := make([]wireRR, 0, counts[1])
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
		if t := answer[i].rrtype; t == dns.TypeA || t == dns.TypeAAAA || t == dns.TypeSRV {
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
func walkRR(b []byte, off int, ptrs *[][2]int, prevOwner string) (wireRR, bool) {
	rr := wireRR{start: off}
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
	case dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeHINFO, dns.TypeOPT:
	case dns.TypeCNAME, dns.TypePTR, dns.TypeNS:
		names = 1
	case dns.TypeSRV:
		if rdlen < 6 {
			return rr, false
		}
		rr.prio = binary.BigEndian.Uint16(b[rd:])
		names, skip = 1, 6
	case dns.TypeSOA:
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

// apply writes src into dst rotated for the next hit and returns it.
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
