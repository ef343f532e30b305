package store

import "strings"

// The external node of a Service: what the external zones answer for it,
// as CoreDNS's k8s_external. It lives under <svc>.<ns>.svc.<zone>, a
// 0x00 byte and X, a key no query makes (variant.go), so that every
// external zone reads the same node and a Service's change rebuilds it
// with the Service's other names.
const markExternal = "\x00X"

// addExternal adds the external node of svc, whose cluster name is base:
// its external IPs, and one SRV per port whose target is the port's
// labels (_<name>._<protocol>). CoreDNS answers a Service without ports
// as one without external IPs: it has no node.
func (b *builder) addExternal(svc *Service, base string) {
	if len(svc.ExternalIPs) == 0 || len(svc.Ports) == 0 {
		return
	}
	n := b.node(base + markExternal)
	n.AddAddrs(svc.ExternalIPs)
	for _, p := range svc.Ports {
		n.AddSRV(SRV{Port: p.Port, Target: b.concat("_", strings.ToLower(p.Name), "._", p.Protocol)})
	}
}

// External is the external node of Service name in namespace ns (both
// lowercase): its external IPs, and its ports as SRV records whose
// targets are _<name>._<protocol>.
func (s *Snapshot) External(name, ns string) (*Node, bool) {
	var buf [320]byte
	b := append(append(append(append(buf[:0], name...), '.'), ns...), ".svc."...)
	return s.LookupBytes(append(append(b, s.Zone...), markExternal...))
}
