package store

import (
	"net/netip"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// builder applies the record rules to records: the names they make, with
// their nodes, the namespaces they make known, their counts and the pods'
// claims on their IPs. One builder makes the contribution of one unit
// (see unit.go); the tests' oracle runs one over every record at once.
// This file holds its tools and the small units' rules; a Service's are
// in service.go, srv.go and endpoints.go.
type builder struct {
	zone    string
	ttl     uint32
	opts    Options
	exposed map[string]struct{}
	// names are the names the build made: empty non-terminals (ent),
	// nodes taken from the previous contribution, and the names of drafts
	// (drafting) until finish packs them.
	names  map[string]*Node
	drafts map[string]*pack.Draft
	pool   *pack.DraftPool
	// ent is the one Node shared by every empty non-terminal.
	ent *Node

	counts     Counts
	namespaces map[string]struct{} // known and exposed, lowercase
	claims     []podClaim

	// memo keeps the endpoint names of a Service built after a change
	// (nil: not kept); prev is the unit's previous contribution's names,
	// or the published ones, whose endpoint nodes the build may take (see
	// addEndpointNames).
	memo *epMemo
	prev nodeSource
	// published is the published index when the build makes what the unit
	// contributed to it (prev is then that index too), else nil.
	published *pack.Map[string, *Node]
	// ownOnly leaves out the endpoint names and PTRs of a Service: the
	// build makes what a delta makes again (delta.go). targets, when not
	// nil, are SRV records sorted by target whose strings the endpoint
	// names are taken from (targetHost).
	ownOnly bool
	targets []SRV
	// implicit says that the endpoint names of the Service being built
	// that are their dashed address are left to Lookup (implicitHost);
	// allNames keeps them all (the tests' oracle).
	implicit, allNames bool
	// distinct says that the served endpoints differ in address and label
	// and each slice's ports in name, protocol and number (a delta checked
	// them): the build does not deduplicate its endpoints and SRV keys.
	distinct bool
	// arena is what a rebuild's builds share (nil outside a rebuild).
	arena *rebuildArena
	// stable is set while the build makes the names a Service object
	// alone changes: those of a ClusterIP or ExternalName Service but
	// its endpoints'. Their nodes are cut from chunks of their own
	// (rebuildArena): a change of endpoints makes the others again.
	stable bool
	// scratch holds the lists a build makes and drops; reuse says whether
	// it came from the Store's previous build (one runs at a time).
	scratch buildScratch
	reuse   bool
}

// buildScratch is the lists of a Service's build that no contribution
// keeps.
type buildScratch struct {
	eps     []served
	srvs    []srvKey
	addrs   []netip.Addr
	bare    []SRV
	named   []SRV // addHeadlessSRV's
	targets []SRV // delta.go's
}

// scratchKeep is the longest list a Store keeps for its next build: a
// Service of thousands of endpoints makes its own.
const scratchKeep = 1024

// scratchList is s emptied when it is reused and has room for n, else a
// new list.
func scratchList[T any](reuse bool, s []T, n int) []T {
	if !reuse || cap(s) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}

// kept is sc as the Store keeps it for the next build: emptied of the
// names the lists point at (they may go), without the long ones. A list
// is cleared as far as the build used it: what lies past that was
// cleared when an earlier build kept it.
func (sc buildScratch) kept() buildScratch {
	return buildScratch{eps: keptList(sc.eps), srvs: keptList(sc.srvs), addrs: keptList(sc.addrs),
		bare: keptList(sc.bare), named: keptList(sc.named), targets: keptList(sc.targets)}
}

// keptList is s as buildScratch.kept keeps it.
func keptList[T any](s []T) []T {
	clear(s)
	if cap(s) > scratchKeep {
		return nil
	}
	return s[:0]
}

// nodeSource is where a build takes endpoint nodes from: a previous
// contribution's names, or the published Snapshot's.
type nodeSource interface {
	Get(name string) (*Node, bool)
}

// rebuildArena is what the builds of one rebuild share: the names they
// keep, their packed nodes (those of builder.stable apart), the drafts
// they make them from and the lists they drop. A rebuild is the bulk (the
// start-up's first Publish, a Replace, new options); its builds run one
// at a time, and the arena is dropped after (pack.Nodes says why).
// Changes after the bulk allocate their own. What changes only with a
// Service object (the names of a ClusterIP or ExternalName Service but
// its endpoints') is kept apart from what endpoints make: endpoints come
// and go all day, and a chunk of both kinds would keep the dead
// endpoints' nodes as long as the Services live.
type rebuildArena struct {
	names   pack.Strings
	nodes   pack.Nodes
	drafts  pack.DraftPool
	scratch buildScratch
}

func newBuilder(zone string, opts Options, exposed map[string]struct{}, ent *Node, size int) *builder {
	return &builder{zone: zone, ttl: opts.TTL, opts: opts, exposed: exposed, ent: ent,
		names: make(map[string]*Node, size), namespaces: map[string]struct{}{}}
}

// drafting stands in builder.names for a name whose draft the build
// makes.
var drafting = new(Node)

// node returns the draft of name for adding data, creating it and, for
// names inside the zone, every missing ancestor down to the zone as empty
// non-terminals.
func (b *builder) node(name string) *pack.Draft {
	if d, ok := b.drafts[name]; ok {
		return d
	}
	if b.pool == nil {
		b.pool = &pack.DraftPool{}
	}
	if b.drafts == nil {
		b.drafts = b.pool.Names()
	}
	n, ok := b.names[name]
	d := b.pool.Get(b.ttl)
	if ok && n != b.ent {
		// Taken from the previous contribution, which must not
		// change: a second endpoint of the name gets a copy.
		n.Unpack(d)
	}
	d.Stable = b.stable
	b.drafts[name] = d
	b.names[name] = drafting
	if !ok {
		b.ancestors(name)
	}
	return d
}

// finish packs the drafts of the build into its names, and gives them
// back to the pool. It sorts their records first.
func (b *builder) finish() {
	for name, d := range b.drafts {
		d.Sort()
		if b.arena != nil {
			b.names[name] = b.arena.nodes.Pack(d)
		} else {
			b.names[name] = d.Pack()
		}
		b.pool.Put(d)
	}
	if b.drafts != nil {
		b.pool.PutNames(b.drafts)
		b.drafts = nil
	}
}

// ensure makes name exist, as an empty non-terminal when it is new.
func (b *builder) ensure(name string) {
	if _, ok := b.names[name]; ok {
		return
	}
	b.names[name] = b.ent
	b.ancestors(name)
}

func (b *builder) ancestors(name string) {
	if !strings.HasSuffix(name, "."+b.zone) {
		return
	}
	rest := name
	for {
		i := strings.IndexByte(rest, '.')
		rest = rest[i+1:]
		if rest == b.zone {
			return
		}
		if _, ok := b.names[rest]; ok {
			return
		}
		b.names[rest] = b.ent
	}
}

// served is an endpoint address published under a Service.
type served struct {
	addr netip.Addr
	host string // <label>.<service name>
	ptr  string // ReverseName(addr), or "" when not made yet
}

// srvKey is one SRV record of a Service: a port (name empty when unnamed)
// of an endpoint or of the Service (target).
type srvKey struct {
	name, proto string
	port        uint16
	target      string
}

// expose records ns as a known namespace when the namespace filter lets it
// through, and reports whether it does.
func (b *builder) expose(ns string) bool {
	if namespaceExposed(b.exposed, ns) {
		b.namespaces[ns] = struct{}{}
		return true
	}
	return false
}

// addFixedNames adds the apex, dns-version, the svc and pod subtrees and
// ns.dns, the name server the zone's SOA and NS name (NODATA: it has no
// address of its own, as CoreDNS bound to loopback).
func (b *builder) addFixedNames() {
	b.node(b.zone)
	v := b.node("dns-version." + b.zone)
	v.AddTXT(SchemaVersion)
	v.TTL = VersionTTL
	b.ensure("svc." + b.zone)
	b.ensure("pod." + b.zone)
	b.ensure("ns.dns." + b.zone)
}

// addPod makes the pod's namespace known and claims its IPs for the
// pod-IP index (podindex.go): with its node, and in the verified mode
// with its namespace, which makes its pod names (Snapshot.podName).
func (b *builder) addPod(p *Pod) {
	ns := strings.ToLower(p.Namespace)
	verified := b.expose(ns) && b.opts.Pods == PodsVerified
	if verified {
		b.counts.Pods++
	} else {
		ns = ""
	}
	if ns == "" && p.NodeName == "" {
		return
	}
	podNS, podNode := intern(ns), intern(p.NodeName)
	for _, ip := range p.IPs {
		b.claims = append(b.claims, podClaim{ip.Unmap(), podNS, podNode})
	}
}

// addNamespaceNames makes <ns>.svc.<zone> (and <ns>.pod.<zone> unless pods
// are disabled) exist for a known namespace.
func (b *builder) addNamespaceNames(ns string) {
	b.ensure(ns + ".svc." + b.zone)
	if b.opts.Pods != PodsDisabled {
		b.ensure(ns + ".pod." + b.zone)
	}
}

// nameArena is the arena a build cuts its names from: nil outside a rebuild,
// where each name is allocated alone.
func (b *builder) nameArena() *pack.Strings {
	if b.arena == nil {
		return nil
	}
	return &b.arena.names
}

// concat is the concatenation of parts, from the build's arena.
func (b *builder) concat(parts ...string) string { return b.nameArena().Concat(parts...) }

// reverseName is ReverseName(a), from the build's arena.
func (b *builder) reverseName(a netip.Addr) string {
	var buf [74]byte
	return b.nameArena().CopyBytes(appendReverseName(buf[:0], a))
}
