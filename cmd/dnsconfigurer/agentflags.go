package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// agentFlags are the flags the node agents (shim and nri) share: kubelet's
// DNS settings, the node-local address, the API server, the node's name and
// the cluster's pod DNS policy.
type agentFlags struct {
	clusterDNS, clusterDomain, resolvConf, nodeLocalDNS, kubeconfig, nodeName string
	defaultPolicy                                                             string
	namespaceLabels                                                           bool
	ndots                                                                     optionalInt
}

// optionalInt is an int flag that may stay unset.
type optionalInt struct{ v *int }

func (o *optionalInt) String() string {
	if o == nil || o.v == nil {
		return ""
	}
	return strconv.Itoa(*o.v)
}

func (o *optionalInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a number", s)
	}
	o.v = &n
	return nil
}

func (f *agentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.clusterDNS, "cluster-dns", "", "kubelet clusterDNS: comma-separated `IP`s")
	fs.StringVar(&f.clusterDomain, "cluster-domain", v1alpha1.DefaultClusterDomain, "kubelet clusterDomain (\"\" for none)")
	fs.StringVar(&f.resolvConf, "resolv-conf", "/etc/resolv.conf", "kubelet resolvConf: the node's resolver file, \"auto\" (systemd-resolved aware) or \"\" (off)")
	fs.StringVar(&f.nodeLocalDNS, "node-local-dns", "", "node-local DNS `IP`s for ClusterFirstWithAutopath pods (default: the cluster DNS)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "API server kubeconfig `PATH` (default: $KUBECONFIG, else the in-cluster config when in a pod, else no API server)")
	fs.StringVar(&f.nodeName, "node-name", "", "this node's name (required with an API server; default $NODE_NAME)")
	fs.StringVar(&f.defaultPolicy, "default-dns-policy", v1alpha1.DNSPolicyClusterFirst, "policy of pods without the "+v1alpha1.LabelDNSPolicy+" annotation or namespace label: ClusterFirst or ClusterFirstWithAutopath (upgrades only ClusterFirst pods)")
	fs.BoolVar(&f.namespaceLabels, "namespace-labels", false, "read the namespaces' "+v1alpha1.LabelDNSPolicy+" label (needs list/watch namespaces; with an API server only)")
	fs.Var(&f.ndots, "ndots", "ndots `N` (0-15) for cluster DNS pods whose dnsConfig.options do not set it (default kubelet's 5)")
}

// apply copies into d, p, kubeconfig and nodeName the flags use names.
func (f *agentFlags) apply(d *v1alpha1.NodeDNS, p *v1alpha1.PodPolicy, kubeconfig, nodeName *string, use func(name string) bool) {
	for name, fn := range map[string]func(){
		"default-dns-policy": func() { p.DefaultDNSPolicy = f.defaultPolicy },
		"namespace-labels":   func() { p.NamespaceLabels = f.namespaceLabels },
		"ndots":              func() { p.Ndots = f.ndots.v },
		"cluster-dns":        func() { d.ClusterDNS = splitList(f.clusterDNS) },
		"cluster-domain":     func() { v := f.clusterDomain; d.ClusterDomain = &v },
		"resolv-conf":        func() { d.ResolvConf = &f.resolvConf },
		"node-local-dns":     func() { d.NodeLocalDNS = splitList(f.nodeLocalDNS) },
		"kubeconfig":         func() { *kubeconfig = f.kubeconfig },
		"node-name":          func() { *nodeName = f.nodeName },
	} {
		if use(name) {
			fn()
		}
	}
}

// loadAgentConfig reads file (of kind), if given, into cfg, applies the
// flags (those set on the command line, or all of them without a file),
// then $NODE_NAME into nodeName and the defaults, and validates.
func loadAgentConfig(fs *flag.FlagSet, file, kind string, cfg configFile, nodeName *string, apply func(use func(name string) bool)) error {
	if file != "" {
		if err := loadConfig(file, kind, cfg); err != nil {
			return err
		}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	apply(func(name string) bool { return set[name] || file == "" })
	if *nodeName == "" {
		*nodeName = os.Getenv("NODE_NAME")
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		if file != "" {
			return fmt.Errorf("config %q with flags: %w", file, err)
		}
		return flagError(err)
	}
	return nil
}
