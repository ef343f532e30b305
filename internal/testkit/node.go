package testkit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

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

// HostResolvConf is the standard node's own resolv.conf.
const HostResolvConf = "nameserver 10.233.0.1\nnameserver 10.233.0.2\nsearch host.test corp.test\noptions timeout:2 attempts:3\n"

// NodeFlags are the standard node's flags (render, shim, nri) with
// resolvConf its resolver file (WriteHostResolvConf).
func NodeFlags(resolvConf string) []string {
	return []string{"--cluster-dns", ClusterDNS, "--cluster-domain", ClusterDomain, "--resolv-conf", resolvConf, "--node-local-dns", NodeLocalDNS}
}

// WriteHostResolvConf writes HostResolvConf to resolv.conf in dir and
// returns its path.
func WriteHostResolvConf(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(path, []byte(HostResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
