package main

import (
	"flag"
	"strconv"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// nodeConfig is the node render and validate assume: kubelet's settings,
// the agents' pod policy and the node IPs, as a ShimConfiguration has
// them.
type nodeConfig struct {
	v1alpha1.NodeDNS   `json:",inline"`
	v1alpha1.PodPolicy `json:",inline"`
	NodeIPs            []string `json:"nodeIPs,omitempty"`
}

// SetDefaults fills unset fields as the agents do.
func (c *nodeConfig) SetDefaults() {
	c.NodeDNS.SetDefaults()
	c.PodPolicy.SetDefaults()
}

// Validate reports what the agents' policy refuses and what kubelet
// refuses. Addresses kubelet would skip, with a warning, pass: render
// shows what kubelet does with them.
func (c *nodeConfig) Validate() error {
	if err := c.PodPolicy.Validate(""); err != nil {
		return err
	}
	return c.NodeDNS.ValidateAsKubelet("")
}

// nodeFlags are the node flags shared by render and validate, and the
// value of the pod's namespace label.
type nodeFlags struct {
	layer           *flaglayer.Layer[nodeConfig]
	namespacePolicy string
	cfg             nodeConfig // set by engine
}

func (n *nodeFlags) register(fs *flag.FlagSet) {
	l := flaglayer.New[nodeConfig](fs)
	l.List(func(c *nodeConfig) *[]string { return &c.ClusterDNS }, "cluster-dns", v1alpha1.DefaultRenderClusterDNS, "kubelet clusterDNS: comma-separated IPs (\"\" for none)")
	l.StringPtr(func(c *nodeConfig) **string { return &c.ClusterDomain }, "cluster-domain", v1alpha1.DefaultClusterDomain, "kubelet clusterDomain (\"\" for none)")
	l.StringPtr(func(c *nodeConfig) **string { return &c.ResolvConf }, "resolv-conf", v1alpha1.DefaultResolvConf, "kubelet resolvConf: the node's resolver file (\"\" switches it off)")
	l.String(func(c *nodeConfig) *string { return &c.NodeOS }, "node-os", v1alpha1.DefaultNodeOS, "node OS: linux or windows")
	l.String(func(c *nodeConfig) *string { return &c.KubeletVersion }, "kubelet-version", "", "the node's kubelet `VERSION` (e.g. v1.34.4): kubelet's pod DNS rules of that release where releases differ (default: the newest)")
	l.List(func(c *nodeConfig) *[]string { return &c.NodeLocalDNS }, "node-local-dns", "", "node-local DNS address(es) for ClusterFirstWithAutopath pods (default: the cluster DNS)")
	l.List(func(c *nodeConfig) *[]string { return &c.NodeIPs }, "node-ip", "", "node IPs, comma-separated (only used when --resolv-conf is \"\")")
	l.String(func(c *nodeConfig) *string { return &c.DefaultDNSPolicy }, "default-dns-policy", v1alpha1.DefaultDNSPolicy, "the agents' defaultDNSPolicy: ClusterFirst or ClusterFirstWithAutopath (for ClusterFirst pods without the annotation or namespace label)")
	l.IntPtr(func(c *nodeConfig) **int { return &c.Ndots }, "ndots", "the agents' ndots `N` (0-"+strconv.Itoa(v1alpha1.MaxNdots)+") for cluster DNS pods that do not set it (default kubelet's 5)")
	fs.StringVar(&n.namespacePolicy, "namespace-policy", "", "the pod's namespace's "+v1alpha1.LabelDNSPolicy+" label: ClusterFirstWithAutopath or ClusterFirst (default: none)")
	n.layer = l
}

// config is the node of the flags over render's defaults (cluster DNS
// DefaultRenderClusterDNS); its error names the flag.
func (n *nodeFlags) config() (nodeConfig, error) {
	cfg := nodeConfig{NodeDNS: v1alpha1.NodeDNS{ClusterDNS: []string{v1alpha1.DefaultRenderClusterDNS}}}
	if err := n.layer.Load("", "", &cfg); err != nil {
		return cfg, n.layer.Named(err)
	}
	return cfg, nil
}

// engine is the engine of the node flags; its error names the flag. Call
// it before host.
func (n *nodeFlags) engine() (*policy.Engine, error) {
	cfg, err := n.config()
	if err != nil {
		return nil, err
	}
	n.cfg = cfg
	return policy.New(policy.NodeOf(cfg.NodeDNS, cfg.PodPolicy, cfg.NodeIPs))
}

// host is the node resolver config of the flags, named for a trace.
func (n *nodeFlags) host() policy.Host {
	path := *n.cfg.ResolvConf
	h := podfacts.ReadHost(path, n.cfg.NodeOS)
	h.Source = path
	return h
}
