package v1alpha1

import (
	"fmt"
	"net"
	"strings"
)

// NodeAgent is what both node agents, the shim and the NRI plugin, are
// configured with. Their config files hold its fields inline.
type NodeAgent struct {
	// NodeDNS is what kubelet's clusterDNS, clusterDomain and resolvConf
	// say, plus the node-local DNS address and the node OS.
	NodeDNS `json:",inline"`
	// PodPolicy is the cluster's DNS policy for pods that did not choose.
	PodPolicy `json:",inline"`

	// Kubeconfig is the API server's kubeconfig; "" uses the files of
	// $KUBECONFIG, else the in-cluster config when running in a pod, and
	// no API server otherwise.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// NodeName is this node's name, required with an API server (the pod
	// informer watches spec.nodeName=<nodeName>).
	NodeName string `json:"nodeName,omitempty"`

	// Limits is what the agent does with a pod over kubelet's DNS limits:
	// "trim" (default: kubelet's behaviour, with an Event) or "reject"
	// (the shim fails RunPodSandbox with InvalidArgument; the NRI plugin
	// fails the container, and with an API server the sandbox).
	Limits string `json:"limits,omitempty"`

	// MetricsListen is the HTTP address of /metrics, /healthz and
	// /readyz; "" (default) serves none.
	MetricsListen string `json:"metricsListen,omitempty"`
}

// SetDefaults fills unset fields.
func (a *NodeAgent) SetDefaults() {
	a.NodeDNS.SetDefaults()
	a.PodPolicy.SetDefaults()
	setString(&a.Limits, DefaultLimits)
}

// validPolicy checks the node and pod policy fields: an agent checks them
// first.
func (a *NodeAgent) validPolicy() error {
	if err := a.NodeDNS.Validate(""); err != nil {
		return err
	}
	return a.PodPolicy.Validate("")
}

// validAgent checks limits, nodeName and metricsListen: an agent checks
// them after its own fields.
func (a *NodeAgent) validAgent() error {
	if err := either("limits", a.Limits, LimitsTrim, LimitsReject); err != nil {
		return err
	}
	if a.NodeName != "" && (len(a.NodeName) > 253 || strings.ContainsAny(a.NodeName, " /\t")) {
		return fmt.Errorf("nodeName: %q is not a node name", a.NodeName)
	}
	if a.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(a.MetricsListen); err != nil {
			return fmt.Errorf("metricsListen: %q is not host:port", a.MetricsListen)
		}
	}
	return nil
}
