package kubefeed

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/fqdn"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// serviceNameLabel links an EndpointSlice to its Service.
const serviceNameLabel = discoveryv1.LabelServiceName

func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("address %q has a zone", s)
	}
	return a.Unmap(), nil
}

// protocol is the lowercase protocol of a port: TCP (the default), UDP or
// SCTP, as the API server allows (in any case, for manifests).
func protocol(p corev1.Protocol) (string, error) {
	// The constants, not a lowercase copy: a record keeps no string of
	// its own for them.
	for _, s := range [...]string{"tcp", "udp", "sctp"} {
		if strings.EqualFold(string(p), s) {
			return s, nil
		}
	}
	if p == "" {
		return "tcp", nil
	}
	return "", fmt.Errorf("%q: want TCP, UDP or SCTP", p)
}

// Names become DNS names: convert refuses those the API server of the
// newest release refuses (a manifest is not validated by it), and the few
// it stores that a DNS message cannot carry, so that every name in the
// store is one it can.

// Kinds of objects, as ObjectError.Kind and the kind label of
// objects_skipped_total.
const (
	KindService       = "service"
	KindEndpointSlice = "endpointslice"
	KindPod           = "pod"
	KindNamespace     = "namespace"
	KindNode          = "node"
)

// Reasons an object is skipped: the reason label of objects_skipped_total.
const (
	// ReasonInvalidName: metadata.name or metadata.namespace is empty or
	// not a name DNS can serve.
	ReasonInvalidName = "invalid-name"
	// ReasonInvalidField: another field, such as an address, a port, a
	// protocol, a hostname or an ExternalName.
	ReasonInvalidField = "invalid-field"
	// ReasonMissingLabel: a manifest's EndpointSlice without the
	// kubernetes.io/service-name label.
	ReasonMissingLabel = "missing-label"
	// ReasonDecode: a manifest document that does not decode (YAML, JSON,
	// a strict field error, no kind), or the rest of a YAML stream that
	// cannot be split.
	ReasonDecode = "decode"
	// ReasonUnreadable: a manifest file that cannot be read.
	ReasonUnreadable = "unreadable"
	// ReasonTooLarge: a manifest file larger than MaxManifestSize.
	ReasonTooLarge = "too-large"
)

// ObjectError is why an object does not convert: the field and what is
// wrong with it.
type ObjectError struct {
	Kind      string // KindService, KindEndpointSlice, KindPod, KindNamespace or KindNode
	Namespace string // "" for a Namespace or a Node
	Name      string
	UID       types.UID // the API server's, for an Event on the object
	Field     string    // such as metadata.name or spec.ports[1].protocol
	Err       error
}

// Error is "service prod/web: spec.ports[1].protocol "QUIC": want TCP, UDP
// or SCTP".
func (e *ObjectError) Error() string {
	return e.Object() + ": " + e.Problem()
}

// Object names the object: "service prod/web", "namespace prod", or the
// kind alone when the name is empty.
func (e *ObjectError) Object() string {
	switch {
	case e.Name == "":
		return e.Kind
	case e.Kind == KindNamespace || e.Kind == KindNode:
		return e.Kind + " " + e.Name
	}
	return e.Kind + " " + e.Namespace + "/" + e.Name
}

// Problem is the field and what is wrong with it, without the object.
func (e *ObjectError) Problem() string { return e.Field + " " + e.Err.Error() }

func (e *ObjectError) Unwrap() error { return e.Err }

// Reason is the reason label of the error: ReasonInvalidName for the
// object's name and namespace, ReasonMissingLabel for a label,
// ReasonInvalidField otherwise.
func (e *ObjectError) Reason() string {
	switch {
	case e.Field == "metadata.name" || e.Field == "metadata.namespace":
		return ReasonInvalidName
	case strings.HasPrefix(e.Field, "metadata.labels"):
		return ReasonMissingLabel
	}
	return ReasonInvalidField
}

// objectErr returns the ObjectError of field of m, an object of kind.
func objectErr(kind string, m metav1.Object, field string, err error) *ObjectError {
	e := &ObjectError{Kind: kind, Name: m.GetName(), UID: m.GetUID(), Field: field, Err: err}
	if kind != KindNamespace && kind != KindNode {
		e.Namespace = namespaceOf(m)
	}
	return e
}

var errEmpty = errors.New("is empty")

// checkName returns why value fails check (an API server name rule), or
// nil.
func checkName(value string, check func(string) []string) error {
	if msgs := check(value); len(msgs) > 0 {
		return fmt.Errorf("%q: %s", value, strings.Join(msgs, "; "))
	}
	return nil
}

// checkHostname returns why name (no trailing dot) is not a DNS-1123
// subdomain of labels DNS can carry (63 bytes each), or nil.
func checkHostname(name string) error {
	if err := checkName(name, fqdn.Subdomain); err != nil {
		return err
	}
	for _, l := range strings.Split(name, ".") {
		if len(l) > fqdn.MaxLabelLength {
			return fmt.Errorf("%q: label %q longer than %d bytes", name, l, fqdn.MaxLabelLength)
		}
	}
	return nil
}

// checkMeta returns the metadata field of a namespaced object that is
// refused, and why: no name, a name that is not a DNS-1123 label (when
// nameLabel: a Service's), or a namespace that is not one.
func checkMeta(name, namespace string, nameLabel bool) (field string, err error) {
	if name == "" {
		return "metadata.name", errEmpty
	}
	if nameLabel {
		if err := checkName(name, fqdn.Label); err != nil {
			return "metadata.name", err
		}
	}
	if err := checkName(namespace, fqdn.Label); err != nil {
		return "metadata.namespace", err
	}
	return "", nil
}

// checkPort returns the lowercase protocol of port i of a list (list, e.g.
// "spec.ports"), or the field (list[i].port, list[i].name or
// list[i].protocol) and why its number (1-65535), name (empty or a
// DNS-1123 label) or protocol is refused.
func checkPort(list string, i int, port int32, name string, p corev1.Protocol) (proto, field string, err error) {
	if port <= 0 || port > 65535 {
		return "", fmt.Sprintf("%s[%d].port", list, i), fmt.Errorf("%d out of range", port)
	}
	if name != "" {
		if err := checkName(name, fqdn.Label); err != nil {
			return "", fmt.Sprintf("%s[%d].name", list, i), err
		}
	}
	if proto, err = protocol(p); err != nil {
		return "", fmt.Sprintf("%s[%d].protocol", list, i), err
	}
	return proto, "", nil
}

// intern returns the one copy of a string many records repeat (a
// namespace, a port name), so that each record does not keep its own.
func intern(s string) string { return unique.Make(s).Value() }

// ToService converts a Service to its slim record. Its name is a DNS-1123
// label, as the API server accepts since Kubernetes 1.36 (KEP-5311: "1web"
// is a Service name; older releases stored DNS-1035 labels only, a
// subset). Errors are *ObjectError.
func ToService(s *corev1.Service) (store.Service, error) {
	out := store.Service{
		Namespace:                namespaceOf(s),
		Name:                     s.Name,
		PublishNotReadyAddresses: s.Spec.PublishNotReadyAddresses,
	}
	if td := s.Spec.TrafficDistribution; td != nil {
		out.TrafficDistribution = intern(*td)
	}
	bad := func(field string, err error) (store.Service, error) {
		return out, objectErr(KindService, s, field, err)
	}
	if field, err := checkMeta(s.Name, out.Namespace, true); err != nil {
		return bad(field, err)
	}
	for i, p := range s.Spec.Ports {
		proto, field, err := checkPort("spec.ports", i, p.Port, p.Name, p.Protocol)
		if err != nil {
			return bad(field, err)
		}
		out.Ports = append(out.Ports, store.Port{Name: intern(p.Name), Protocol: proto, Port: uint16(p.Port)})
	}
	switch {
	case s.Spec.Type == corev1.ServiceTypeExternalName:
		out.Type = store.ExternalName
		out.Ports = nil
		name := strings.ToLower(strings.TrimSpace(s.Spec.ExternalName))
		if name == "" {
			return bad("spec.externalName", errEmpty)
		}
		// The API server checks a DNS-1123 subdomain but not the length
		// of its labels: it stores names DNS cannot carry.
		if err := checkHostname(strings.TrimSuffix(name, ".")); err != nil {
			return bad("spec.externalName", err)
		}
		out.ExternalName = strings.TrimSuffix(name, ".") + "."
	case s.Spec.ClusterIP == corev1.ClusterIPNone:
		out.Type = store.Headless
	default:
		out.Type = store.ClusterIP
		ips := s.Spec.ClusterIPs
		field := "spec.clusterIPs"
		if len(ips) == 0 && s.Spec.ClusterIP != "" {
			ips, field = []string{s.Spec.ClusterIP}, "spec.clusterIP"
		}
		for i, ip := range ips {
			if ip == "" || ip == corev1.ClusterIPNone {
				continue
			}
			a, err := parseIP(ip)
			if err != nil {
				return bad(fmt.Sprintf("%s[%d]", field, i), fmt.Errorf("%q: %w", ip, err))
			}
			out.ClusterIPs = append(out.ClusterIPs, a)
		}
	}
	if out.Type != store.ExternalName {
		out.ExternalIPs = externalIPs(s)
	}
	return out, nil
}

// externalIPs are a Service's spec.externalIPs, then its LoadBalancer
// ingress IPs: the addresses CoreDNS's k8s_external answers. One that
// does not parse is left out (the API server checks spec.externalIPs; a
// controller writes the status), not the whole Service. A hostname
// ingress is left out too: CoreDNS answers it with a CNAME.
func externalIPs(s *corev1.Service) []netip.Addr {
	var out []netip.Addr
	add := func(ip string) {
		if a, err := parseIP(ip); err == nil {
			out = append(out, a)
		}
	}
	for _, ip := range s.Spec.ExternalIPs {
		add(ip)
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			add(in.IP)
		}
	}
	return out
}

// ToEndpointSlice converts an EndpointSlice to its slim record. FQDN slices
// carry no addresses for DNS and convert to a slice without endpoints.
// Errors are *ObjectError.
func ToEndpointSlice(s *discoveryv1.EndpointSlice) (store.EndpointSlice, error) {
	out := store.EndpointSlice{
		Namespace: namespaceOf(s),
		Name:      s.Name,
		Service:   s.Labels[serviceNameLabel],
	}
	bad := func(field string, err error) (store.EndpointSlice, error) {
		return out, objectErr(KindEndpointSlice, s, field, err)
	}
	if field, err := checkMeta(s.Name, out.Namespace, false); err != nil {
		return bad(field, err)
	}
	for i, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		sp := store.Port{Port: uint16(*p.Port)}
		var proto corev1.Protocol
		if p.Name != nil {
			sp.Name = intern(*p.Name)
		}
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		var field string
		var err error
		if sp.Protocol, field, err = checkPort("ports", i, *p.Port, sp.Name, proto); err != nil {
			return bad(field, err)
		}
		out.Ports = append(out.Ports, sp)
	}
	if s.AddressType == discoveryv1.AddressTypeFQDN {
		return out, nil
	}
	// One array holds every endpoint's addresses.
	n := 0
	for _, ep := range s.Endpoints {
		n += len(ep.Addresses)
	}
	addrs := make([]netip.Addr, 0, n)
	out.Endpoints = make([]store.Endpoint, 0, len(s.Endpoints))
	for i, ep := range s.Endpoints {
		e := store.Endpoint{Ready: ep.Conditions.Ready == nil || *ep.Conditions.Ready}
		// Where it runs: a few names many endpoints repeat.
		if ep.NodeName != nil {
			e.NodeName = intern(*ep.NodeName)
		}
		if ep.Zone != nil {
			e.TopologyZone = intern(*ep.Zone)
		}
		if ep.Hostname != nil && *ep.Hostname != "" {
			if err := checkName(*ep.Hostname, fqdn.Label); err != nil {
				return bad(fmt.Sprintf("endpoints[%d].hostname", i), err)
			}
			e.Hostname = *ep.Hostname
		}
		// The API server does not check targetRef.name: a name that is not
		// a pod name is not used (the endpoint gets its dashed IP).
		if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && len(fqdn.Subdomain(ep.TargetRef.Name)) == 0 {
			e.PodName = ep.TargetRef.Name
		}
		first := len(addrs)
		for j, a := range ep.Addresses {
			ip, err := parseIP(a)
			if err != nil {
				return bad(fmt.Sprintf("endpoints[%d].addresses[%d]", i, j), fmt.Errorf("%q: %w", a, err))
			}
			addrs = append(addrs, ip)
		}
		if len(addrs) > first {
			e.Addresses = addrs[first:len(addrs):len(addrs)]
		}
		out.Endpoints = append(out.Endpoints, e)
	}
	return out, nil
}

// ToPod converts a Pod to its slim record. ok is false for pods that have
// finished (Succeeded, Failed): their IPs may already belong to another pod.
// Errors are *ObjectError.
func ToPod(p *corev1.Pod) (pod store.Pod, ok bool, err error) {
	pod = store.Pod{Namespace: namespaceOf(p), Name: p.Name, NodeName: intern(p.Spec.NodeName)}
	bad := func(field string, err error) (store.Pod, bool, error) {
		return pod, false, objectErr(KindPod, p, field, err)
	}
	if field, err := checkMeta(p.Name, pod.Namespace, false); err != nil {
		return bad(field, err)
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return pod, false, nil
	}
	ips := make([]string, 0, len(p.Status.PodIPs))
	field := "status.podIPs"
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips, field = []string{p.Status.PodIP}, "status.podIP"
	}
	for i, ip := range ips {
		a, err := parseIP(ip)
		if err != nil {
			return bad(fmt.Sprintf("%s[%d]", field, i), fmt.Errorf("%q: %w", ip, err))
		}
		pod.IPs = append(pod.IPs, a)
	}
	return pod, true, nil
}

// ToNode converts a Node to what the store keeps of it: its name and its
// topology zone label. Errors are *ObjectError.
func ToNode(n *corev1.Node) (store.NodeTopology, error) {
	if n.Name == "" {
		return store.NodeTopology{}, objectErr(KindNode, n, "metadata.name", errEmpty)
	}
	return store.NodeTopology{Name: n.Name, TopologyZone: intern(n.Labels[corev1.LabelTopologyZone])}, nil
}

// ToNamespace converts a Namespace to its record. Errors are *ObjectError.
func ToNamespace(n *corev1.Namespace) (store.Namespace, error) {
	if n.Name == "" {
		return store.Namespace{}, objectErr(KindNamespace, n, "metadata.name", errEmpty)
	}
	if err := checkName(n.Name, fqdn.Label); err != nil {
		return store.Namespace{}, objectErr(KindNamespace, n, "metadata.name", err)
	}
	return store.Namespace{Name: n.Name}, nil
}

func namespaceOf(m metav1.Object) string { return defaultNamespace(m.GetNamespace()) }

// defaultNamespace is ns, "default" when it is empty, interned.
func defaultNamespace(ns string) string {
	if ns == "" {
		return metav1.NamespaceDefault
	}
	return intern(ns)
}
