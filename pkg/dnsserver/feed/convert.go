package feed

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/store"
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

func protocol(p corev1.Protocol) string {
	if p == "" {
		return "tcp"
	}
	return strings.ToLower(string(p))
}

// ToService converts a Service to its slim record. Errors name the field.
func ToService(s *corev1.Service) (store.Service, error) {
	out := store.Service{
		Namespace:                namespaceOf(s.ObjectMeta),
		Name:                     s.Name,
		PublishNotReadyAddresses: s.Spec.PublishNotReadyAddresses,
	}
	if s.Name == "" {
		return out, fmt.Errorf("service: metadata.name is empty")
	}
	for i, p := range s.Spec.Ports {
		if p.Port <= 0 || p.Port > 65535 {
			return out, fmt.Errorf("service %s/%s: spec.ports[%d].port %d out of range", out.Namespace, s.Name, i, p.Port)
		}
		out.Ports = append(out.Ports, store.Port{Name: p.Name, Protocol: protocol(p.Protocol), Port: uint16(p.Port)})
	}
	switch {
	case s.Spec.Type == corev1.ServiceTypeExternalName:
		out.Type = store.ExternalName
		out.Ports = nil
		name := strings.ToLower(strings.TrimSpace(s.Spec.ExternalName))
		if name == "" {
			return out, fmt.Errorf("service %s/%s: spec.externalName is empty", out.Namespace, s.Name)
		}
		if !strings.HasSuffix(name, ".") {
			name += "."
		}
		out.ExternalName = name
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
		Namespace: namespaceOf(s.ObjectMeta),
		Name:      s.Name,
		Service:   s.Labels[serviceNameLabel],
	}
	if s.Name == "" {
		return out, fmt.Errorf("endpointslice: metadata.name is empty")
	}
	for i, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		if *p.Port <= 0 || *p.Port > 65535 {
			return out, fmt.Errorf("endpointslice %s/%s: ports[%d].port %d out of range", out.Namespace, s.Name, i, *p.Port)
		}
		sp := store.Port{Port: uint16(*p.Port), Protocol: "tcp"}
		if p.Name != nil {
			sp.Name = *p.Name
		}
		if p.Protocol != nil {
			sp.Protocol = protocol(*p.Protocol)
		}
		out.Ports = append(out.Ports, sp)
	}
	if s.AddressType == discoveryv1.AddressTypeFQDN {
		return out, nil
	}
	for i, ep := range s.Endpoints {
		e := store.Endpoint{Ready: ep.Conditions.Ready == nil || *ep.Conditions.Ready}
		if ep.Hostname != nil {
			e.Hostname = *ep.Hostname
		}
		if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
			e.PodName = ep.TargetRef.Name
		}
		for j, a := range ep.Addresses {
			ip, err := parseIP(a)
			if err != nil {
				return out, fmt.Errorf("endpointslice %s/%s: endpoints[%d].addresses[%d] %q: %w", out.Namespace, s.Name, i, j, a, err)
			}
			e.Addresses = append(e.Addresses, ip)
		}
		out.Endpoints = append(out.Endpoints, e)
	}
	return out, nil
}

// ToPod converts a Pod to its slim record. ok is false for pods that have
// finished (Succeeded, Failed): their IPs may already belong to another pod.
func ToPod(p *corev1.Pod) (pod store.Pod, ok bool, err error) {
	pod = store.Pod{Namespace: namespaceOf(p.ObjectMeta), Name: p.Name}
	if p.Name == "" {
		return pod, false, fmt.Errorf("pod: metadata.name is empty")
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

func namespaceOf(m metav1.ObjectMeta) string {
	if m.Namespace == "" {
		return metav1.NamespaceDefault
	}
	return m.Namespace
}
