package store

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// ServiceType is how a Service is published in DNS.
type ServiceType uint8

// The Service types the store knows.
const (
	// ClusterIP Services answer with their clusterIPs.
	ClusterIP ServiceType = iota
	// Headless Services (clusterIP None) answer with their endpoint addresses.
	Headless
	// ExternalName Services answer with a CNAME.
	ExternalName
)

// Port is a Service or EndpointSlice port. Protocol is lowercase ("tcp",
// "udp", "sctp"); Name is empty for an unnamed port.
type Port struct {
	Name     string
	Protocol string
	Port     uint16
}

// Service is the slim form of a core/v1 Service.
type Service struct {
	Namespace string
	Name      string
	Type      ServiceType
	// ClusterIPs are every entry of spec.clusterIPs (dual-stack), unmapped.
	ClusterIPs []netip.Addr
	// ExternalName is the target of an ExternalName Service, a lowercase
	// fully qualified name with the trailing dot.
	ExternalName string
	Ports        []Port
	// PublishNotReadyAddresses serves endpoints that are not ready.
	PublishNotReadyAddresses bool
	// TrafficDistribution is spec.trafficDistribution: a headless
	// Service with PreferSameZone (PreferClose) or PreferSameNode answers
	// each client its nearest ready endpoints (variant.go).
	TrafficDistribution string
	// ExternalIPs are spec.externalIPs, then status.loadBalancer.ingress
	// IPs, unmapped: the addresses of the external zones (external.go).
	ExternalIPs []netip.Addr
}

// Endpoint is one endpoint of an EndpointSlice.
type Endpoint struct {
	Addresses []netip.Addr
	Hostname  string
	// PodName is targetRef.name when the target is a Pod.
	PodName string
	// Ready is the ready condition, true when the condition is absent.
	Ready bool
	// NodeName and TopologyZone are where the endpoint runs ("":
	// unknown): its nodeName and zone.
	NodeName     string
	TopologyZone string
}

// EndpointSlice is the slim form of a discovery/v1 EndpointSlice.
type EndpointSlice struct {
	Namespace string
	Name      string
	// Service is the kubernetes.io/service-name label.
	Service   string
	Ports     []Port
	Endpoints []Endpoint
}

// Pod is the slim form of a core/v1 Pod: only what pod records need.
type Pod struct {
	Namespace string
	Name      string
	IPs       []netip.Addr
	// NodeName places a client by its source address (podindex.go).
	NodeName string
}

// NodeTopology is the slim form of a core/v1 Node: its name and its
// topology.kubernetes.io/zone label ("" when absent).
type NodeTopology struct {
	Name         string
	TopologyZone string
}

// Namespace is the slim form of a core/v1 Namespace.
type Namespace struct {
	Name string
}

// Objects is a whole data set, as loaded from manifests.
type Objects struct {
	Services       []Service
	EndpointSlices []EndpointSlice
	Pods           []Pod
	Namespaces     []Namespace
	Nodes          []NodeTopology
}

// nsName is an object's namespace and name, as the records have them.
type nsName struct{ ns, name string }

func (v Service) key() nsName { return nsName{v.Namespace, v.Name} }
func (v Pod) key() nsName     { return nsName{v.Namespace, v.Name} }

// equal says whether s and o are the same slice: a relist's copy of a
// stored one touches nothing.
func (s *EndpointSlice) equal(o *EndpointSlice) bool {
	return s.Namespace == o.Namespace && s.Name == o.Name && s.Service == o.Service && slices.Equal(s.Ports, o.Ports) &&
		slices.EqualFunc(s.Endpoints, o.Endpoints, func(a, b Endpoint) bool {
			return slices.Equal(a.Addresses, b.Addresses) && a.Hostname == b.Hostname && a.PodName == b.PodName &&
				a.Ready == b.Ready && a.NodeName == b.NodeName && a.TopologyZone == b.TopologyZone
		})
}

// sliceRecord is what the Store keeps of an EndpointSlice beside its key
// (its namespace and name): its Service and ports, and its endpoints with
// their addresses packed in one string and their node and zone interned.
// At 150,000 endpoints (issue 71) an endpoint costs 56 bytes and its
// addresses' share of the string, where an Endpoint took 96 and an
// address slice beside it. The builds read it as the EndpointSlice it was
// made from (slice).
type sliceRecord struct {
	service string
	ports   []Port
	addrs   packedAddrs
	eps     []endpointRecord
}

// endpointRecord is an endpoint of a sliceRecord: n is the number of its
// addresses in the record's string, after those of the endpoints before.
type endpointRecord struct {
	host, pod  string
	node, zone interned
	n          uint32
	ready      bool
}

func newSliceRecord(v *EndpointSlice) sliceRecord {
	r := sliceRecord{service: v.Service, ports: v.Ports, eps: make([]endpointRecord, len(v.Endpoints))}
	var all []netip.Addr
	for i, ep := range v.Endpoints {
		r.eps[i] = endpointRecord{host: ep.Hostname, pod: ep.PodName, node: intern(ep.NodeName), zone: intern(ep.TopologyZone),
			n: uint32(len(ep.Addresses)), ready: ep.Ready}
		all = append(all, ep.Addresses...)
	}
	r.addrs = packAddrs(all)
	return r
}

// slice is the EndpointSlice of key k that r was made from.
func (r *sliceRecord) slice(k nsName) EndpointSlice {
	v := EndpointSlice{Namespace: k.ns, Name: k.name, Service: r.service, Ports: r.ports}
	if len(r.eps) == 0 {
		return v
	}
	all := r.addrs.addrs()
	v.Endpoints = make([]Endpoint, len(r.eps))
	for i, e := range r.eps {
		var addrs []netip.Addr
		if e.n > 0 {
			addrs, all = all[:e.n:e.n], all[e.n:]
		}
		v.Endpoints[i] = Endpoint{Addresses: addrs, Hostname: e.host, PodName: e.pod, Ready: e.ready,
			NodeName: e.node.String(), TopologyZone: e.zone.String()}
	}
	return v
}

// equal says whether r was made from a slice equal to v (of r's key).
func (r *sliceRecord) equal(v *EndpointSlice) bool {
	if r.service != v.Service || !slices.Equal(r.ports, v.Ports) || len(r.eps) != len(v.Endpoints) {
		return false
	}
	for i, ep := range v.Endpoints {
		e := &r.eps[i]
		if e.host != ep.Hostname || e.pod != ep.PodName || e.ready != ep.Ready || e.n != uint32(len(ep.Addresses)) ||
			e.node.String() != ep.NodeName || e.zone.String() != ep.TopologyZone {
			return false
		}
	}
	// The packed addresses against v's, endpoint after endpoint, read in
	// place: a relist compares every slice it lists.
	i, k := 0, 0 // v's endpoint, and its address next
	for ip := range r.addrs.all {
		for i < len(v.Endpoints) && k == len(v.Endpoints[i].Addresses) {
			i, k = i+1, 0
		}
		if i == len(v.Endpoints) || v.Endpoints[i].Addresses[k] != ip {
			return false
		}
		k++
	}
	for i < len(v.Endpoints) && k == len(v.Endpoints[i].Addresses) {
		i, k = i+1, 0
	}
	return i == len(v.Endpoints)
}

// podRecord is what the Store keeps of a Pod beside its key: the key
// holds its namespace and name once, its addresses are packed in a string
// and its node is interned. At 150,000 pods (issue 71) a map slot is 56
// bytes, not 72, and an address list is not allocated beside it.
type podRecord struct {
	ips  packedAddrs
	node interned
}

func newPodRecord(v Pod) podRecord { return podRecord{packAddrs(v.IPs), intern(v.NodeName)} }

// pod is the Pod of key k with the record r.
func (r podRecord) pod(k nsName) Pod {
	return Pod{Namespace: k.ns, Name: k.name, IPs: r.ips.addrs(), NodeName: r.node.String()}
}

// equal says whether r and o are the same pod record.
func (r *podRecord) equal(o *podRecord) bool { return *r == *o }

// packedAddrs is a list of addresses in one string: each one's binary
// form (netip.Addr.AppendBinary: 4 or 16 bytes, and an IPv6 zone after
// them) after its length as a uvarint. Two lists are equal when their
// packed forms are.
type packedAddrs string

func packAddrs(ips []netip.Addr) packedAddrs {
	if len(ips) == 0 {
		return ""
	}
	var buf [64]byte // a few addresses: the string is the one allocation
	b := buf[:0]
	for _, ip := range ips {
		n := len(b)
		b, _ = ip.AppendBinary(append(b, 0)) // never fails
		if size := len(b) - n - 1; size < 0x80 {
			b[n] = byte(size)
		} else { // a zone over 111 bytes: a longer length
			b, _ = ip.AppendBinary(binary.AppendUvarint(b[:n], uint64(size)))
		}
	}
	return packedAddrs(b)
}

// all yields the addresses p packs, in order.
func (p packedAddrs) all(yield func(netip.Addr) bool) {
	for s := string(p); s != ""; {
		n, w := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
		var ip netip.Addr
		_ = ip.UnmarshalBinary([]byte(s[w : w+int(n)])) // packAddrs made it
		if !yield(ip) {
			return
		}
		s = s[w+int(n):]
	}
}

// addrs is the list p packs, nil when it is empty.
func (p packedAddrs) addrs() []netip.Addr { return slices.Collect(p.all) }
