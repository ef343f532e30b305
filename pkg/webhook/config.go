package webhook

import (
	"fmt"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// NewReviewer is the Reviewer of cfg: a policy engine and an assumed
// resolver config for the nodes outside every pool and for each pool,
// with the engines' warnings.
func NewReviewer(cfg *v1alpha1.WebhookConfiguration) (*Reviewer, []policy.Warning, error) {
	var warnings []policy.Warning
	pool := func(name string, sel map[string]string, nodeOS string, nodeLocal []string, res v1alpha1.NodeResolver) (Pool, error) {
		node := cfg.Cluster
		node.NodeOS, node.NodeLocalDNS = nodeOS, nodeLocal
		eng, err := policy.New(policy.NodeOf(node, cfg.PodPolicy, nil))
		if err != nil {
			return Pool{}, err
		}
		warnings = append(warnings, eng.Warnings()...)
		host, err := assumedHost(res)
		if err != nil {
			return Pool{}, err
		}
		return Pool{Name: name, NodeSelector: sel, Engine: eng, Host: host}, nil
	}
	r := &Reviewer{DenyTrims: cfg.Trims == v1alpha1.TrimsDeny, SkipWorkloads: cfg.Workloads == v1alpha1.WorkloadsSkip, NamespaceLabels: cfg.NamespaceLabels,
		ClusterPolicy: cfg.DefaultDNSPolicy == v1alpha1.DNSPolicyClusterFirstWithAutopath || cfg.Ndots != nil}
	var err error
	if r.Default, err = pool("", nil, cfg.Cluster.NodeOS, cfg.Cluster.NodeLocalDNS, cfg.NodeResolver); err != nil {
		return nil, nil, err
	}
	for i, p := range cfg.NodePools {
		nodeOS, nodeLocal, res := cfg.Cluster.NodeOS, cfg.Cluster.NodeLocalDNS, cfg.NodeResolver
		if p.NodeOS != "" {
			nodeOS = p.NodeOS
		}
		if p.NodeLocalDNS != nil {
			nodeLocal = p.NodeLocalDNS
		}
		if p.NodeResolver != nil {
			res = *p.NodeResolver
		}
		wp, err := pool(p.Name, p.NodeSelector, nodeOS, nodeLocal, res)
		if err != nil {
			return nil, nil, fmt.Errorf("nodePools[%d]: %w", i, err)
		}
		r.Pools = append(r.Pools, wp)
	}
	return r, warnings, nil
}

// assumedHost turns a NodeResolver into what kubelet would read from such a
// resolv.conf, by writing and parsing it with kubelet's rules (trailing dots
// trimmed, a lone "." dropped, options merged by name).
func assumedHost(res v1alpha1.NodeResolver) (policy.Host, error) {
	if res.Disabled {
		return policy.Host{Disabled: true}, nil
	}
	text := resolvconf.Format(resolvconf.Config{Nameservers: res.Nameservers, Searches: res.Searches, Options: res.Options})
	cfg, err := resolvconf.ParseBytes([]byte(text))
	if err != nil {
		return policy.Host{}, fmt.Errorf("nodeResolver: %w", err)
	}
	return policy.HostOf(cfg), nil
}
