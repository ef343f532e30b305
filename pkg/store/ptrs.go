package store

import (
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/benbjohnson/immutable"
)

// ptrSet is a sorted set of the addresses that have a PTR name, for
// HasPTRIn.
type ptrSet = immutable.SortedMap[netip.Addr, struct{}]

// ptrIndex makes the PTR sets of a Store's Snapshots when they are first
// asked for, not at each Publish: HasPTRIn serves only reverse names that
// are not addresses, and keeping the set at every Publish cost a third of
// a change's allocations. A Snapshot's set is the newest set made, changed
// by the PTR names the change log says changed between the two Snapshots
// (in either direction). When there is none, or the log no longer reaches
// back (over 1,024 publishes, or a rebuild, since a set was last asked
// for), the set is built from the Snapshot's names: one pass over every
// name, on the query that asks.
//
// The index keeps the newest set and its Snapshot's number, not the
// Snapshot: an old Snapshot would keep every node and shard it had.
type ptrIndex struct {
	mu  sync.Mutex
	seq uint64 // the Snapshot set was made for; 0: none
	set *ptrSet
}

// snapPTRs is the PTR set of one Snapshot, made on first use.
type snapPTRs struct {
	idx *ptrIndex
	set atomic.Pointer[ptrSet]
}

// of returns snap's set, making it when needed.
func (x *ptrIndex) of(snap *Snapshot) *ptrSet {
	if set := snap.ptrs.set.Load(); set != nil {
		return set
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if set := snap.ptrs.set.Load(); set != nil {
		return set
	}
	set := x.set
	update := func(name string) {
		a, isPTR := reverseAddr(name)
		if !isPTR {
			return
		}
		if n, has := snap.names.Get(name); has && n.NumPTR() > 0 {
			set = set.Set(a, struct{}{})
		} else {
			set = set.Delete(a)
		}
	}
	var ok bool
	switch {
	case x.set == nil:
	case x.seq <= snap.seq:
		ok = snap.log.changed(x.seq, snap.seq, update)
	default:
		ok = snap.log.changed(snap.seq, x.seq, update)
	}
	if !ok {
		set = ptrsOf(snap)
	}
	snap.ptrs.set.Store(set)
	if snap.seq > x.seq {
		x.seq, x.set = snap.seq, set
	}
	return set
}

// ptrsOf is the PTR set of snap, from every name of it.
func ptrsOf(snap *Snapshot) *ptrSet {
	var addrs []netip.Addr
	snap.names.All(func(name string, n *Node) {
		if a, isPTR := reverseAddr(name); isPTR && n.NumPTR() > 0 {
			addrs = append(addrs, a)
		}
	})
	slices.SortFunc(addrs, netip.Addr.Compare)
	b := immutable.NewSortedMapBuilder[netip.Addr, struct{}](addrComparer{})
	for _, a := range slices.Compact(addrs) {
		b.Set(a, struct{}{})
	}
	return b.Map()
}

type addrComparer struct{}

func (addrComparer) Compare(a, b netip.Addr) int { return a.Compare(b) }
