package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// nodeFlags are the node settings shared by render and validate.
type nodeFlags struct {
	clusterDNS    string
	clusterDomain string
	resolvConf    string
	nodeOS        string
	nodeLocalDNS  string
	nodeIPs       string
	// The cluster policy (PodPolicy of the agents) and the value of the
	// pod's namespace label.
	defaultPolicy   string
	ndots           optionalInt
	namespacePolicy string
}

func (n *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.clusterDNS, "cluster-dns", "10.96.0.10", "kubelet clusterDNS: comma-separated IPs (\"\" for none)")
	fs.StringVar(&n.clusterDomain, "cluster-domain", v1alpha1.DefaultClusterDomain, "kubelet clusterDomain (\"\" for none)")
	fs.StringVar(&n.resolvConf, "resolv-conf", "/etc/resolv.conf", "kubelet resolvConf: the node's resolver file (\"\" switches it off)")
	fs.StringVar(&n.nodeOS, "node-os", "linux", "node OS: linux or windows")
	fs.StringVar(&n.nodeLocalDNS, "node-local-dns", "", "node-local DNS address(es) for ClusterFirstWithAutopath pods (default: the cluster DNS)")
	fs.StringVar(&n.nodeIPs, "node-ip", "", "node IPs, comma-separated (only used when --resolv-conf is \"\")")
	fs.StringVar(&n.defaultPolicy, "default-dns-policy", "ClusterFirst", "the agents' defaultDNSPolicy: ClusterFirst or ClusterFirstWithAutopath (for ClusterFirst pods without the annotation or namespace label)")
	fs.Var(&n.ndots, "ndots", "the agents' ndots `N` (0-15) for cluster DNS pods that do not set it (default kubelet's 5)")
	fs.StringVar(&n.namespacePolicy, "namespace-policy", "", "the pod's namespace's "+policy.AnnotationDNSPolicy+" label: ClusterFirstWithAutopath or ClusterFirst (default: none)")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// engine is the engine of the node flags; its error names the flag.
func (n *nodeFlags) engine() (*policy.Engine, error) {
	node := policy.Node{
		ClusterDNS:    splitList(n.clusterDNS),
		ClusterDomain: n.clusterDomain,
		NodeLocalDNS:  splitList(n.nodeLocalDNS),
		NodeIPs:       splitList(n.nodeIPs),
		OS:            n.nodeOS,
		Ndots:         n.ndots.v,
	}
	if n.defaultPolicy != "ClusterFirst" {
		node.DefaultPolicy = policy.Policy(n.defaultPolicy)
	}
	switch {
	case node.DefaultPolicy != "" && node.DefaultPolicy != policy.ClusterFirstWithAutopath:
		return nil, fmt.Errorf("--default-dns-policy: %q must be \"ClusterFirst\" or \"ClusterFirstWithAutopath\"", n.defaultPolicy)
	case node.Ndots != nil && (*node.Ndots < 0 || *node.Ndots > policy.MaxNdots):
		return nil, fmt.Errorf("--ndots: %d must be between 0 and %d", *node.Ndots, policy.MaxNdots)
	}
	eng, err := policy.New(node)
	if err != nil {
		return nil, fmt.Errorf("--node-os: %w", err)
	}
	return eng, nil
}

// loadHost reads the node resolver config as kubelet's getHostDNSConfig does
// for the node OS. Problems are returned in Host.Err, because kubelet turns
// them into a failure of every pod rather than of its own start-up.
func loadHost(path, nodeOS string) policy.Host {
	if path == "" {
		return policy.Host{Disabled: true}
	}
	if nodeOS == "windows" {
		st, err := os.Stat(path)
		switch {
		case err == nil && st.Mode().IsRegular():
		case path == "Host":
			return policy.Host{Err: errors.New(`resolvConf "Host" reads the Windows network settings (GetNetworkParams and the Tcpip SearchList registry values), which cannot be read here; pass the path of a file holding the node's nameservers and search suffixes instead`)}
		default:
			return policy.Host{Err: fmt.Errorf(`Unexpected resolver config value: %q. Expected "", "Host", or a path to an existing resolv.conf file.`, path)}
		}
	}
	cfg, lines, err := resolvconf.ParseFileLines(path)
	if err != nil {
		return policy.Host{Err: err}
	}
	h := policy.HostOf(cfg)
	h.Lines = lines
	return h
}
