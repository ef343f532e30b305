package store

import (
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/benbjohnson/immutable"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
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

// get returns the set of the Snapshot numbered seq in log, whose names are
// names, making it when needed.
func (p *snapPTRs) get(names *pack.Map[string, *Node], log *changeLog, seq uint64) *ptrSet {
	if set := p.set.Load(); set != nil {
		return set
	}
	x := p.idx
	x.mu.Lock()
	defer x.mu.Unlock()
	if set := p.set.Load(); set != nil {
		return set
	}
	set := x.set
	update := func(name string) {
		a, isPTR := reverseAddr(name)
		if !isPTR {
			return
		}
		if n, has := names.Get(name); has && n.NumPTR() > 0 {
			set = set.Set(a, struct{}{})
		} else {
			set = set.Delete(a)
		}
	}
	var ok bool
	switch {
	case x.set == nil:
	case x.seq <= seq:
		ok = log.changed(x.seq, seq, update)
	default:
		ok = log.changed(seq, x.seq, update)
	}
	if !ok {
		set = ptrsOf(names)
	}
	p.set.Store(set)
	if seq > x.seq {
		x.seq, x.set = seq, set
	}
	return set
}

// ptrsOf is the PTR set of the names, from every one of them.
func ptrsOf(names *pack.Map[string, *Node]) *ptrSet {
	var addrs []netip.Addr
	names.All(func(name string, n *Node) {
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
