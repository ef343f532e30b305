package store

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// PodMode is how pod records (<dashed-ip>.<ns>.pod.<zone>) are answered, as
// CoreDNS's "pods" option.
type PodMode uint8

// The pod modes.
const (
	// PodsDisabled answers no pod records (NXDOMAIN).
	PodsDisabled PodMode = iota
	// PodsInsecure answers any well-formed dashed IP in an exposed namespace
	// without checking that such a pod exists (kube-dns behaviour).
	PodsInsecure
	// PodsVerified answers only IPs of pods that exist in that namespace.
	PodsVerified
)

// ParsePodMode parses "disabled", "insecure" or "verified".
func ParsePodMode(s string) (PodMode, error) {
	switch s {
	case "disabled":
		return PodsDisabled, nil
	case "insecure":
		return PodsInsecure, nil
	case "verified":
		return PodsVerified, nil
	}
	return 0, fmt.Errorf("pods mode %q: want disabled, insecure or verified", s)
}

func (m PodMode) String() string {
	switch m {
	case PodsInsecure:
		return "insecure"
	case PodsVerified:
		return "verified"
	}
	return "disabled"
}

// VersionTTL is the TTL of dns-version.<zone>, as CoreDNS.
const VersionTTL = 28800

// SchemaVersion is the version of the specification served.
const SchemaVersion = "1.1.0"

// MaxTTL is the largest --ttl accepted (CoreDNS's bound).
const MaxTTL = 3600

// Options shape what a Snapshot holds. They are the CoreDNS-parity options.
type Options struct {
	// Zone is the cluster domain, e.g. "cluster.local" (case and a trailing
	// dot do not matter).
	Zone string
	// TTL of every record but dns-version, and the SOA minimum.
	TTL uint32
	// Pods is the pod record mode.
	Pods PodMode
	// Namespaces, when not empty, are the only namespaces served.
	Namespaces []string
	// IgnoreEmptyService makes Services without a ready endpoint NXDOMAIN.
	IgnoreEmptyService bool
	// EndpointPodNames names endpoints without a hostname after their pod.
	EndpointPodNames bool
	// NoEndpoints serves no endpoint records: headless Services and endpoint
	// names are NXDOMAIN.
	NoEndpoints bool
}

// ErrBadOptions is wrapped by New for invalid Options.
var ErrBadOptions = errors.New("store: bad options")

// Store holds the slim records and publishes Snapshots. Its methods are safe
// for concurrent use. Mutations take effect for readers at the next Publish.
type Store struct {
	zone string // lowercase, trailing dot

	mu         sync.Mutex
	opts       Options
	exposed    map[string]struct{}
	services   map[nsName]Service
	slices     map[nsName]EndpointSlice
	pods       map[nsName]Pod
	namespaces map[string]struct{}
	serial     uint32

	snap atomic.Pointer[Snapshot]
}

type nsName struct{ ns, name string }

// New returns an empty Store. Snapshot returns nil until the first Publish,
// which is how the wire layer knows the first sync has not happened.
func New(opts Options) (*Store, error) {
	zone, err := checkOptions(opts)
	if err != nil {
		return nil, err
	}
	s := &Store{
		opts:       opts,
		zone:       zone,
		exposed:    exposedSet(opts.Namespaces),
		services:   map[nsName]Service{},
		slices:     map[nsName]EndpointSlice{},
		pods:       map[nsName]Pod{},
		namespaces: map[string]struct{}{},
	}
	return s, nil
}

// checkOptions validates opts and returns the lowercase zone with its
// trailing dot.
func checkOptions(opts Options) (string, error) {
	zone := strings.ToLower(strings.TrimSuffix(opts.Zone, "."))
	if zone == "" || strings.HasPrefix(zone, ".") || strings.Contains(zone, "..") {
		return "", fmt.Errorf("%w: zone %q", ErrBadOptions, opts.Zone)
	}
	if opts.TTL > MaxTTL {
		return "", fmt.Errorf("%w: ttl %d above %d", ErrBadOptions, opts.TTL, MaxTTL)
	}
	return zone + ".", nil
}

// exposedSet is the namespace filter of names (nil: every namespace).
func exposedSet(names []string) map[string]struct{} {
	if len(names) == 0 {
		return nil
	}
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[strings.ToLower(n)] = struct{}{}
	}
	return set
}

// Options returns the options the Store builds snapshots with.
func (s *Store) Options() Options {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts
}

// SetOptions changes the options of the snapshots built from now on (a
// config reload): the next Publish applies them to the records the Store
// holds. The zone cannot change: its names index the records.
func (s *Store) SetOptions(opts Options) error {
	zone, err := checkOptions(opts)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if zone != s.zone {
		return fmt.Errorf("%w: zone %q: the store serves %q", ErrBadOptions, opts.Zone, s.zone)
	}
	s.opts, s.exposed = opts, exposedSet(opts.Namespaces)
	return nil
}

// Zone returns the lowercase cluster zone with its trailing dot.
func (s *Store) Zone() string { return s.zone }

// SetService adds or replaces a Service.
func (s *Store) SetService(v Service) {
	s.mu.Lock()
	s.services[nsName{v.Namespace, v.Name}] = v
	s.mu.Unlock()
}

// DeleteService removes a Service.
func (s *Store) DeleteService(ns, name string) {
	s.mu.Lock()
	delete(s.services, nsName{ns, name})
	s.mu.Unlock()
}

// SetEndpointSlice adds or replaces an EndpointSlice.
func (s *Store) SetEndpointSlice(v EndpointSlice) {
	s.mu.Lock()
	s.slices[nsName{v.Namespace, v.Name}] = v
	s.mu.Unlock()
}

// DeleteEndpointSlice removes an EndpointSlice.
func (s *Store) DeleteEndpointSlice(ns, name string) {
	s.mu.Lock()
	delete(s.slices, nsName{ns, name})
	s.mu.Unlock()
}

// SetPod adds or replaces a Pod.
func (s *Store) SetPod(v Pod) {
	s.mu.Lock()
	s.pods[nsName{v.Namespace, v.Name}] = v
	s.mu.Unlock()
}

// DeletePod removes a Pod.
func (s *Store) DeletePod(ns, name string) {
	s.mu.Lock()
	delete(s.pods, nsName{ns, name})
	s.mu.Unlock()
}

// SetNamespace adds a Namespace.
func (s *Store) SetNamespace(v Namespace) {
	s.mu.Lock()
	s.namespaces[v.Name] = struct{}{}
	s.mu.Unlock()
}

// DeleteNamespace removes a Namespace (not the objects in it).
func (s *Store) DeleteNamespace(name string) {
	s.mu.Lock()
	delete(s.namespaces, name)
	s.mu.Unlock()
}

// Replace swaps the whole data set, as a manifest reload does.
func (s *Store) Replace(o Objects) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.services = make(map[nsName]Service, len(o.Services))
	for _, v := range o.Services {
		s.services[nsName{v.Namespace, v.Name}] = v
	}
	s.slices = make(map[nsName]EndpointSlice, len(o.EndpointSlices))
	for _, v := range o.EndpointSlices {
		s.slices[nsName{v.Namespace, v.Name}] = v
	}
	s.pods = make(map[nsName]Pod, len(o.Pods))
	for _, v := range o.Pods {
		s.pods[nsName{v.Namespace, v.Name}] = v
	}
	s.namespaces = make(map[string]struct{}, len(o.Namespaces))
	for _, v := range o.Namespaces {
		s.namespaces[v.Name] = struct{}{}
	}
}

// Snapshot returns the current Snapshot, nil before the first Publish.
func (s *Store) Snapshot() *Snapshot { return s.snap.Load() }

// Publish builds a Snapshot of the current records and swaps it in.
func (s *Store) Publish() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	serial := uint32(time.Now().Unix())
	if serial <= s.serial {
		serial = s.serial + 1
	}
	s.serial = serial
	snap := s.build(serial)
	s.snap.Store(snap)
	return snap
}

// SRV is the data of one SRV record.
type SRV struct {
	Priority uint16
	Weight   uint16
	Port     uint16
	// Target is a lowercase fully qualified name inside the zone.
	Target string
}

// Node is one name of a Snapshot. A Node without data is an empty
// non-terminal: the name exists (NOERROR, no answer) but holds no records.
type Node struct {
	A     []netip.Addr
	AAAA  []netip.Addr
	SRV   []SRV
	CNAME string
	PTR   []string
	TXT   []string
	// TTL of the node's records.
	TTL uint32
}

// Counts are the sizes of a Snapshot, for metrics.
type Counts struct {
	Services       int
	EndpointSlices int
	Endpoints      int
	Pods           int
	Namespaces     int
	Names          int
}

// Snapshot is an immutable view of the records. Callers must not modify it or
// anything reachable from it.
type Snapshot struct {
	// Zone is the lowercase cluster zone with its trailing dot.
	Zone string
	// Options the snapshot was built with.
	Options Options
	// Serial is the SOA serial: it grows with every Publish.
	Serial uint32
	Counts Counts

	names      map[string]*Node
	namespaces map[string]struct{}
	exposed    map[string]struct{}
	podNS      map[netip.Addr]string // verified mode: pod IP → namespace, "" when two namespaces share the IP
}

// PodNamespace returns the namespace of the pod with IP ip (pods verified
// only). An IP that pods of two namespaces claim (a reused IP the watch has
// not caught up with yet) is reported as unknown.
func (s *Snapshot) PodNamespace(ip netip.Addr) (string, bool) {
	ns, ok := s.podNS[ip.Unmap()]
	return ns, ok && ns != ""
}

// Lookup returns the node of a lowercase fully qualified name (with the
// trailing dot).
func (s *Snapshot) Lookup(name string) (*Node, bool) {
	n, ok := s.names[name]
	return n, ok
}

// NamespaceExposed reports whether the namespace filter lets ns through.
func (s *Snapshot) NamespaceExposed(ns string) bool {
	if s.exposed == nil {
		return true
	}
	_, ok := s.exposed[ns]
	return ok
}

// HasNamespace reports whether ns is known (a Namespace object or any object
// in it) and exposed.
func (s *Snapshot) HasNamespace(ns string) bool {
	_, ok := s.namespaces[ns]
	return ok
}

// Names calls f for every name of the snapshot, in no particular order.
func (s *Snapshot) Names(f func(name string, n *Node)) {
	for k, v := range s.names {
		f(k, v)
	}
}

// builder makes one Snapshot from the records of a Store (s.mu held).
type builder struct {
	zone  string
	ttl   uint32
	opts  Options
	snap  *Snapshot
	names map[string]*Node
	// ent is the one Node shared by every empty non-terminal.
	ent *Node
}

// node returns the node of name for adding data, creating it and, for names
// inside the zone, every missing ancestor down to the zone as empty
// non-terminals.
func (b *builder) node(name string) *Node {
	n, ok := b.names[name]
	if ok && n != b.ent {
		return n
	}
	n = &Node{TTL: b.ttl}
	b.names[name] = n
	if !ok {
		b.ancestors(name)
	}
	return n
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

func addAddr(n *Node, a netip.Addr) {
	a = a.Unmap()
	if a.Is4() {
		if !slices.Contains(n.A, a) {
			n.A = append(n.A, a)
		}
		return
	}
	if !slices.Contains(n.AAAA, a) {
		n.AAAA = append(n.AAAA, a)
	}
}

func addPTR(n *Node, target string) {
	if !slices.Contains(n.PTR, target) {
		n.PTR = append(n.PTR, target)
	}
}

// served is an endpoint address published under a Service.
type served struct {
	addr  netip.Addr
	label string
}

// srvKey is one SRV record of a Service: a port (name empty when unnamed)
// of an endpoint or of the Service (target).
type srvKey struct {
	name, proto string
	port        uint16
	target      string
}

// build makes a Snapshot. s.mu is held.
func (s *Store) build(serial uint32) *Snapshot {
	b := s.newBuilder(serial)
	for ns := range s.namespaces {
		b.expose(strings.ToLower(ns))
	}
	b.addFixedNames()
	bySvc := b.slicesByService(s.slices)
	for _, svc := range s.services {
		b.addService(&svc, bySvc[nsName{svc.Namespace, svc.Name}])
	}
	b.addPods(s.pods)
	b.addNamespaceNames()
	return b.finish()
}

func (s *Store) newBuilder(serial uint32) *builder {
	opts := s.opts
	return &builder{
		zone:  s.zone,
		ttl:   opts.TTL,
		opts:  opts,
		names: make(map[string]*Node, 4*len(s.services)+2*len(s.pods)+16),
		ent:   &Node{TTL: opts.TTL},
		snap: &Snapshot{
			Zone:       s.zone,
			Options:    opts,
			Serial:     serial,
			namespaces: map[string]struct{}{},
			exposed:    s.exposed,
		},
	}
}

// expose records ns as a known namespace when the namespace filter lets it
// through, and reports whether it does.
func (b *builder) expose(ns string) bool {
	if b.snap.NamespaceExposed(ns) {
		b.snap.namespaces[ns] = struct{}{}
		return true
	}
	return false
}

// addFixedNames adds the apex, dns-version and the svc and pod subtrees.
func (b *builder) addFixedNames() {
	b.names[b.zone] = &Node{TTL: b.ttl}
	b.node("dns-version." + b.zone).TXT = []string{SchemaVersion}
	b.names["dns-version."+b.zone].TTL = VersionTTL
	b.ensure("svc." + b.zone)
	b.ensure("pod." + b.zone)
}

// slicesByService groups the endpoint slices by Service, in the order of
// their namespace and name (none with NoEndpoints).
func (b *builder) slicesByService(all map[nsName]EndpointSlice) map[nsName][]*EndpointSlice {
	bySvc := map[nsName][]*EndpointSlice{}
	if b.opts.NoEndpoints {
		return bySvc
	}
	keys := make([]nsName, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b nsName) int {
		if c := strings.Compare(a.ns, b.ns); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for _, k := range keys {
		sl := all[k]
		if sl.Service == "" {
			continue
		}
		sk := nsName{sl.Namespace, sl.Service}
		bySvc[sk] = append(bySvc[sk], &sl)
		b.snap.Counts.EndpointSlices++
	}
	return bySvc
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
	base := name + "." + ns + ".svc." + b.zone
	if svc.Type == ExternalName {
		b.ensure(ns + ".svc." + b.zone)
		b.node(base).CNAME = svc.ExternalName
		b.snap.Counts.Services++
		return
	}
	eps, srvs := b.servedEndpoints(svc, epSlices, base)
	if b.opts.IgnoreEmptyService && len(eps) == 0 {
		return
	}
	b.snap.Counts.Services++
	if svc.Type == Headless && len(eps) == 0 {
		// A headless Service without a served endpoint has no name (as
		// CoreDNS: NXDOMAIN, not NODATA); its namespace still exists.
		b.ensure(ns + ".svc." + b.zone)
		return
	}
	b.snap.Counts.Endpoints += len(eps)
	b.ensure(ns + ".svc." + b.zone)
	svcNode := b.node(base)
	switch svc.Type {
	case ClusterIP:
		b.addClusterIP(svc, svcNode, base)
	case Headless:
		for _, e := range eps {
			addAddr(svcNode, e.addr)
		}
		b.addHeadlessSRV(base, srvs)
		svcNode.SRV = bareSRV(srvs)
	}
	// Endpoint names and PTRs, for every Service with endpoints (as
	// CoreDNS does).
	for _, e := range eps {
		host := e.label + "." + base
		addAddr(b.node(host), e.addr)
		addPTR(b.node(ReverseName(e.addr)), host)
	}
}

// servedEndpoints collects the endpoints served under a Service (ready ones,
// or all with PublishNotReadyAddresses), deduplicated, and for a headless
// Service one srvKey per endpoint and port (name empty for unnamed ports).
func (b *builder) servedEndpoints(svc *Service, epSlices []*EndpointSlice, base string) ([]served, []srvKey) {
	var eps []served
	var srvs []srvKey
	for _, sl := range epSlices {
		for _, ep := range sl.Endpoints {
			if !ep.Ready && !svc.PublishNotReadyAddresses {
				continue
			}
			for _, a := range ep.Addresses {
				a = a.Unmap()
				label := endpointLabel(ep, a, b.opts.EndpointPodNames)
				if e := (served{addr: a, label: label}); !slices.Contains(eps, e) {
					eps = append(eps, e)
				}
				if svc.Type != Headless {
					continue
				}
				for _, p := range sl.Ports {
					if p.Port == 0 || (p.Name != "" && p.Protocol == "") {
						continue
					}
					k := srvKey{strings.ToLower(p.Name), p.Protocol, p.Port, label + "." + base}
					if !slices.Contains(srvs, k) {
						srvs = append(srvs, k)
					}
				}
			}
		}
	}
	return eps, srvs
}

// addClusterIP adds the addresses, PTRs and named-port SRV records of a
// ClusterIP Service.
func (b *builder) addClusterIP(svc *Service, svcNode *Node, base string) {
	for _, ip := range svc.ClusterIPs {
		addAddr(svcNode, ip)
		addPTR(b.node(ReverseName(ip)), base)
	}
	var bare []srvKey
	for _, p := range svc.Ports {
		if p.Port != 0 {
			bare = append(bare, srvKey{port: p.Port, target: base})
		}
		if p.Name == "" || p.Protocol == "" {
			continue
		}
		n := b.node("_" + strings.ToLower(p.Name) + "._" + p.Protocol + "." + base)
		n.SRV = append(n.SRV, SRV{Priority: 0, Weight: 100, Port: p.Port, Target: base})
	}
	svcNode.SRV = bareSRV(bare)
}

// bareSRV is the SRV RRset at the bare Service name (a CoreDNS extension to
// the specification): one record per target and port number, named or not,
// whatever the protocol (CoreDNS keys its duplicates on target and port),
// weight 100/N, sorted by target and port.
func bareSRV(keys []srvKey) []SRV {
	var out []SRV
	for _, k := range keys {
		s := SRV{Port: k.port, Target: k.target}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	w := uint16(max(1, 100/len(out)))
	for i := range out {
		out[i].Weight = w
	}
	slices.SortFunc(out, func(a, b SRV) int {
		if c := strings.Compare(a.Target, b.Target); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	return slices.Clip(out)
}

// addHeadlessSRV adds the SRV records of a headless Service: one per
// endpoint and named port, grouped by port, weight 100/N within a group.
func (b *builder) addHeadlessSRV(base string, srvs []srvKey) {
	groups := map[string][]SRV{}
	var order []string
	for _, k := range srvs {
		if k.name == "" {
			continue
		}
		owner := "_" + k.name + "._" + k.proto + "." + base
		if _, ok := groups[owner]; !ok {
			order = append(order, owner)
		}
		groups[owner] = append(groups[owner], SRV{Port: k.port, Target: k.target})
	}
	for _, owner := range order {
		g := groups[owner]
		w := uint16(100 / len(g))
		if w == 0 {
			w = 1
		}
		for i := range g {
			g[i].Weight = w
		}
		slices.SortFunc(g, func(a, b SRV) int {
			if c := strings.Compare(a.Target, b.Target); c != 0 {
				return c
			}
			return int(a.Port) - int(b.Port)
		})
		n := b.node(owner)
		n.SRV = append(n.SRV, g...)
	}
}

// addPods adds the pod names of the verified mode and the pod-by-IP index;
// in the other modes pods only make their namespaces known.
func (b *builder) addPods(pods map[nsName]Pod) {
	if b.opts.Pods != PodsVerified {
		for _, p := range pods {
			b.expose(strings.ToLower(p.Namespace))
		}
		return
	}
	podNS := make(map[netip.Addr]string, len(pods))
	b.snap.podNS = podNS
	for _, p := range pods {
		ns := strings.ToLower(p.Namespace)
		if !b.expose(ns) {
			continue
		}
		b.snap.Counts.Pods++
		for _, ip := range p.IPs {
			addAddr(b.node(DashedIP(ip)+"."+ns+".pod."+b.zone), ip)
			if have, dup := podNS[ip.Unmap()]; dup && have != ns {
				podNS[ip.Unmap()] = ""
			} else {
				podNS[ip.Unmap()] = ns
			}
		}
	}
}

// addNamespaceNames makes <ns>.svc.<zone> (and <ns>.pod.<zone> unless pods
// are disabled) exist for every known namespace.
func (b *builder) addNamespaceNames() {
	for ns := range b.snap.namespaces {
		b.ensure(ns + ".svc." + b.zone)
		if b.opts.Pods != PodsDisabled {
			b.ensure(ns + ".pod." + b.zone)
		}
	}
}

// finish sorts the record data of every node and completes the Snapshot.
func (b *builder) finish() *Snapshot {
	for _, n := range b.names {
		if n == b.ent {
			continue
		}
		slices.SortFunc(n.A, netip.Addr.Compare)
		slices.SortFunc(n.AAAA, netip.Addr.Compare)
		slices.Sort(n.PTR)
	}
	snap := b.snap
	snap.names = b.names
	snap.Counts.Namespaces = len(snap.namespaces)
	snap.Counts.Names = len(b.names)
	return snap
}

// maxLabel is the longest DNS label.
const maxLabel = 63

func endpointLabel(ep Endpoint, a netip.Addr, podNames bool) string {
	if ep.Hostname != "" && len(ep.Hostname) <= maxLabel {
		return strings.ToLower(ep.Hostname)
	}
	if podNames && ep.PodName != "" && len(ep.PodName) <= maxLabel {
		return strings.ToLower(ep.PodName)
	}
	return DashedIP(a)
}
