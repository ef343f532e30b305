package store

// recentUnits keeps the published contributions of recently changed units,
// so that a unit's next change takes its old contribution from here
// instead of building it again from the records (half the work of a
// change). A Service's change that is applied as a delta (delta.go)
// builds no contribution, so only Services whose changes are built are
// kept. Only units of at least recentMinNames names are kept (a Service
// with endpoints, whose build is the costly one), and at most recentNames
// names in all, or the one last unit when it alone has more. When full,
// an arbitrary entry goes (Go's map order), so a rotation over more units
// than fit still hits in proportion.
//
// A kept contribution holds its map, its endpoint memo and the nodes the
// Snapshot does not share with it (those of an unchanged name whose old
// contribution was built again, not kept): 80 to 200 bytes a name.
// Putting the published nodes back in their place would cost a lookup of
// every unchanged name at each change (80 µs of a 330 µs change at 50k).
//
// The bound is fixed, not a share of the index: the units that change
// again soon are the few a rollout or a scale is moving, whatever the
// cluster's size. Churn spread over many Services hits a kept unit rarely
// at any bound (1,000 headless Services at 50k: a quarter of the index
// held 9 MB and missed as often), and the memory it held stayed.
type recentUnits struct {
	m     map[unitKey]*contribution
	names int // names of the kept contributions
}

const (
	recentMinNames = 8
	// recentNames holds about 80 Services of 50 endpoints (under 2 MB).
	recentNames = 8192
)

// keep records c as unit u's published contribution.
func (r *recentUnits) keep(u unitKey, c *contribution) {
	if len(c.names) < recentMinNames {
		return
	}
	// A unit larger than the budget is kept alone: a Service of
	// thousands of endpoints in a rollout changes again and again, and
	// each build it saves is the costliest.
	limit := max(recentNames, len(c.names))
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
