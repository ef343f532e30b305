package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// The cluster's fixed settings: what kubelet's flags say, and where things
// listen inside the node's network namespace.
const (
	// NodeName is the one node's name.
	NodeName = "dnscfg-node"
	// ClusterDomain is kubelet's clusterDomain.
	ClusterDomain = "cluster.local"
	// APIPort is kube-apiserver's port on NodeIP.
	APIPort = 6443
	// RuntimeContainerd16 is Debian's containerd (1.6), the default runtime.
	RuntimeContainerd16 = "containerd-1.6"
	// AgentShim puts dnsconfigurer's CRI shim between kubelet and
	// containerd (the default).
	AgentShim = "shim"
	// AgentNRI leaves kubelet pointed straight at containerd (2.x, NRI on)
	// and deploys dnsconfigurer's NRI plugin (deploy/overlays/nri).
	AgentNRI = "nri"
)

var (
	// NodeIP is the node's address: the pod bridge's, so that pods reach
	// the node (kubelet refuses a loopback node IP). kube-apiserver, the
	// upstream stub and kubelet listen on it.
	NodeIP = containerd.BridgeAddr
	// ServiceCIDR is the Service cluster IP range.
	ServiceCIDR = netip.MustParsePrefix(apiserver.ServiceCIDR)
	// ClusterDNS is kubelet's clusterDNS, the address of the DNS Service
	// that deploy/ creates.
	ClusterDNS = netip.MustParseAddr("10.96.0.10")
	// ClusterDNSUpstream is the cluster DNS pods' second Service, the
	// node-local stage's upstream (deploy/dnsserver/service-upstream.yaml).
	ClusterDNSUpstream = netip.MustParseAddr("10.96.0.11")
	// ServiceCIDR6 is the IPv6 Service range of a dual-stack cluster, and
	// ClusterDNS6 and ClusterDNSUpstream6 the DNS Services' IPv6
	// ClusterIPs there.
	ServiceCIDR6        = netip.MustParsePrefix("fd00:10:96::/112")
	ClusterDNS6         = netip.MustParseAddr("fd00:10:96::a")
	ClusterDNSUpstream6 = netip.MustParseAddr("fd00:10:96::b")
	// NodeLocalDNS6 is the node-local stage's IPv6 address in a
	// dual-stack cluster, a ULA as NodeLocal DNSCache's IPv6 set-ups use.
	NodeLocalDNS6 = netip.MustParseAddr("fd00::10")
	// NodeLocalDNS is the node-local stage's address (deploy/nodelocal).
	NodeLocalDNS = netip.MustParseAddr("169.254.20.10")
)

// Options tune a cluster. The zero value is a working one-node cluster on
// Debian's containerd.
type Options struct {
	// Runtime names the container runtime. Only RuntimeContainerd16 is
	// accepted here; the harness runs containerd 2.x instead when
	// $DNSCONFIGURER_CONTAINERD_BIN names its binaries.
	Runtime string
	// Agent is how dnsconfigurer reaches the node's containers: AgentShim
	// (the default: the shim is a node process in front of containerd,
	// kubelet talks to it) or AgentNRI (kubelet talks to containerd, and
	// DeployDNS deploys the NRI plugin's DaemonSet; needs containerd 2.x,
	// $DNSCONFIGURER_CONTAINERD_BIN, or Start skips).
	Agent string
	// StartTimeout bounds the start once the images are built; the default
	// is 5 minutes.
	StartTimeout time.Duration
	// Nodes is how many nodes the cluster has, 1 (the default) to
	// MaxNodes. The first runs the control plane too (see nodes.go).
	Nodes int
	// ProxyMode is kube-proxy's mode: ProxyIPTables (the default) or
	// ProxyNFTables. This kernel has no IPVS.
	ProxyMode string
	// DualStack gives Services, pods and nodes an IPv6 address too, IPv4
	// first (ServiceCIDR6, nodeSubnet6).
	DualStack bool
	// IPv6Only makes Services, pods and nodes IPv6 only (the nodes'
	// bridges keep an IPv4 address for the node's own servers).
	IPv6Only bool
	// ServiceCIDR is the IPv4 Service range, ServiceCIDR (kubeadm's) when
	// zero: another distribution's, 10.43.0.0/16 for k3s. kube-dns and
	// kubelet's clusterDNS are then at its tenth address (KubeDNS), the
	// kubernetes Service at its first.
	ServiceCIDR netip.Prefix
}

// kube-proxy's modes.
const (
	ProxyIPTables = "iptables"
	ProxyNFTables = "nftables"
)

// imageBuildTimeout bounds building the cluster's images, which compiles
// the product binary and the test images.
const imageBuildTimeout = 15 * time.Minute

// Cluster is a running one-node Kubernetes cluster: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, containerd with the
// dnsconfigurer CRI shim in front of it, kubelet talking to the shim, and
// kube-proxy in iptables mode, all inside one network namespace that the
// cluster created (the node). Nothing in it has a route out.
type Cluster struct {
	// Dir holds the cluster's files: kubeconfigs, component configs and
	// logs (*.log), kubelet's root directory, the images.
	Dir string
	// Node is the containerd harness: the namespace, the pod bridge and
	// containerd.
	Node *containerd.Harness
	// ControlPlane is etcd and kube-apiserver, listening on NodeIP.
	ControlPlane *apiserver.ControlPlane
	// BinDir holds the Kubernetes binaries (test/testbin/build.sh).
	BinDir string
	// Product is the dnsconfigurer binary under test.
	Product string
	// Kubeconfig is the admin's kubeconfig, for commands run in the
	// namespace (Kubectl, E2E).
	Kubeconfig string
	// Client is an admin clientset that dials from inside the namespace.
	Client kubernetes.Interface
	// Config is the admin rest.Config behind Client.
	Config *rest.Config
	// Upstream is the DNS stub that answers names outside the cluster.
	Upstream *Stub
	// Images maps every image imported into containerd to its tarball.
	Images map[string]string
	// Agent is Options.Agent: AgentShim or AgentNRI.
	Agent string
	// Nodes are the cluster's nodes; Nodes[0] runs the control plane and
	// is Node's.
	Nodes []*Node

	t           testing.TB
	procs       map[string]*proc
	order       []string
	sysctls     map[string]string
	proxyMode   string
	dualStack   bool
	ipv6Only    bool
	serviceCIDR netip.Prefix
	fabric      string // the network namespace joining the nodes ("" for one node)
}

// Start brings a cluster up and registers its teardown with t.Cleanup. It
// skips t when the machine cannot run one (not root, containerd or the
// Kubernetes binaries missing: the message says what to run) and fails it
// on any other error.
func Start(t testing.TB, product string, opts Options) *Cluster {
	t.Helper()
	if opts.Runtime == "" {
		opts.Runtime = RuntimeContainerd16
	}
	if opts.Runtime != RuntimeContainerd16 {
		t.Fatalf("cluster: runtime %q is not supported (only %q)", opts.Runtime, RuntimeContainerd16)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 5 * time.Minute
	}
	if opts.Agent == "" {
		opts.Agent = AgentShim
	}
	if opts.Agent != AgentShim && opts.Agent != AgentNRI {
		t.Fatalf("cluster: agent %q is neither %q nor %q", opts.Agent, AgentShim, AgentNRI)
	}
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	if opts.Nodes < 1 || opts.Nodes > MaxNodes {
		t.Fatalf("cluster: %d nodes; 1 to %d are supported", opts.Nodes, MaxNodes)
	}
	if opts.DualStack && opts.IPv6Only {
		t.Fatal("cluster: DualStack and IPv6Only both set")
	}
	if opts.ProxyMode == "" {
		opts.ProxyMode = ProxyIPTables
	}
	if opts.ProxyMode != ProxyIPTables && opts.ProxyMode != ProxyNFTables {
		t.Fatalf("cluster: kube-proxy mode %q is neither %q nor %q (this kernel has no IPVS)", opts.ProxyMode, ProxyIPTables, ProxyNFTables)
	}
	if opts.ProxyMode == ProxyNFTables {
		if _, err := exec.LookPath("nft"); err != nil {
			t.Skip("cluster: kube-proxy's nftables mode needs nft; run test/e2e/setup.sh")
		}
	}
	if opts.Agent == AgentNRI && os.Getenv(containerd.RuntimeEnv) == "" {
		t.Skipf("cluster: the NRI plugin needs containerd 2.x; set $%s to its binaries (test/e2e/containerd2.sh builds them)", containerd.RuntimeEnv)
	}
	containerd.Require(t)
	binDir, err := BinDir()
	if err != nil {
		t.Skipf("cluster: %v; run test/testbin/build.sh (or set %s)", err, apiserver.EnvBinDir)
	}
	for _, tool := range []string{"iptables", "ip", "nsenter", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("cluster: %s missing; run test/e2e/setup.sh", tool)
		}
	}
	sweepStale(t)
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	c := &Cluster{Dir: dir, BinDir: binDir, Product: product, Agent: opts.Agent, t: t, procs: map[string]*proc{}, proxyMode: opts.ProxyMode, dualStack: opts.DualStack, ipv6Only: opts.IPv6Only, serviceCIDR: opts.ServiceCIDR}
	if !c.serviceCIDR.IsValid() {
		c.serviceCIDR = ServiceCIDR
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("cluster: remove %s: %v", dir, err)
		}
	})
	if err := c.saveSysctls(); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(c.restoreSysctls)

	for i := range opts.Nodes {
		n := c.newNode(i)
		// The hostPath directories of node-local's lock and the NRI
		// plugin's state exist before containerd binds the node's own over
		// the first node's (harnessOptions).
		for _, d := range []string{n.kubeletRoot(), n.podLogs(), n.path("run-dnsconfigurer"), n.path("nri-state"), n.path("nri")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatalf("cluster: %v", err)
			}
		}
		c.Nodes = append(c.Nodes, n)
	}
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	// Building the images compiles the product binary (a cold build takes
	// minutes on a loaded 2-core machine): it has its own bound, and the
	// start timeout counts from when they are there.
	bctx, bcancel := context.WithTimeout(context.Background(), imageBuildTimeout)
	c.Images, err = clusterImages(bctx, filepath.Join(dir, "images"), binDir)
	bcancel()
	if err != nil {
		t.Fatalf("cluster: build images: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	for _, n := range c.Nodes {
		n.Harness = containerd.Start(t, c.harnessOptions(n))
	}
	c.Node = c.first().Harness
	t.Cleanup(c.stopAll) // runs before the harnesses' Close
	if c.Agent == AgentNRI && c.Node.NRISocket == "" {
		t.Skipf("cluster: containerd %s has no NRI socket (the NRI plugin needs 2.x)", c.Node.ContainerdVersion)
	}
	if err := c.start(ctx); err != nil {
		t.Fatalf("cluster: %v\n%s", err, c.logTails(30))
	}
	return c
}

// start brings up everything after containerd, in dependency order.
func (c *Cluster) start(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := c.setupNetwork(ctx, n); err != nil {
			return err
		}
	}
	if err := c.joinNodes(ctx); err != nil {
		return err
	}
	var err error
	if c.Upstream, err = startStub(c.Node, c.first().addrs()...); err != nil {
		return fmt.Errorf("upstream stub: %w", err)
	}
	c.t.Cleanup(c.Upstream.Close)
	cpOpts := []apiserver.Option{
		apiserver.WithNetwork(apiserver.Network{NetNSPath: c.Node.NetNSPath, Address: c.primaryIP(c.first()), Port: APIPort}),
		apiserver.WithUser("system:kube-proxy"),
		// The node's name resolves nowhere: reach kubelet by its address.
		apiserver.WithAPIServerArgs("--kubelet-preferred-address-types=InternalIP"),
	}
	if c.hasIPv6() || c.serviceCIDR != ServiceCIDR {
		cpOpts = append(cpOpts, apiserver.WithAPIServerArgs("--service-cluster-ip-range="+c.serviceCIDRs()))
	}
	for _, n := range c.Nodes {
		cpOpts = append(cpOpts, apiserver.WithUser("system:node:"+n.Name, "system:nodes"))
	}
	c.ControlPlane, err = apiserver.Start(ctx, cpOpts...)
	if err != nil {
		return err
	}
	c.t.Cleanup(func() {
		if err := c.ControlPlane.Close(); err != nil {
			c.t.Errorf("cluster: stop control plane: %v", err)
		}
	})
	c.Config = c.ControlPlane.Config()
	c.Client = c.ControlPlane.Client()
	c.Kubeconfig = c.ControlPlane.Kubeconfig()
	for _, n := range c.Nodes {
		if err := c.writeConfigs(n); err != nil {
			return err
		}
		if err := makeCgroupParent(n.Harness.CgroupParent); err != nil {
			return err
		}
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		if err := c.startProc(ctx, c.first(), name); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := c.startNode(ctx, n); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := c.waitNodeReady(ctx, n.Name); err != nil {
			return err
		}
	}
	return nil
}

// nodeComponents are the processes of every node, in start order.
func (c *Cluster) nodeComponents() []string {
	if c.Agent == AgentNRI {
		return []string{"kubelet", "kube-proxy"}
	}
	return []string{"shim", "kubelet", "kube-proxy"}
}

// startNode starts (or starts again) a node's shim, kubelet and
// kube-proxy.
func (c *Cluster) startNode(ctx context.Context, n *Node) error {
	for _, name := range c.nodeComponents() {
		if err := c.startProc(ctx, n, name); err != nil {
			return err
		}
	}
	return nil
}

// setupNetwork gives the namespace what a node has beyond the pod bridge:
// a route for the Service CIDR (host-network pods reach ClusterIPs only
// through one; kube-proxy's DNAT happens after routing), forwarding, and
// bridged pod traffic through iptables (the reply of a pod reached through
// a ClusterIP by another pod of the bridge), all inside the namespace only.
func (c *Cluster) setupNetwork(ctx context.Context, n *Node) error {
	if err := run(ctx, "ip", "-n", n.Harness.NetNS, "route", "add", c.serviceCIDR.String(), "dev", containerd.BridgeName, "src", n.IP.String()); err != nil {
		return err
	}
	if c.hasIPv6() {
		if err := run(ctx, "ip", "-n", n.Harness.NetNS, "route", "add", ServiceCIDR6.String(), "dev", containerd.BridgeName, "src", n.IP6.String()); err != nil {
			return err
		}
		for _, k := range []string{"net.ipv6.conf.all.forwarding", "net.bridge.bridge-nf-call-ip6tables"} {
			if err := nsSysctl(ctx, n, k, "1"); err != nil {
				return err
			}
		}
	}
	// A pod reaching a ClusterIP sends to the bridge's address, and after
	// kube-proxy's DNAT the node forwards the packet to the backend pod:
	// forwarding is off in a new namespace.
	if err := nsSysctl(ctx, n, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	return nsSysctl(ctx, n, "net.bridge.bridge-nf-call-iptables", "1")
}

// makeCgroupParent creates kubelet's cgroupRoot in every cgroup v1
// hierarchy (kubelet refuses a root missing in any), with the machine's
// CPUs and memory nodes in cpuset. The harness's Close removes it.
func makeCgroupParent(parent string) error {
	roots, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, root := range roots {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue // not a hierarchy
		}
		dir := filepath.Join(root, parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if filepath.Base(root) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				return fmt.Errorf("set %s of %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// startProc starts one component of node n and waits until it answers.
func (c *Cluster) startProc(ctx context.Context, n *Node, name string) error {
	key := n.procKey(name)
	p := c.procs[key]
	if p == nil {
		bin, args := c.command(n, name)
		p = &proc{name: key, netns: n.Harness.NetNSPath, bin: bin, args: args, logPath: n.path(name + ".log")}
		c.procs[key] = p
		c.order = append(c.order, key)
	}
	if err := p.start(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return waitFor(wctx, name, func(ctx context.Context) (bool, error) {
		if !p.running() {
			return false, fmt.Errorf("%s exited:\n%s", name, p.logTail(30))
		}
		return c.healthy(ctx, n, name)
	})
}

// Restart stops a component (SIGTERM) and starts it again with the same
// command line, then waits until it answers: "kubelet", "shim",
// "kube-proxy", "kube-controller-manager" or "kube-scheduler".
func (c *Cluster) Restart(ctx context.Context, name string) error {
	return c.RestartOn(ctx, c.first(), name)
}

// RestartOn is Restart for a component of node n.
func (c *Cluster) RestartOn(ctx context.Context, n *Node, name string) error {
	p := c.procs[n.procKey(name)]
	if p == nil {
		return fmt.Errorf("no component %q on %s", name, n.Name)
	}
	if err := p.stop(30 * time.Second); err != nil {
		return err
	}
	return c.startProc(ctx, n, name)
}

// stopAll stops the components in reverse start order: kube-proxy and
// kubelet first, the control plane's controllers last. The pods stay to
// the harness, which removes them through the CRI.
func (c *Cluster) stopAll() {
	var errs []error
	for i := len(c.order) - 1; i >= 0; i-- {
		if err := c.procs[c.order[i]].stop(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if c.t.Failed() {
		c.t.Logf("cluster logs (tails):\n%s", c.logTails(40))
	}
	if err := errors.Join(errs...); err != nil {
		c.t.Errorf("cluster: stop: %v", err)
	}
}

// logTails returns the end of every component's log.
func (c *Cluster) logTails(n int) string {
	var b strings.Builder
	for _, name := range c.order {
		fmt.Fprintf(&b, "--- %s\n%s\n", name, c.procs[name].logTail(n))
	}
	return b.String()
}

// Command returns a command that runs in the node's network namespace
// with KUBECONFIG set to the admin's.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + c.Node.NetNSPath, "--", name}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Kubectl runs the cluster's kubectl (the same release as the cluster)
// with the admin's kubeconfig and returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := c.Command(ctx, filepath.Join(c.BinDir, "kubectl"), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// run runs a command and returns an error carrying its output.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
