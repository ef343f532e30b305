package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// MaxNodes is the most nodes a cluster has.
const MaxNodes = 3

// Several nodes on one machine (Options.Nodes), as kind puts them in
// containers:
//
//   - each node is a containerd harness: a network namespace of its own
//     with its pod bridge, containerd, and its own shim, kubelet (root
//     directory, cgroup root, pod logs) and kube-proxy; node i's pods are
//     on 10.233.i.0/24 and its address (kubelet's node IP) is the bridge's,
//     10.233.i.1, as the one node's is;
//   - a fabric namespace holds a bridge, and a veth pair joins each node
//     to it (eth0 in the node, fabricAddr(i)); each node routes the other
//     nodes' pod subnets over it, so pods, nodes and the API server (on the
//     first node) reach each other without NAT, as a flat pod network;
//   - pods route the whole pod CIDR (clusterPodCIDR) through their node;
//   - the node's own hostPath directories (the node-local stage's lock and
//     state) are bind-mounted over the first node's in its containerd's
//     mount namespace (containerd.Options.NodeDirs): one DaemonSet
//     template, a directory per node, as on separate machines.
//
// KillNode takes a node off at once (link down, every process and pod
// killed); ReviveNode brings it back as a node that boots.
var (
	// clusterPodCIDR holds every node's pod subnet.
	clusterPodCIDR = netip.MustParsePrefix("10.233.0.0/16")
	// fabricSubnet is the nodes' link to each other.
	fabricSubnet = netip.MustParsePrefix("10.234.0.0/24")
	// The IPv6 ones of a dual-stack cluster: node i's pods are on
	// fd00:10:233:i::/64, its fabric address fd00:10:234::(i+1).
	clusterPodCIDR6 = netip.MustParsePrefix("fd00:10:233::/56")
	fabricSubnet6   = netip.MustParsePrefix("fd00:10:234::/64")
)

// Node is one node of the cluster.
type Node struct {
	// Name is the node object's name; the first node's is NodeName.
	Name string
	// IP is kubelet's node IP, the pod bridge's address; IP6 its IPv6
	// one in a dual-stack cluster.
	IP, IP6 netip.Addr
	// Harness is the node's containerd, namespace and pod bridge.
	Harness *containerd.Harness
	// Dir holds the node's files (the cluster's Dir for the first node).
	Dir string

	index int
}

// hasIPv6 reports whether Services, pods and nodes have IPv6 addresses.
func (c *Cluster) hasIPv6() bool { return c.dualStack || c.ipv6Only }

// primaryIP is node n's address in the cluster's first family: the API
// server's on the first node, kubelet's listen address.
func (c *Cluster) primaryIP(n *Node) netip.Addr {
	if c.ipv6Only {
		return n.IP6
	}
	return n.IP
}

// addrs are the node's addresses, IPv4 first.
func (n *Node) addrs() []netip.Addr {
	if n.IP6.IsValid() {
		return []netip.Addr{n.IP, n.IP6}
	}
	return []netip.Addr{n.IP}
}

// newNode describes node i (not started).
func (c *Cluster) newNode(i int) *Node {
	n := &Node{Name: NodeName, Dir: c.Dir, index: i, IP: nodeSubnet(i).Addr().Next()}
	if c.hasIPv6() {
		n.IP6 = nodeSubnet6(i).Addr().Next()
	}
	if i > 0 {
		n.Name = NodeName + "-" + strconv.Itoa(i+1)
		n.Dir = filepath.Join(c.Dir, n.Name)
	}
	return n
}

// first is the control-plane node.
func (c *Cluster) first() *Node { return c.Nodes[0] }

// procKey names a node's component among the cluster's processes: the
// first node's by its name alone, as before there were several.
func (n *Node) procKey(name string) string {
	if n.index == 0 {
		return name
	}
	return name + "@" + n.Name
}

// nodeSubnet is node i's pod subnet, 10.233.i.0/24.
func nodeSubnet(i int) netip.Prefix {
	a := clusterPodCIDR.Addr().As4()
	a[2] = byte(i)
	return netip.PrefixFrom(netip.AddrFrom4(a), 24)
}

// nodeSubnet6 is node i's IPv6 pod subnet, fd00:10:233:i::/64.
func nodeSubnet6(i int) netip.Prefix {
	a := clusterPodCIDR6.Addr().As16()
	a[7] = byte(i)
	return netip.PrefixFrom(netip.AddrFrom16(a), 64)
}

// fabricAddr6 is node i's IPv6 address on the fabric.
func fabricAddr6(i int) netip.Addr {
	a := fabricSubnet6.Addr().As16()
	a[15] = byte(i + 1)
	return netip.AddrFrom16(a)
}

// nodeIPs is kubelet's --node-ip: IPv4, then IPv6 in a dual-stack
// cluster.
func (c *Cluster) nodeIPs(n *Node) string {
	if c.ipv6Only {
		return n.IP6.String()
	}
	if n.IP6.IsValid() {
		return n.IP.String() + "," + n.IP6.String()
	}
	return n.IP.String()
}

// clusterDNS is kubelet's (and the shim's) clusterDNS list: the IPv4
// address, then the IPv6 one in a dual-stack cluster.
func (c *Cluster) clusterDNS() string {
	if c.ipv6Only {
		return `"` + ClusterDNS6.String() + `"`
	}
	if c.dualStack {
		return `"` + c.KubeDNS().String() + `", "` + ClusterDNS6.String() + `"`
	}
	return c.KubeDNS().String()
}

// KubeDNS is kubelet's clusterDNS, kube-dns's address: ClusterDNS, or the
// tenth address of Options.ServiceCIDR.
func (c *Cluster) KubeDNS() netip.Addr { return c.rangeAddr(10) }

// KubernetesIP is Service default/kubernetes's address, the Service
// range's first.
func (c *Cluster) KubernetesIP() netip.Addr { return c.rangeAddr(1) }

// rangeAddr is the IPv4 Service range's address number n.
func (c *Cluster) rangeAddr(n int) netip.Addr {
	a := c.serviceCIDR.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// firstClusterDNS is the cluster DNS address of the cluster's first
// family.
func (c *Cluster) firstClusterDNS() netip.Addr {
	if c.ipv6Only {
		return ClusterDNS6
	}
	return c.KubeDNS()
}

// nodeLocalDNS is the node-local stage's address of the cluster's first
// family.
func (c *Cluster) nodeLocalDNS() netip.Addr {
	if c.ipv6Only {
		return NodeLocalDNS6
	}
	return NodeLocalDNS
}

// serviceCIDRs is the Service range(s), IPv4 first.
func (c *Cluster) serviceCIDRs() string {
	if c.ipv6Only {
		return ServiceCIDR6.String()
	}
	if c.dualStack {
		return c.serviceCIDR.String() + "," + ServiceCIDR6.String()
	}
	return c.serviceCIDR.String()
}

// clusterCIDRs is kube-proxy's clusterCIDR, IPv4 first.
func (c *Cluster) clusterCIDRs() string {
	if c.ipv6Only {
		return clusterPodCIDR6.String()
	}
	if c.dualStack {
		return c.clusterCIDR().String() + "," + clusterPodCIDR6.String()
	}
	return c.clusterCIDR().String()
}

// fabricAddr is node i's address on the fabric, 10.234.0.(i+1).
func fabricAddr(i int) netip.Addr {
	a := fabricSubnet.Addr().As4()
	a[3] = byte(i + 1)
	return netip.AddrFrom4(a)
}

// clusterCIDR is kube-proxy's clusterCIDR: the one node's pod subnet, or
// every node's.
func (c *Cluster) clusterCIDR() netip.Prefix {
	if len(c.Nodes) == 1 {
		return containerd.PodSubnet
	}
	return clusterPodCIDR
}

// registryConfigDir is the CRI plugin's registry config_path of every
// node: a hosts.toml per registry (test/registry's WriteHostsTOML).
func (c *Cluster) registryConfigDir() string { return c.path("certs.d") }

// harnessOptions are node n's containerd harness options.
func (c *Cluster) harnessOptions(n *Node) containerd.Options {
	routes := []netip.Prefix{c.serviceCIDR, netip.PrefixFrom(NodeLocalDNS, 32)}
	o := containerd.Options{
		HostResolvConf:    c.nodeResolvConf(),
		RegistryConfigDir: c.registryConfigDir(),
		SharedDirs:        []string{n.kubeletRoot()},
		Images:            c.Images,
		StartTimeout:      2 * time.Minute,
		PodSubnet:         nodeSubnet(n.index),
	}
	if len(c.Nodes) > 1 {
		routes = append(routes, clusterPodCIDR)
	}
	if c.hasIPv6() {
		o.PodSubnet6 = nodeSubnet6(n.index)
		routes = append(routes, ServiceCIDR6, clusterPodCIDR6, netip.PrefixFrom(NodeLocalDNS6, 128))
	}
	if c.ipv6Only {
		o.IPv6Only = true
		routes = slices.DeleteFunc(routes, func(p netip.Prefix) bool { return p.Addr().Is4() })
	}
	if c.Agent == AgentNRI && len(c.Nodes) > 1 {
		// One socket path for the NRI plugin's DaemonSet: each node's
		// own directory over the first node's (NodeDirs).
		o.NRISocket = n.path(filepath.Join("nri", "nri.sock"))
	}
	if n.index > 0 {
		first := c.first()
		o.NodeDirs = map[string]string{}
		for _, d := range []string{"run-dnsconfigurer", "nri-state", "nri"} {
			o.NodeDirs[first.path(d)] = n.path(d)
		}
	}
	o.Routes = routes
	return o
}

// joinNodes creates the fabric and routes each node's pod subnet to the
// others; one node has nothing to join.
func (c *Cluster) joinNodes(ctx context.Context) error {
	if len(c.Nodes) == 1 {
		return nil
	}
	c.fabric = fabricNetNS(c.Dir)
	c.t.Cleanup(func() {
		if err := run(context.Background(), "ip", "netns", "del", c.fabric); err != nil {
			c.t.Errorf("cluster: %v", err)
		}
	})
	steps := [][]string{
		{"ip", "netns", "add", c.fabric},
		{"ip", "-n", c.fabric, "link", "set", "lo", "up"},
		{"ip", "-n", c.fabric, "link", "add", "fab0", "type", "bridge"},
		{"ip", "-n", c.fabric, "link", "set", "fab0", "up"},
	}
	for _, n := range c.Nodes {
		port := "n" + strconv.Itoa(n.index)
		steps = append(steps,
			[]string{"ip", "-n", c.fabric, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", n.Harness.NetNS},
			[]string{"ip", "-n", c.fabric, "link", "set", port, "master", "fab0", "up"},
			[]string{"ip", "-n", n.Harness.NetNS, "addr", "add", netip.PrefixFrom(fabricAddr(n.index), fabricSubnet.Bits()).String(), "dev", "eth0"},
			[]string{"ip", "-n", n.Harness.NetNS, "link", "set", "eth0", "up"},
		)
		if c.hasIPv6() {
			steps = append(steps, []string{"ip", "-n", n.Harness.NetNS, "addr", "add", netip.PrefixFrom(fabricAddr6(n.index), fabricSubnet6.Bits()).String(), "dev", "eth0", "nodad"})
		}
		for _, m := range c.Nodes {
			if m != n {
				// From the node's own address: pods route only the pod
				// CIDR back, so a reply to the fabric address would be lost
				// (the API server's proxy to a pod on another node).
				steps = append(steps, []string{"ip", "-n", n.Harness.NetNS, "route", "add", nodeSubnet(m.index).String(),
					"via", fabricAddr(m.index).String(), "dev", "eth0", "src", n.IP.String()})
				if c.hasIPv6() {
					steps = append(steps, []string{"ip", "-n", n.Harness.NetNS, "route", "add", nodeSubnet6(m.index).String(),
						"via", fabricAddr6(m.index).String(), "dev", "eth0", "src", n.IP6.String()})
				}
			}
		}
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("join the nodes: %w", err)
		}
	}
	return nil
}

// fabricNetNS names the fabric namespace of the cluster in dir, so that
// sweepStale finds it from the directory alone.
func fabricNetNS(dir string) string {
	return "dnscfg-fab-" + strings.TrimPrefix(filepath.Base(dir), dirPrefix)
}

// NodeByName returns the node called name, or nil.
func (c *Cluster) NodeByName(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// KillNode takes node n off the cluster at once, as a machine that loses
// power: its fabric link goes down (packets to it are lost, not refused),
// its shim, kubelet and kube-proxy are killed (SIGKILL), and its
// containerd with every pod. The control plane's node cannot be killed.
func (c *Cluster) KillNode(ctx context.Context, n *Node) error {
	if n.index == 0 {
		return errors.New("kill node: the first node runs the control plane")
	}
	if err := run(ctx, "ip", "-n", c.fabric, "link", "set", "n"+strconv.Itoa(n.index), "down"); err != nil {
		return fmt.Errorf("kill node %s: %w", n.Name, err)
	}
	var errs []error
	for _, name := range c.nodeComponents() {
		errs = append(errs, c.procs[n.procKey(name)].kill())
	}
	errs = append(errs, n.Harness.Kill(ctx))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kill node %s: %w", n.Name, err)
	}
	return nil
}

// ReviveNode boots a killed node again: containerd on its old state, its
// link up, then the shim, kubelet and kube-proxy; it returns once the node
// is Ready.
func (c *Cluster) ReviveNode(ctx context.Context, n *Node) error {
	if err := n.Harness.Revive(ctx); err != nil {
		return fmt.Errorf("revive node %s: %w", n.Name, err)
	}
	if err := run(ctx, "ip", "-n", c.fabric, "link", "set", "n"+strconv.Itoa(n.index), "up"); err != nil {
		return fmt.Errorf("revive node %s: %w", n.Name, err)
	}
	if err := c.startNode(ctx, n); err != nil {
		return fmt.Errorf("revive node %s: %w", n.Name, err)
	}
	return c.waitNodeReady(ctx, n.Name)
}
