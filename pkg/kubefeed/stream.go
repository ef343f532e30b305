package kubefeed

import (
	"hash/maphash"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// A streamed initial list (a watch with sendInitialEvents) is applied to
// the store as it arrives, by the watch that carries it (keyedStore.stream
// in cluster.go, through relay), before the reflector sees it. The
// reflector gets one placeholder object for each event: its temporary
// store files them all under one key, so a relist of 150,000 Pods holds
// no map of their keys (test/bench TestScale).
// What the list had is kept as a hash of each key (a listing), which the
// initial-events-end bookmark hands to the Replace that follows it.

// listing is the set of keys a full list had, as 64-bit hashes with a
// seed of its own: 8 bytes a key. A key the list did not have is taken
// for listed only if its hash equals one of the n listed ones, a chance
// of n in 2^64 (about 1 in 10^14 at 150,000 objects), and then only until
// the next list.
type listing struct {
	seed   maphash.Seed
	hashes []uint64            // sorted and compacted by the first has after an add
	gone   map[uint64]struct{} // deleted in the stream after they were listed
	sorted bool
}

func newListing() *listing { return &listing{seed: maphash.MakeSeed()} }

func (l *listing) hash(ns, name string) uint64 {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(ns)
	h.WriteByte('/') // a namespace is a DNS label: no '/'
	h.WriteString(name)
	return h.Sum64()
}

// add lists the object ns/name.
func (l *listing) add(ns, name string) {
	h := l.hash(ns, name)
	l.hashes = append(l.hashes, h)
	l.sorted = false
	delete(l.gone, h)
}

// drop unlists the object ns/name, deleted while the list streamed.
func (l *listing) drop(ns, name string) {
	if l.gone == nil {
		l.gone = map[uint64]struct{}{}
	}
	l.gone[l.hash(ns, name)] = struct{}{}
}

// has tells whether the list has the object ns/name (see listing).
func (l *listing) has(ns, name string) bool {
	if !l.sorted {
		slices.Sort(l.hashes)
		l.hashes = slices.Compact(l.hashes)
		l.sorted = true
	}
	h := l.hash(ns, name)
	if _, ok := slices.BinarySearch(l.hashes, h); !ok {
		return false
	}
	_, gone := l.gone[h]
	return !gone
}

// relayed is a watch whose events pass through f, in a goroutine of its
// own. Unlike watch.Filter's, the goroutine ends on Stop even while no one
// reads its events.
type relayed struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func relay(in watch.Interface, f func(watch.Event) watch.Event) watch.Interface {
	r := &relayed{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go r.loop(f)
	return r
}

func (r *relayed) ResultChan() <-chan watch.Event { return r.out }

func (r *relayed) Stop() {
	r.once.Do(func() {
		close(r.stop)
		r.in.Stop()
	})
}

func (r *relayed) loop(f func(watch.Event) watch.Event) {
	defer close(r.out)
	for {
		select {
		case <-r.stop:
			return
		case ev, ok := <-r.in.ResultChan():
			if !ok {
				return
			}
			ev = f(ev)
			select {
			case r.out <- ev:
			case <-r.stop:
				return
			}
		}
	}
}
