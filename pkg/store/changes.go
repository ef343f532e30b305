package store

import "sync"

// changeLog is what changed at each recent Publish of a Store, so a reader
// holding an older Snapshot can tell which names to forget (ChangedSince).
// It keeps the last maxLogEntries publishes and at most maxLogNames names.
type changeLog struct {
	mu      sync.Mutex
	entries []logEntry // by seq
	names   int
	seq     uint64
}

type logEntry struct {
	seq   uint64
	names []string // sorted; never modified
	all   bool     // a full rebuild: everything may have changed
}

const (
	maxLogEntries = 1024
	maxLogNames   = 1 << 16
)

// add records what changed since the Snapshot before the next one, and
// returns the next one's number.
func (l *changeLog) add(names []string, all bool) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.entries = append(l.entries, logEntry{seq: l.seq, names: names, all: all})
	l.names += len(names)
	drop := 0
	for len(l.entries)-drop > 1 && (len(l.entries)-drop > maxLogEntries || l.names > maxLogNames) {
		l.names -= len(l.entries[drop].names)
		drop++
	}
	if drop > 0 {
		// Reslice, not copy: a full log drops one entry per add, and
		// copying the other 1,023 each time was most of a Publish's
		// garbage. The dropped entries are cleared so their names go; the
		// array is replaced when an append outgrows it.
		clear(l.entries[:drop])
		l.entries = l.entries[drop:]
	}
	return l.seq
}

// changed calls f with every name that may have changed from the Snapshot
// numbered from to the one numbered to, as ChangedSince.
func (l *changeLog) changed(from, to uint64, f func(name string)) bool {
	if from > to {
		return false
	}
	if from == to {
		return true
	}
	var lists [][]string
	l.mu.Lock()
	ok := len(l.entries) > 0 && l.entries[0].seq <= from+1
	for _, e := range l.entries {
		if !ok {
			break
		}
		if e.seq <= from || e.seq > to {
			continue
		}
		if e.all {
			ok = false
		}
		lists = append(lists, e.names)
	}
	l.mu.Unlock()
	if !ok {
		return false
	}
	for _, names := range lists {
		for _, n := range names {
			f(variantBase(n)) // a variant changes what its name answers
		}
	}
	return true
}
