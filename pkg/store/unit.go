package store

// unitKind is what a unit of contribution is.
type unitKind uint8

// The units of contribution. A unit's names and nodes come from one run of
// the builder over its records alone.
const (
	// unitFixed is the apex, dns-version and the svc and pod subtrees.
	unitFixed unitKind = iota
	// unitService is a Service with the EndpointSlices labelled with it.
	unitService
	// unitPod is a Pod.
	unitPod
	// unitNamespaceObject is a Namespace object: it only makes its
	// namespace known.
	unitNamespaceObject
	// unitNamespace is a known namespace's <ns>.svc and <ns>.pod names,
	// present while any unit makes the namespace known (name lowercase).
	unitNamespace
)

// unitKey names a unit: the kind and the record key (namespace and name as
// the records have them).
type unitKey struct {
	kind unitKind
	nsName
}

// unitRecords are a unit's records: as they are, for a build, or as they
// were at its first change since the last Publish, kept until the Publish
// builds what the unit contributed then or applies the change as a delta
// (delta.go).
type unitRecords struct {
	// had says the object was there (a Service, a Pod or a Namespace
	// object).
	had    bool
	svc    Service
	slices []*EndpointSlice
	pod    Pod
	// kept is the unit's published contribution when recentUnits had it.
	kept *contribution
}

// contribution is what one unit adds to a snapshot.
type contribution struct {
	// names are the unit's names; the ent node marks an empty
	// non-terminal. Nodes are sorted and never modified.
	names  map[string]*Node
	counts Counts // Services, Endpoints, Pods and Variants
	ns     string // the namespace the unit makes known (lowercase), or ""
	// claims are the unit's pod's claims on its IPs (podindex.go).
	claims []podClaim
	// eps are the names of the unit's endpoints (a Service built after a
	// change), or nil.
	eps *epMemo
}
