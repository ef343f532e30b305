package store

import (
	"cmp"
	"iter"
	"net/netip"
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/pack"
)

// builder applies the record rules to records: the names they make, with
// their nodes, the namespaces they make known, their counts and the pod
// IPs of the verified mode. One builder makes the contribution of one unit
// (see unit.go); the tests' oracle runs one over every record at once.
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
	podIPs     []podIP             // verified mode

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
	// distinct says that the served endpoints differ in address and label
	// and each slice's ports in name, protocol and number (a delta checked
	// them): the build does not deduplicate its endpoints and SRV keys.
	distinct bool
	// arena is what a rebuild's builds share (nil outside a rebuild).
	arena *rebuildArena
	// stable is set while the build makes the names a Service object
	// alone changes: those of a ClusterIP or ExternalName Service but
	// its endpoints'. Their nodes are cut from chunks of their own
	// (arena.go): a change of endpoints makes the others again.
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

// podIP is a pod IP claimed by a pod of namespace ns (lowercase).
type podIP struct {
	ip netip.Addr
	ns string
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

// addFixedNames adds the apex, dns-version and the svc and pod subtrees.
func (b *builder) addFixedNames() {
	b.node(b.zone)
	v := b.node("dns-version." + b.zone)
	v.AddTXT(SchemaVersion)
	v.TTL = VersionTTL
	b.ensure("svc." + b.zone)
	b.ensure("pod." + b.zone)
}

// addService adds the names of one Service: its own, its SRV records, and
// the names and PTRs of its endpoints (from its slices).
func (b *builder) addService(svc *Service, epSlices []*EndpointSlice) {
	ns := strings.ToLower(svc.Namespace)
	name := strings.ToLower(svc.Name)
	if !b.expose(ns) {
		return
	}
	if svc.Type == Headless && b.opts.NoEndpoints {
		return
	}
	base := b.concat(name, ".", ns, ".svc.", b.zone)
	b.stable = svc.Type != Headless
	defer func() { b.stable = false }()
	if svc.Type == ExternalName {
		b.ensure(ns + ".svc." + b.zone)
		b.node(base).SetCNAME(svc.ExternalName)
		b.counts.Services++
		return
	}
	eps, srvs := b.servedEndpoints(svc, epSlices, base)
	if b.opts.IgnoreEmptyService && len(eps) == 0 {
		return
	}
	b.counts.Services++
	if svc.Type == Headless && len(eps) == 0 {
		// A headless Service without a served endpoint has no name (as
		// CoreDNS: NXDOMAIN, not NODATA); its namespace still exists.
		b.ensure(ns + ".svc." + b.zone)
		return
	}
	b.counts.Endpoints += len(eps)
	b.ensure(ns + ".svc." + b.zone)
	svcNode := b.node(base)
	switch svc.Type {
	case ClusterIP:
		b.addClusterIP(svc, svcNode, base)
	case Headless:
		addrs := scratchList(b.reuse, b.scratch.addrs, len(eps))
		for _, e := range eps {
			addrs = append(addrs, e.addr)
		}
		svcNode.AddAddrs(addrs)
		b.scratch.addrs = addrs
		b.addHeadlessSRV(base, "", srvs)
		svcNode.TakeSRV(b.bareSRV(srvs))
		if !b.ownOnly {
			b.addVariants(svc, epSlices, base)
		}
	}
	// Endpoint names and PTRs, for every Service with endpoints (as
	// CoreDNS does).
	if !b.ownOnly {
		b.stable = false
		b.addEndpointNames(eps)
	}
}

// servedEndpoints collects the endpoints served under a Service (ready ones,
// or all with PublishNotReadyAddresses), deduplicated, and for a headless
// Service one srvKey per endpoint and port (name empty for unnamed ports).
func (b *builder) servedEndpoints(svc *Service, epSlices []*EndpointSlice, base string) ([]served, []srvKey) {
	n, ports := 0, 0
	for _, sl := range epSlices {
		n += len(sl.Endpoints)
		ports = max(ports, len(sl.Ports))
	}
	if b.memo != nil && b.memo.m == nil {
		b.memo.m = make(map[epKey]epNames, n)
	}
	eps := scratchList(b.reuse, b.scratch.eps, n)
	var srvs []srvKey
	if svc.Type == Headless {
		srvs = scratchList(b.reuse, b.scratch.srvs, n*ports)
	}
	defer func() {
		b.scratch.eps = eps
		if srvs != nil { // a ClusterIP Service makes none: keep the list
			b.scratch.srvs = srvs
		}
	}()
	for sa := range servedAddrs(svc, epSlices) {
		e := b.endpointNames(*sa.ep, sa.addr, base)
		eps = append(eps, e)
		if svc.Type != Headless {
			continue
		}
		srvs = appendSRVKeys(srvs, sa.slice.Ports, e.host)
	}
	if b.distinct {
		return eps, srvs // no repeats; addService sorts what it publishes
	}
	return dedup(eps, compareServed), dedup(srvs, compareSRVKey)
}

// appendSRVKeys appends an endpoint's srvKey per port of its slice: an
// unnamed port's too, not one without a number or a named one without a
// protocol.
func appendSRVKeys(dst []srvKey, ports []Port, host string) []srvKey {
	for _, p := range ports {
		if p.Port != 0 && (p.Name == "" || p.Protocol != "") {
			dst = append(dst, srvKey{strings.ToLower(p.Name), p.Protocol, p.Port, host})
		}
	}
	return dst
}

// servedAddr is one served address of an endpoint of a slice.
type servedAddr struct {
	slice *EndpointSlice
	ep    *Endpoint
	addr  netip.Addr // unmapped
}

// servedAddrs yields the served endpoint addresses of svc's slices sls, in
// their order: every address of a ready endpoint, or of any endpoint with
// PublishNotReadyAddresses.
func servedAddrs(svc *Service, sls []*EndpointSlice) iter.Seq[servedAddr] {
	return func(yield func(servedAddr) bool) {
		for _, sl := range sls {
			for i := range sl.Endpoints {
				ep := &sl.Endpoints[i]
				if !ep.Ready && !svc.PublishNotReadyAddresses {
					continue
				}
				for _, a := range ep.Addresses {
					if !yield(servedAddr{sl, ep, a.Unmap()}) {
						return
					}
				}
			}
		}
	}
}

// dedupScan is the longest list dedup scans for repeats; a longer one is
// sorted, so that a Service of thousands of endpoints costs a build of
// O(n log n), not O(n²). A variable for the tests only.
var dedupScan = 32

// dedup removes the repeats of s in place: in its order when short, else
// sorted by cmp. The builds do not depend on the order.
func dedup[T comparable](s []T, cmp func(a, b T) int) []T {
	if len(s) > dedupScan {
		slices.SortFunc(s, cmp)
		return slices.Compact(s)
	}
	out := s[:0]
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// compareServed orders served endpoints by address, then name (the PTR
// name follows from the address).
func compareServed(a, b served) int {
	if c := a.addr.Compare(b.addr); c != 0 {
		return c
	}
	if c := strings.Compare(a.host, b.host); c != 0 {
		return c
	}
	return strings.Compare(a.ptr, b.ptr)
}

func compareSRVKey(a, b srvKey) int {
	return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.proto, b.proto),
		cmp.Compare(a.port, b.port), strings.Compare(a.target, b.target))
}

// addClusterIP adds the addresses, PTRs and named-port SRV records of a
// ClusterIP Service.
func (b *builder) addClusterIP(svc *Service, svcNode *pack.Draft, base string) {
	for _, ip := range svc.ClusterIPs {
		svcNode.AddAddr(ip)
		b.node(b.reverseName(ip)).AddPTR(base)
	}
	var bare []srvKey
	for _, p := range svc.Ports {
		if p.Port != 0 {
			bare = append(bare, srvKey{port: p.Port, target: base})
		}
		if p.Name == "" || p.Protocol == "" {
			continue
		}
		n := b.node(b.concat("_", strings.ToLower(p.Name), "._", p.Protocol, ".", base))
		n.AddSRV(SRV{Priority: 0, Weight: 100, Port: p.Port, Target: base})
	}
	svcNode.TakeSRV(b.bareSRV(bare))
}

// bareSRV is the SRV RRset at the bare Service name (a CoreDNS extension to
// the specification): one record per target and port number, named or not,
// whatever the protocol (CoreDNS keys its duplicates on target and port),
// weight 100/N, sorted by target and port.
func (b *builder) bareSRV(keys []srvKey) []SRV {
	if len(keys) == 0 {
		return nil
	}
	out := scratchList(b.reuse, b.scratch.bare, len(keys))
	for _, k := range keys {
		out = append(out, SRV{Port: k.port, Target: k.target})
	}
	b.scratch.bare = out
	// The keys differ by port name too: sorted, the repeats of a port
	// and target are neighbours.
	slices.SortFunc(out, compareSRV)
	out = slices.Compact(out)
	weighSRV(out)
	return out
}

// weighSRV gives each record of one RRset weight 100/N (at least 1) and
// sorts the set by target and port.
func weighSRV(g []SRV) {
	w := uint16(max(1, 100/len(g)))
	for i := range g {
		g[i].Weight = w
	}
	slices.SortFunc(g, compareSRV)
}

// compareSRV orders SRV records by target, then port.
func compareSRV(a, b SRV) int {
	if c := strings.Compare(a.Target, b.Target); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}

// addHeadlessSRV adds the SRV records of a headless Service: one per
// endpoint and named port, grouped by port, weight 100/N within a group.
// A variant's (suffix, variant.go) go under the SRV names and suffix; it
// returns those SRV names then.
func (b *builder) addHeadlessSRV(base, suffix string, srvs []srvKey) (variantNames []string) {
	// A Service has few named ports: the groups are found by a scan, and
	// each owner name is made once.
	type group struct {
		name, proto string
		n           int // its records, to size srv
		srv         []SRV
	}
	var groups []group
	find := func(k srvKey) int {
		return slices.IndexFunc(groups, func(g group) bool { return g.name == k.name && g.proto == k.proto })
	}
	for _, k := range srvs {
		if k.name == "" {
			continue
		}
		i := find(k)
		if i < 0 {
			i = len(groups)
			groups = append(groups, group{name: k.name, proto: k.proto})
		}
		groups[i].n++
	}
	total := 0
	for _, g := range groups {
		total += g.n
	}
	all := scratchList(b.reuse, b.scratch.named, total)[:total]
	b.scratch.named = all
	for i, off := 0, 0; i < len(groups); i++ {
		groups[i].srv = all[off : off : off+groups[i].n]
		off += groups[i].n
	}
	for _, k := range srvs {
		if k.name == "" {
			continue
		}
		g := &groups[find(k)]
		g.srv = append(g.srv, SRV{Port: k.port, Target: k.target})
	}
	for _, g := range groups {
		weighSRV(g.srv)
		if suffix == "" {
			b.node(b.concat("_", g.name, "._", g.proto, ".", base)).TakeSRV(g.srv)
			continue
		}
		name := "_" + g.name + "._" + g.proto + "." + base
		b.node(name + suffix).TakeSRV(g.srv)
		variantNames = append(variantNames, name)
	}
	return variantNames
}

// addPod adds the pod names of the verified mode and the pod IPs of the
// pod-by-IP index; in the other modes a pod only makes its namespace known.
func (b *builder) addPod(p *Pod) {
	ns := strings.ToLower(p.Namespace)
	if !b.expose(ns) || b.opts.Pods != PodsVerified {
		return
	}
	b.counts.Pods++
	for _, ip := range p.IPs {
		b.node(b.concat(DashedIP(ip), ".", ns, ".pod.", b.zone)).AddAddr(ip)
		b.podIPs = append(b.podIPs, podIP{ip.Unmap(), ns})
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

// maxLabel is the longest DNS label.
const maxLabel = 63

// appendEndpointLabel appends endpointLabel(ep, a, podNames) to dst.
func appendEndpointLabel(dst []byte, ep Endpoint, a netip.Addr, podNames bool) []byte {
	switch {
	case ep.Hostname != "" && len(ep.Hostname) <= maxLabel:
		return appendLower(dst, ep.Hostname)
	case podNames && ep.PodName != "" && len(ep.PodName) <= maxLabel:
		return appendLower(dst, ep.PodName)
	}
	return appendEndpointDashedIP(dst, a)
}

// appendLower appends strings.ToLower(s) to dst, without a copy of s when
// it is ASCII.
func appendLower(dst []byte, s string) []byte {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return append(dst, strings.ToLower(s)...)
		}
	}
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func endpointLabel(ep Endpoint, a netip.Addr, podNames bool) string {
	if ep.Hostname != "" && len(ep.Hostname) <= maxLabel {
		return strings.ToLower(ep.Hostname)
	}
	if podNames && ep.PodName != "" && len(ep.PodName) <= maxLabel {
		return strings.ToLower(ep.PodName)
	}
	return EndpointDashedIP(a)
}
