package main

import (
	"log/slog"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// nodeEngine is the policy engine of a node agent's settings (the shim,
// the NRI plugin; explain reads them), with the engine's warnings logged.
func nodeEngine(node v1alpha1.NodeDNS, pp v1alpha1.PodPolicy, nodeIPs []string, log *slog.Logger) (*policy.Engine, error) {
	eng, err := policy.New(policy.NodeOf(node, pp, nodeIPs))
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
