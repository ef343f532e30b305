package store

// Counts are the sizes of a Snapshot, for metrics.
type Counts struct {
	Services       int
	EndpointSlices int
	Endpoints      int
	Pods           int
	Namespaces     int
	// Names counts the names the index holds: not those Lookup makes
	// (verified pods', endpoints' dashed names).
	Names int
	// Variants counts the names with answers per client (variant.go).
	Variants int
}

// add adds (sign 1) or takes away (sign -1) what a unit counts: its
// Services, endpoints, pods and variants.
func (c *Counts) add(u Counts, sign int) {
	c.Services += sign * u.Services
	c.Endpoints += sign * u.Endpoints
	c.Pods += sign * u.Pods
	c.Variants += sign * u.Variants
}
