package topology

// The values of a Service's spec.trafficDistribution that Prefer knows.
const (
	PreferSameZone = "PreferSameZone"
	// PreferClose is the deprecated name of PreferSameZone.
	PreferClose    = "PreferClose"
	PreferSameNode = "PreferSameNode"
)

// Endpoint is what Prefer needs of a Service's endpoint: where it runs
// and whether it is ready.
type Endpoint struct {
	Zone, Node string
	Ready      bool
}

// Prefer returns the indexes of the endpoints of eps that a client c is
// answered with under traffic distribution td, in their order:
//   - PreferSameZone and PreferClose: the ready endpoints in c's topology
//     zone if there are any, else all;
//   - PreferSameNode: the ready endpoints on c's node if there are any,
//     else the ready ones in its topology zone, else all;
//   - "", an unknown value, or a client whose place is unknown: all.
//
// An endpoint with no topology zone (or node) is in none.
func Prefer(td string, c Client, eps []Endpoint) []int {
	for _, tier := range tiers(td, c) {
		if idx := ready(eps, tier); len(idx) > 0 {
			return idx
		}
	}
	all := make([]int, len(eps))
	for i := range all {
		all[i] = i
	}
	return all
}

// Tier is one step of Prefer's fallback: the ready endpoints on Node, or
// in topology zone Zone (Node empty).
type Tier struct {
	Zone, Node string
}

// Tiers returns the tiers Prefer tries for a client c under traffic
// distribution td, first to last; after them come all endpoints. A store
// that keeps the ready endpoints of each tier answers as Prefer by taking
// the first tier that has any.
func Tiers(td string, c Client) []Tier { return tiers(td, c) }

func tiers(td string, c Client) []Tier {
	var out []Tier
	switch td {
	case PreferSameNode:
		if c.Node != "" {
			out = append(out, Tier{Node: c.Node})
		}
		fallthrough
	case PreferSameZone, PreferClose:
		if c.Zone != "" {
			out = append(out, Tier{Zone: c.Zone})
		}
	}
	return out
}

// ready returns the indexes of the ready endpoints of eps in tier t.
func ready(eps []Endpoint, t Tier) []int {
	var idx []int
	for i, e := range eps {
		if !e.Ready {
			continue
		}
		if (t.Node != "" && e.Node == t.Node) || (t.Node == "" && e.Zone == t.Zone) {
			idx = append(idx, i)
		}
	}
	return idx
}
