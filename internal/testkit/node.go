package testkit

import "github.com/dnsconfigurer/dnsconfigurer/pkg/policy"

// The standard node: kubelet's --cluster-dns and --cluster-domain, and the
// node-local DNS address (kind and kubeadm defaults).
const (
	ClusterDNS    = "10.96.0.10"
	ClusterDomain = "cluster.local"
	NodeLocalDNS  = "169.254.20.10"
)

// Node is the standard node without node-local DNS.
func Node() policy.Node {
	return policy.Node{ClusterDNS: []string{ClusterDNS}, ClusterDomain: ClusterDomain}
}

// NodeWithNodeLocal is Node with NodeLocalDNS, the nameserver of autopath
// pods.
func NodeWithNodeLocal() policy.Node {
	n := Node()
	n.NodeLocalDNS = []string{NodeLocalDNS}
	return n
}
