package v1alpha1

import (
	"fmt"
	"net/netip"
)

// GroupVersion is the apiVersion of every dnsconfigurer config file.
const GroupVersion = "dnsconfigurer.io/v1alpha1"

// TypeMeta identifies a config file's kind.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// CheckKind reports a file whose apiVersion or kind is not the expected one.
func (t TypeMeta) CheckKind(kind string) error {
	if t.APIVersion != GroupVersion {
		return fmt.Errorf("apiVersion: %q is not supported, want %q", t.APIVersion, GroupVersion)
	}
	if t.Kind != kind {
		return fmt.Errorf("kind: %q, want %q", t.Kind, kind)
	}
	return nil
}

// Node defaults, shared by every command that takes kubelet's settings.
const (
	// DefaultClusterDomain is the cluster domain of every component when
	// none is set (kubeadm's clusterDomain; kubelet itself has none).
	DefaultClusterDomain = "cluster.local"
	// DefaultResolvConf is the node resolver file (kubelet's resolvConf
	// default).
	DefaultResolvConf = "/etc/resolv.conf"
	// DefaultNodeOS is the node OS when none is set.
	DefaultNodeOS = NodeOSLinux
	// DefaultRenderClusterDNS is the cluster DNS address render and
	// validate assume: kubeadm's, the tenth address of its default
	// Service CIDR 10.96.0.0/12. The node agents have none by default.
	DefaultRenderClusterDNS = "10.96.0.10"
)

// The values of NodeDNS.NodeOS.
const (
	NodeOSLinux   = "linux"
	NodeOSWindows = "windows"
)

// NodeDNS is the node-level DNS settings shared by the shim and the webhook:
// what kubelet's clusterDNS, clusterDomain and resolvConf say.
type NodeDNS struct {
	// ClusterDNS are the cluster DNS server IPs (kubelet clusterDNS).
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// ClusterDomain is kubelet's clusterDomain: unset is
	// DefaultClusterDomain, "" is none. As with kubelet's empty
	// clusterDomain, ClusterFirst pods then get the node's search list
	// alone, and a pod's subdomain ends in "svc." ("sub.ns.svc.").
	// Every command reads it so, from a flag or a file. Read it with
	// Domain.
	ClusterDomain *string `json:"clusterDomain,omitempty"`
	// ResolvConf is the node resolver file (kubelet resolvConf); "auto"
	// switches to /run/systemd/resolve/resolv.conf when the file holds only
	// systemd-resolved's loopback stub. Default "/etc/resolv.conf".
	ResolvConf *string `json:"resolvConf,omitempty"`
	// NodeLocalDNS is the nameserver of ClusterFirstWithAutopath pods.
	NodeLocalDNS []string `json:"nodeLocalDNS,omitempty"`
	// NodeOS is "linux" (default) or "windows".
	NodeOS string `json:"nodeOS,omitempty"`
	// KubeletVersion is the node's kubelet version, such as "v1.34.4":
	// the engine follows that release's kubelet where releases differ
	// (before 1.35 kubelet ignores spec.hostnameOverride; see
	// docs/compatibility.md). Empty is the newest release.
	KubeletVersion string `json:"kubeletVersion,omitempty"`
}

// Domain is the cluster domain: ClusterDomain, DefaultClusterDomain when
// unset.
func (n *NodeDNS) Domain() string {
	return deref(n.ClusterDomain, DefaultClusterDomain)
}

// SetDefaults fills unset fields; an empty clusterDomain stays empty.
func (n *NodeDNS) SetDefaults() {
	setPtr(&n.ClusterDomain, DefaultClusterDomain)
	setPtr(&n.ResolvConf, DefaultResolvConf)
	setString(&n.NodeOS, DefaultNodeOS)
}

// Validate reports the first invalid field by its path under prefix.
func (n *NodeDNS) Validate(prefix string) error {
	for i, ip := range n.ClusterDNS {
		if _, err := netip.ParseAddr(ip); err != nil {
			return fmt.Errorf("%sclusterDNS[%d]: %q is not an IP address", prefix, i, ip)
		}
	}
	for i, ip := range n.NodeLocalDNS {
		if err := CheckNodeLocalIP(ip); err != nil {
			return fmt.Errorf("%snodeLocalDNS[%d]: %w", prefix, i, err)
		}
	}
	if d := n.Domain(); d != "" {
		if err := ValidateClusterDomain(d); err != nil {
			return fmt.Errorf("%sclusterDomain: %w", prefix, err)
		}
	}
	return n.ValidateAsKubelet(prefix)
}

// ValidateAsKubelet reports what kubelet itself refuses: an unknown node
// OS. kubelet skips a clusterDNS entry it cannot parse, with a warning, so
// render and validate, which show what kubelet does, accept one too.
func (n *NodeDNS) ValidateAsKubelet(prefix string) error {
	return validNodeOS(prefix+"nodeOS", n.NodeOS)
}

// validNodeOS reports an OS other than linux and windows at path.
func validNodeOS(path, os string) error {
	return either(path, os, NodeOSLinux, NodeOSWindows)
}

// either reports a value v at path that is neither a nor b.
func either(path, v, a, b string) error {
	if v == a || v == b {
		return nil
	}
	return fmt.Errorf("%s: %q must be %q or %q", path, v, a, b)
}

// CheckNodeLocalIP reports why s cannot be an address pods reach the
// node-local DNS at (nodeLocalDNS, nodeLocal.localIPs), or nil. A zone
// names one of the node's interfaces, which no pod has, and an IPv6
// link-local address needs one: NodeLocal DNSCache's advice for IPv6 is
// a unique local address (fd00::/8), as 169.254.0.0/16 for IPv4.
func CheckNodeLocalIP(s string) error {
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not an IP address", s)
	case ip.Zone() != "":
		return fmt.Errorf("%q: no zone allowed", s)
	case ip.Is6() && !ip.Is4In6() && ip.IsLinkLocalUnicast():
		return fmt.Errorf("%q: an IPv6 link-local address is reachable from a pod only with a zone of its own; use a unique local address (fd00::/8) such as fd00::10", s)
	}
	return nil
}
