package v1alpha1

import (
	"fmt"
	"net/netip"
	"strings"
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

// DefaultClusterDomain is the cluster domain of every component when none
// is set (kubeadm's clusterDomain; kubelet itself has none).
const DefaultClusterDomain = "cluster.local"

// NodeDNS is the node-level DNS settings shared by the shim and the webhook:
// what kubelet's clusterDNS, clusterDomain and resolvConf say.
type NodeDNS struct {
	// ClusterDNS are the cluster DNS server IPs (kubelet clusterDNS).
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// ClusterDomain is kubelet's clusterDomain: unset is
	// DefaultClusterDomain, "" is none (no cluster search domains and no
	// pod FQDN, as with kubelet's empty clusterDomain). Read it with
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
}

// Domain is the cluster domain: ClusterDomain, DefaultClusterDomain when
// unset.
func (n *NodeDNS) Domain() string {
	if n.ClusterDomain == nil {
		return DefaultClusterDomain
	}
	return *n.ClusterDomain
}

// SetDefaults fills unset fields; an empty clusterDomain stays empty.
func (n *NodeDNS) SetDefaults() {
	if n.ClusterDomain == nil {
		d := DefaultClusterDomain
		n.ClusterDomain = &d
	}
	if n.ResolvConf == nil {
		s := "/etc/resolv.conf"
		n.ResolvConf = &s
	}
	if n.NodeOS == "" {
		n.NodeOS = "linux"
	}
}

// Validate reports the first invalid field by its path under prefix.
func (n *NodeDNS) Validate(prefix string) error {
	for i, ip := range n.ClusterDNS {
		if _, err := netip.ParseAddr(ip); err != nil {
			return fmt.Errorf("%sclusterDNS[%d]: %q is not an IP address", prefix, i, ip)
		}
	}
	for i, ip := range n.NodeLocalDNS {
		if _, err := netip.ParseAddr(ip); err != nil {
			return fmt.Errorf("%snodeLocalDNS[%d]: %q is not an IP address", prefix, i, ip)
		}
	}
	if d := n.Domain(); strings.ContainsAny(d, " \t/") || strings.HasPrefix(d, ".") {
		return fmt.Errorf("%sclusterDomain: %q is not a domain name", prefix, d)
	}
	switch n.NodeOS {
	case "linux", "windows":
	default:
		return fmt.Errorf("%snodeOS: %q must be \"linux\" or \"windows\"", prefix, n.NodeOS)
	}
	return nil
}
