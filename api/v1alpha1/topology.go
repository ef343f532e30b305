package v1alpha1

import (
	"fmt"
	"strings"
)

// Defaults of issue 59's topology settings.
const (
	// DefaultTopologyOptionCode is the EDNS0 local option code carrying
	// the client's topology zone and node (pkg/topology), the one after
	// autopath's.
	DefaultTopologyOptionCode = 65002
	// DefaultNodeLocalPreferZone prefers the node's topology zone's
	// cluster DNS pods.
	DefaultNodeLocalPreferZone = true
	// DefaultNodeLocalUpstreamService is the chart's Service of the
	// cluster DNS pods behind clusterUpstream (dnsconfigurer-dns-upstream).
	DefaultNodeLocalUpstreamService = "kube-system/dnsconfigurer-dns-upstream"
)

// setTopologyDefaults fills the topology fields (node-local's are read
// in mode node-local only, as the rest of its section).
func (c *ServerConfiguration) setTopologyDefaults() {
	setInt(&c.TopologyOptionCode, DefaultTopologyOptionCode)
	setPtr(&c.NodeLocal.PreferZone, DefaultNodeLocalPreferZone)
	setString(&c.NodeLocal.UpstreamService, DefaultNodeLocalUpstreamService)
}

// validateTopology checks the option code and node-local's topology
// fields.
func (c *ServerConfiguration) validateTopology(e *fieldErrors) {
	switch code := c.TopologyOptionCode; {
	case code < MinLocalOptionCode || code > MaxLocalOptionCode:
		e.add("topologyOptionCode", "%d: not a local option code (%d-%d)", code, MinLocalOptionCode, MaxLocalOptionCode)
	case code == c.AutopathOptionCode:
		e.add("topologyOptionCode", "%d: must differ from autopathOptionCode", code)
	}
	n := &c.NodeLocal
	if _, _, err := splitService(n.UpstreamService); err != nil {
		e.add("nodeLocal.upstreamService", "%q: %v", n.UpstreamService, err)
	}
	if n.NodeName != "" && !IsDNSSubdomain(n.NodeName) {
		e.add("nodeLocal.nodeName", "%q: not a node name (a DNS subdomain)", n.NodeName)
	}
}

// PreferZoneOn is preferZone (the default when unset).
func (n *NodeLocal) PreferZoneOn() bool {
	return deref(n.PreferZone, DefaultNodeLocalPreferZone)
}

// UpstreamServiceName is upstreamService's namespace and name (the
// default when unset or invalid).
func (n *NodeLocal) UpstreamServiceName() (namespace, name string) {
	ns, name, err := splitService(n.UpstreamService)
	if err != nil {
		ns, name, _ = splitService(DefaultNodeLocalUpstreamService)
	}
	return ns, name
}

func splitService(s string) (namespace, name string, err error) {
	ns, name, ok := strings.Cut(s, "/")
	switch {
	case !ok:
		return "", "", fmt.Errorf("must be namespace/name")
	case !IsDNSLabel(ns):
		return "", "", fmt.Errorf("namespace %q is not a DNS label", ns)
	case !IsDNSLabel(name):
		return "", "", fmt.Errorf("name %q is not a DNS label", name)
	}
	return ns, name, nil
}

// IsDNSSubdomain reports an RFC 1123 subdomain as Kubernetes checks a
// node name: at most 253 characters of dot-separated IsDNSLabel labels.
func IsDNSSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !IsDNSLabel(l) {
			return false
		}
	}
	return true
}
