package main

import (
	"strconv"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
)

// registerAgentFlags binds the flags of the part of a node agent's config
// (T) both agents have (agent reaches it): kubelet's DNS settings, the
// node-local address, the API server, the node's name, the cluster's pod
// DNS policy, what --limits does (limitsHelp) and the metrics address.
func registerAgentFlags[T any](l *flaglayer.Layer[T], agent func(*T) *v1alpha1.NodeAgent, limitsHelp string) {
	node := func(c *T) *v1alpha1.NodeDNS { return &agent(c).NodeDNS }
	pp := func(c *T) *v1alpha1.PodPolicy { return &agent(c).PodPolicy }
	l.List(func(c *T) *[]string { return &node(c).ClusterDNS }, "cluster-dns", "", "kubelet clusterDNS: comma-separated `IP`s")
	l.StringPtr(func(c *T) **string { return &node(c).ClusterDomain }, "cluster-domain", v1alpha1.DefaultClusterDomain, "kubelet clusterDomain (\"\" for none)")
	l.StringPtr(func(c *T) **string { return &node(c).ResolvConf }, "resolv-conf", v1alpha1.DefaultResolvConf, "kubelet resolvConf: the node's resolver file, \"auto\" (systemd-resolved aware) or \"\" (off)")
	l.String(func(c *T) *string { return &node(c).KubeletVersion }, "kubelet-version", "", "this node's kubelet `VERSION` (e.g. v1.34.4): kubelet's pod DNS rules of that release where releases differ (default: the newest)")
	l.List(func(c *T) *[]string { return &node(c).NodeLocalDNS }, "node-local-dns", "", "node-local DNS `IP`s for ClusterFirstWithAutopath pods (default: the cluster DNS)")
	l.String(func(c *T) *string { return &agent(c).Kubeconfig }, "kubeconfig", "", "API server kubeconfig `PATH` (default: $KUBECONFIG, else the in-cluster config when in a pod, else no API server)")
	l.StringEnv(func(c *T) *string { return &agent(c).NodeName }, "node-name", "NODE_NAME", "this node's name (required with an API server; default $NODE_NAME)")
	l.String(func(c *T) *string { return &pp(c).DefaultDNSPolicy }, "default-dns-policy", v1alpha1.DefaultDNSPolicy, "policy of pods without the "+v1alpha1.LabelDNSPolicy+" annotation or namespace label: ClusterFirst or ClusterFirstWithAutopath (upgrades only ClusterFirst pods)")
	l.Bool(func(c *T) *bool { return &pp(c).NamespaceLabels }, "namespace-labels", false, "read the namespaces' "+v1alpha1.LabelDNSPolicy+" label (needs list/watch namespaces; with an API server only)")
	l.IntPtr(func(c *T) **int { return &pp(c).Ndots }, "ndots", "ndots `N` (0-"+strconv.Itoa(v1alpha1.MaxNdots)+") for cluster DNS pods whose dnsConfig.options do not set it (default kubelet's 5)")
	l.String(func(c *T) *string { return &agent(c).Limits }, "limits", v1alpha1.DefaultLimits, "over kubelet's DNS limits: "+limitsHelp)
	l.String(func(c *T) *string { return &agent(c).MetricsListen }, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this `ADDR` (host:port)")
}
