package feed

import (
	"fmt"
	"net/netip"
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/fqdn"
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

// Names become DNS names: convert refuses those the API server refuses
// (a manifest is not validated by it), so that every name in the store
// is one a DNS message can carry.

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

// checkPort returns the lowercase protocol of port i of a list (field, e.g.
// "spec.ports"), or why its name (empty or a DNS-1123 label) or protocol
// is refused, naming the field.
func checkPort(field string, i int, name string, p corev1.Protocol) (string, error) {
	if name != "" {
		if err := checkName(name, fqdn.Label); err != nil {
			return "", fmt.Errorf("%s[%d].name %w", field, i, err)
		}
	}
	proto, err := protocol(p)
	if err != nil {
		return "", fmt.Errorf("%s[%d].protocol %w", field, i, err)
	}
	return proto, nil
}

// intern returns the one copy of a string many records repeat (a
// namespace, a port name), so that each record does not keep its own.
func intern(s string) string { return unique.Make(s).Value() }

// ToService converts a Service to its slim record. Errors name the field.
func ToService(s *corev1.Service) (store.Service, error) {
	out := store.Service{
		Namespace:                namespaceOf(s),
		Name:                     s.Name,
		PublishNotReadyAddresses: s.Spec.PublishNotReadyAddresses,
	}
	if s.Name == "" {
		return out, fmt.Errorf("service: metadata.name is empty")
	}
	if err := checkName(s.Name, validation.IsDNS1035Label); err != nil {
		return out, fmt.Errorf("service %s/%s: metadata.name %w", out.Namespace, s.Name, err)
	}
	if err := checkName(out.Namespace, fqdn.Label); err != nil {
		return out, fmt.Errorf("service %s/%s: metadata.namespace %w", out.Namespace, s.Name, err)
	}
	for i, p := range s.Spec.Ports {
		if p.Port <= 0 || p.Port > 65535 {
			return out, fmt.Errorf("service %s/%s: spec.ports[%d].port %d out of range", out.Namespace, s.Name, i, p.Port)
		}
		proto, err := checkPort("spec.ports", i, p.Name, p.Protocol)
		if err != nil {
			return out, fmt.Errorf("service %s/%s: %w", out.Namespace, s.Name, err)
		}
		out.Ports = append(out.Ports, store.Port{Name: intern(p.Name), Protocol: proto, Port: uint16(p.Port)})
	}
	switch {
	case s.Spec.Type == corev1.ServiceTypeExternalName:
		out.Type = store.ExternalName
		out.Ports = nil
		name := strings.ToLower(strings.TrimSpace(s.Spec.ExternalName))
		if name == "" {
			return out, fmt.Errorf("service %s/%s: spec.externalName is empty", out.Namespace, s.Name)
		}
		if err := checkHostname(strings.TrimSuffix(name, ".")); err != nil {
			return out, fmt.Errorf("service %s/%s: spec.externalName %w", out.Namespace, s.Name, err)
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
				return out, fmt.Errorf("service %s/%s: %s[%d] %q: %w", out.Namespace, s.Name, field, i, ip, err)
			}
			out.ClusterIPs = append(out.ClusterIPs, a)
		}
	}
	return out, nil
}

// ToEndpointSlice converts an EndpointSlice to its slim record. FQDN slices
// carry no addresses for DNS and convert to a slice without endpoints.
func ToEndpointSlice(s *discoveryv1.EndpointSlice) (store.EndpointSlice, error) {
	out := store.EndpointSlice{
		Namespace: namespaceOf(s),
		Name:      s.Name,
		Service:   s.Labels[serviceNameLabel],
	}
	if s.Name == "" {
		return out, fmt.Errorf("endpointslice: metadata.name is empty")
	}
	if err := checkName(out.Namespace, fqdn.Label); err != nil {
		return out, fmt.Errorf("endpointslice %s/%s: metadata.namespace %w", out.Namespace, s.Name, err)
	}
	for i, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		if *p.Port <= 0 || *p.Port > 65535 {
			return out, fmt.Errorf("endpointslice %s/%s: ports[%d].port %d out of range", out.Namespace, s.Name, i, *p.Port)
		}
		sp := store.Port{Port: uint16(*p.Port)}
		var proto corev1.Protocol
		if p.Name != nil {
			sp.Name = intern(*p.Name)
		}
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		var err error
		if sp.Protocol, err = checkPort("ports", i, sp.Name, proto); err != nil {
			return out, fmt.Errorf("endpointslice %s/%s: %w", out.Namespace, s.Name, err)
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
		if ep.Hostname != nil && *ep.Hostname != "" {
			if err := checkName(*ep.Hostname, fqdn.Label); err != nil {
				return out, fmt.Errorf("endpointslice %s/%s: endpoints[%d].hostname %w", out.Namespace, s.Name, i, err)
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
				return out, fmt.Errorf("endpointslice %s/%s: endpoints[%d].addresses[%d] %q: %w", out.Namespace, s.Name, i, j, a, err)
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
func ToPod(p *corev1.Pod) (pod store.Pod, ok bool, err error) {
	pod = store.Pod{Namespace: namespaceOf(p), Name: p.Name}
	if p.Name == "" {
		return pod, false, fmt.Errorf("pod: metadata.name is empty")
	}
	if err := checkName(pod.Namespace, fqdn.Label); err != nil {
		return pod, false, fmt.Errorf("pod %s/%s: metadata.namespace %w", pod.Namespace, p.Name, err)
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
			return pod, false, fmt.Errorf("pod %s/%s: %s[%d] %q: %w", pod.Namespace, p.Name, field, i, ip, err)
		}
		pod.IPs = append(pod.IPs, a)
	}
	return pod, true, nil
}

func namespaceOf(m metav1.Object) string { return defaultNamespace(m.GetNamespace()) }

// defaultNamespace is ns, "default" when it is empty, interned.
func defaultNamespace(ns string) string {
	if ns == "" {
		return metav1.NamespaceDefault
	}
	return intern(ns)
}
