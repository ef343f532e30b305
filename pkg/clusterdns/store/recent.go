package store

// recentUnits keeps the published contributions of recently changed units,
// so that a unit's next change takes its old contribution from here
// instead of building it again from the records (half the work of a
// change). Only units of at least recentMinNames names are kept (a Service
// with endpoints, whose build is the costly one), and at most a quarter of
// the index's names in all, plus recentSpare: when full, an arbitrary
// entry goes (Go's map order), so a rotation over more units than fit
// still hits in proportion. A kept contribution shares its nodes with the
// Snapshot (replace puts the published node back in place of an equal
// one), so its cost is its map.
type recentUnits struct {
	m     map[unitKey]*contribution
	names int // names of the kept contributions
}

const (
	recentMinNames = 8
	recentSpare    = 4096
)

// keep records c as unit u's published contribution; total is the number
// of names in the index.
func (r *recentUnits) keep(u unitKey, c *contribution, total int) {
	if len(c.names) < recentMinNames {
		return
	}
	limit := total/4 + recentSpare
	if len(c.names) > limit {
		return
	}
	if r.m == nil {
		r.m = map[unitKey]*contribution{}
	}
	if old, ok := r.m[u]; ok {
		r.names -= len(old.names)
	}
	for k, v := range r.m {
		if r.names+len(c.names) <= limit {
			break
		}
		if k != u {
			r.names -= len(v.names)
			delete(r.m, k)
		}
	}
	r.m[u] = c
	r.names += len(c.names)
}

// take removes and returns unit u's kept contribution.
func (r *recentUnits) take(u unitKey) (*contribution, bool) {
	c, ok := r.m[u]
	if ok {
		delete(r.m, u)
		r.names -= len(c.names)
	}
	return c, ok
}

// clear forgets every contribution: a rebuild makes new nodes.
func (r *recentUnits) clear() {
	clear(r.m)
	r.names = 0
}
