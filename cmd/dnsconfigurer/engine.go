package main

import (
	"log/slog"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// policyNode is the engine's view of a node's DNS settings, the cluster's
// pod policy and the node IPs. It is the one conversion from the api
// types to pkg/policy: the shim, the NRI plugin, the webhook, render,
// validate, explain and demo all build their engine through it.
func policyNode(n v1alpha1.NodeDNS, p v1alpha1.PodPolicy, nodeIPs []string) policy.Node {
	node := policy.Node{ClusterDNS: n.ClusterDNS, ClusterDomain: n.Domain(), NodeLocalDNS: n.NodeLocalDNS,
		NodeIPs: nodeIPs, OS: n.NodeOS, Ndots: p.Ndots, KubeletVersion: n.KubeletVersion}
	if p.DefaultDNSPolicy == v1alpha1.DNSPolicyClusterFirstWithAutopath {
		node.DefaultPolicy = policy.ClusterFirstWithAutopath
	}
	return node
}

// newEngine is the policy engine of the settings (policyNode).
func newEngine(n v1alpha1.NodeDNS, p v1alpha1.PodPolicy, nodeIPs []string) (*policy.Engine, error) {
	return policy.New(policyNode(n, p, nodeIPs))
}

// nodeEngine is newEngine for a node agent (the shim, the NRI plugin) or
// its settings (explain), with the engine's warnings logged.
func nodeEngine(node v1alpha1.NodeDNS, pp v1alpha1.PodPolicy, nodeIPs []string, log *slog.Logger) (*policy.Engine, error) {
	eng, err := newEngine(node, pp, nodeIPs)
	if err != nil {
		return nil, usageError{err}
	}
	for _, w := range eng.Warnings() {
		log.Warn("node DNS settings", "reason", w.Reason, "message", w.Message)
	}
	if !eng.HasClusterDNS() {
		log.Warn("no cluster DNS configured (--cluster-dns): ClusterFirst pods fall back to the node's resolver config, as kubelet does")
	}
	return eng, nil
}
