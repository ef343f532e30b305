// Package gctarget sets serve's Go GC target (GOGC) through its phases,
// unless the GOGC variable is set.
package gctarget

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/memrelease"
)

// Serve is the GOGC of serve unless the GOGC variable is set, and
// the node-local stage's throughout: its live heap is mostly its answer
// cache, bounded by --cache-size, and a low target keeps its RSS within the
// DaemonSet's 128 MiB (test/bench TestNodeLocalMemoryFill).
const Serve = 75

// Cluster is the cluster DNS's GOGC once its records synced, Go's
// and CoreDNS's default, for a live heap up to restFloor (Rest). Its live
// heap is mostly the long-lived record index, and the garbage is a
// change's: at 75 the collector took about a seventh of the CPU of a
// change. At 50k Services, with 100 rather than 75: CPU per change
// 0.98-1.00× CoreDNS 1.15's against 1.09×, RssAnon after churn 0.81×
// against 0.77× (test/bench TestChurn).
const Cluster = 100

// Rest is the lowest GOGC of the synced cluster DNS: over a live heap of
// restFloor, the garbage allowed between two collections stays restFloor
// until it is Rest percent of the live heap. At Cluster the records of
// 150,000 Pods (a live heap of 80-90 MiB) let the heap grow by as much at
// rest, where the garbage of the steady changes and queries is under a
// megabyte a second; at 25-27 the collections come a minute or more apart
// (test/bench TestScale, gctrace).
const Rest = 25

// restFloor is the garbage, in bytes, that the collector always allows a
// synced cluster DNS (Rest).
const restFloor = 24 << 20

// busyInterval and quietInterval follow the changes: when two collections
// come less than busyInterval apart (a churn of Services: megabytes of
// garbage a second), the target doubles, up to Cluster, so that the
// collector costs a change what it did at Cluster (test/bench TestChurn at
// 50k Services); when they come over quietInterval apart, it halves, down
// to restPercent.
const (
	busyInterval  = 10 * time.Second
	quietInterval = time.Minute
)

// restPercent is the GOGC for a live heap of live bytes (Rest).
func restPercent(live int64) int {
	if live <= restFloor {
		return Cluster
	}
	return max(Rest, int(restFloor*100/live))
}

// Startup is the cluster DNS's GOGC until its records first
// synced: the initial list allocates the whole index, and at
// Cluster the collector would mark the growing heap several times
// more often. At 100k Services, 200 rather than 100 saved about 0.25 s of
// CPU in a 2 s start on 2 cores shared with the API server, for a
// high-water mark of 350-420 MiB rather than 330-360 (CoreDNS's: 460-480).
// The heap freed is given back a second after the sync.
const Startup = 200

// Rebuild is the GOGC of the first publish of the records: it
// builds the whole index, and nearly all it allocates stays live, so a
// collection in it marks a growing heap for little garbage (about 40 % of
// its CPU). The heap still stays within 5× the live heap.
const Rebuild = 400

// Headroom is the share, in percent, of GOMEMLIMIT that serve leaves to
// memory the Go runtime does not count (the binary's pages, the kernel's
// socket buffers, the page tables): with GOMEMLIMIT at a container's
// memory limit, as the Deployment sets it, the collector would let the
// heap reach the limit and the container be OOM-killed.
const Headroom = 10

// Tuned reports whether serve sets the GC target (GOGC is not set).
func Tuned() bool { return os.Getenv("GOGC") == "" }

// Phases moves the GC target through the cluster DNS's start:
// Startup, Rebuild around each first publish, then Cluster from the sync
// on. A first publish (the first, or one after a rewatch) puts back the
// target of the phase it ends in.
type Phases struct {
	mu     sync.Mutex
	synced bool
	// limit is the memory limit a relist lowered, to put back once it
	// has ended (0: not lowered); relisting is set while one streams.
	limit      int64
	relisting  bool
	restoreGen int
	// after runs f after d (time.AfterFunc), and resting is the memory
	// at rest (restingMemory); tests set them. release gives memory back
	// once a relist settled (Start sets it).
	after   func(d time.Duration, f func())
	resting func() int64
	release func()
	// live is the live heap (liveHeap); tests set it. publishing is set
	// during a first publish, watching once the collections set the
	// target (watchRest), and percent is the target they set last.
	live       func() int64
	publishing bool
	watching   bool
	percent    int
	unwatched  bool // the collections no longer set the target (tests)
	rests      int  // the collections that set it
	// busy is the target the collections' pace asks for (0: none), from
	// the last one's time, lastGC; now is time.Now (tests set it).
	busy   int
	lastGC time.Time
	now    func() time.Time
	// forced counts the forced collections (forcedCycles; tests set it),
	// and forcedSeen is its count at the last collection.
	forced     func() uint64
	forcedSeen uint64
}

// RelistBound is how much, in percent, a relist after the first sync (the
// API server restarted) may add to the Go runtime's memory at rest: while
// it streams, and for relistSettle after, the memory limit is lowered to
// that, and the collector runs more often instead of letting the listed
// objects' garbage grow the heap to the container's limit (test/bench
// TestScale, 150,000 Pods, a 288 MiB limit: a peak of 1.97× the resting
// RSS without it). The relist's own live heap is a few MB over the
// records (an 8-byte hash of each listed key, kubefeed's listing). At 15
// the relist takes 4.7-12.2 s of CPU, the most in a restart during a
// burst of changes, for a peak of 1.16-1.17× the resting RSS once the
// binary's pages are evicted (memrelease; 1.14-1.29× before, and 1.26-1.28×
// at 30). Before the streamed objects' keys left
// the reflector's temporary store (21 MiB at 150,000 Pods), 15 left the
// collector no room: 15-20 s of CPU, and no lower a peak than at 30.
const RelistBound = 15

// relistSettle is how long the bound stays after a relist ends: the
// kinds relist one after the other, seconds apart, and what one leaves
// is not the next one's to grow from.
const relistSettle = 30 * time.Second

// Relisting is a relist after the first sync starting (on) or ending. It
// returns the runtime's memory and the memory limit then in force.
func (g *Phases) Relisting(on bool) (held, limit int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	held = goMemory()
	switch {
	case on && !g.relisting:
		g.relisting = true
		g.restoreGen++ // a restore scheduled before does nothing
		if g.limit == 0 {
			g.limit = debug.SetMemoryLimit(-1)
			resting := restingMemory
			if g.resting != nil {
				resting = g.resting
			}
			if bound := resting() * (100 + RelistBound) / 100; bound < g.limit {
				debug.SetMemoryLimit(bound)
			}
		}
		g.setRest()
	case !on && g.relisting:
		g.relisting = false
		g.restoreGen++
		gen := g.restoreGen
		after := g.after
		if after == nil {
			after = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
		}
		after(relistSettle, func() { g.restore(gen) })
	}
	return held, debug.SetMemoryLimit(-1)
}

// restore puts back the memory limit a relist lowered, unless a relist
// started (or ended again) since the end that scheduled it (gen), and
// then runs release: the relist's freed heap and the binary's pages it
// touched (its connections, its errors) go back to the OS, as the
// start's do after the sync.
func (g *Phases) restore(gen int) {
	g.mu.Lock()
	done := gen == g.restoreGen && !g.relisting && g.limit != 0
	if done {
		debug.SetMemoryLimit(g.limit)
		g.limit = 0
		g.rest()
	}
	release := g.release
	g.mu.Unlock()
	if done && release != nil {
		release() // a collection: outside g.mu, which its finalizer takes
	}
}

// restingMemory is the runtime's memory as it is at rest: what it holds,
// but no more than the live heap with the garbage the collector lets
// build up at rest on average (half of restPercent's) and the memory
// besides the heap (a relist right after a burst of changes starts with
// their garbage).
func restingMemory() int64 {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(m)
	held := goMemory()
	heap := int64(m[1].Value.Uint64() + m[2].Value.Uint64() + m[3].Value.Uint64())
	live := int64(m[0].Value.Uint64())
	return min(held, live+live*int64(restPercent(live))/200+max(held-heap, 0))
}

// goMemory is the memory the Go runtime holds that its memory limit
// counts: all it mapped, less what it gave back.
func goMemory() int64 {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(m)
	return int64(m[0].Value.Uint64() - m[1].Value.Uint64())
}

// Start sets the Startup target, lowers a memory limit set by GOMEMLIMIT
// by Headroom, and returns the phases that follow.
func Start() *Phases {
	debug.SetGCPercent(Startup)
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		debug.SetMemoryLimit(limit - limit*Headroom/100)
	}
	return &Phases{release: memrelease.Startup}
}

// AfterSync is the records' first sync: from it, the target follows the
// live heap after each collection (restPercent).
func (g *Phases) AfterSync() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.synced = true
	g.rest()
	if !g.watching {
		g.watching = true
		watchRest(g)
	}
}

// FirstPublish runs publish, a first publish of the records.
func (g *Phases) FirstPublish(publish func()) {
	g.mu.Lock()
	g.publishing, g.percent = true, Rebuild
	g.mu.Unlock()
	debug.SetGCPercent(Rebuild)
	defer func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.publishing = false
		if g.synced {
			g.rest()
		} else {
			debug.SetGCPercent(Startup)
		}
	}()
	publish()
}

// setRest sets the target for the live heap, after the sync and outside a
// first publish. While a relist's bound holds, the target is Cluster: the
// bound, not Rest, decides when the relist's garbage is collected (at Rest
// the collector ran twice as often, for twice the relist's CPU). g.mu is
// held.
func (g *Phases) setRest() {
	if !g.synced || g.publishing {
		return
	}
	live := liveHeap
	if g.live != nil {
		live = g.live
	}
	p := Cluster
	if g.limit == 0 {
		p = min(Cluster, max(restPercent(live()), g.busy))
	}
	if p != g.percent {
		debug.SetGCPercent(p)
		g.percent = p
	}
}

// watchRest sets g's target after each collection, for the process's
// life: a finalizer runs once an object is found unreachable, so once a
// collection for an object dropped at once, and it drops the next.
func watchRest(g *Phases) {
	s := &restSentinel{g: g}
	runtime.SetFinalizer(s, func(s *restSentinel) {
		s.g.mu.Lock()
		defer s.g.mu.Unlock()
		if s.g.unwatched {
			return
		}
		s.g.paced()
		s.g.setRest()
		s.g.rests++
		watchRest(s.g)
	})
}

// paced moves busy by the time since the last collection (busyInterval),
// at rest only: the collections of a start, a first publish or a relist
// come fast and say nothing of the changes after. Nor does a forced one:
// the release a second after the sync and after a settled relist forced
// one within 10 s of the last, which doubled the target at rest for the
// minutes until the collections came a minute apart (test/bench
// TestScale: GOGC 50-56 instead of 25-29 through its steady window).
// g.mu is held.
func (g *Phases) paced() {
	if !g.atRest() {
		return
	}
	t := g.clock()
	since := t.Sub(g.lastGC)
	g.lastGC = t
	forced := forcedCycles
	if g.forced != nil {
		forced = g.forced
	}
	if n := forced(); n != g.forcedSeen {
		g.forcedSeen = n
		return // a release's (memrelease): it says nothing of the changes
	}
	switch {
	case since < busyInterval:
		g.busy = min(Cluster, 2*g.percent) // at rest the target is at least busy and Rest
	case since > quietInterval:
		g.busy /= 2
	}
}

// atRest reports whether g is at rest: synced, outside a first publish
// and a relist's bound. g.mu is held.
func (g *Phases) atRest() bool { return g.synced && !g.publishing && g.limit == 0 }

// rest enters the rest: the pace starts afresh, and the target follows
// the live heap. g.mu is held.
func (g *Phases) rest() {
	g.busy, g.lastGC = 0, g.clock()
	g.setRest()
}

func (g *Phases) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

// restSentinel is watchRest's object; its pointer keeps it out of the
// tiny allocator, whose objects may never be finalized.
type restSentinel struct{ g *Phases }

// forcedCycles is the count of collections forced so far (runtime.GC,
// debug.FreeOSMemory).
func forcedCycles() uint64 {
	m := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// liveHeap is the heap the last collection marked live.
func liveHeap() int64 {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	return int64(m[0].Value.Uint64())
}
