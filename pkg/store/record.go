package store

import (
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

// podRecord is what the Store keeps of a Pod beside its key: the key
// holds its namespace and name once (issue 71: 150,000 pods).
type podRecord struct {
	ips  []netip.Addr
	node string
}

// pod is the Pod of key k with the record r.
func (r podRecord) pod(k nsName) Pod {
	return Pod{Namespace: k.ns, Name: k.name, IPs: r.ips, NodeName: r.node}
}

// equal says whether r and o are the same pod record.
func (r *podRecord) equal(o *podRecord) bool { return r.node == o.node && slices.Equal(r.ips, o.ips) }
