package cri

import (
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// HostConfig is the node resolver config the shim reads on every sandbox:
// the last-good snapshot of a hostresolv.Watcher, never a file read.
type HostConfig interface {
	Current() hostresolv.Snapshot
}

// badRequestError is a sandbox config the shim cannot read.
type badRequestError struct{ field, problem string }

func (e *badRequestError) Error() string {
	return fmt.Sprintf("RunPodSandboxRequest.%s: %s", e.field, e.problem)
}

// podIdentity checks the sandbox metadata the shim needs.
func podIdentity(cfg *runtimeapi.PodSandboxConfig) (name, namespace, uid string, err error) {
	if cfg == nil {
		return "", "", "", &badRequestError{"config", "missing"}
	}
	md := cfg.GetMetadata()
	if md == nil {
		return "", "", "", &badRequestError{"config.metadata", "missing"}
	}
	if md.GetName() == "" {
		return "", "", "", &badRequestError{"config.metadata.name", "empty"}
	}
	if md.GetUid() == "" {
		return "", "", "", &badRequestError{"config.metadata.uid", "empty"}
	}
	return md.GetName(), md.GetNamespace(), md.GetUid(), nil
}

// hostNetwork reports a sandbox in the node's network namespace
// (hostNetwork: true).
func hostNetwork(cfg *runtimeapi.PodSandboxConfig) bool {
	return cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

// SandboxOf is what cfg says of its pod, for pkg/podfacts: the metadata,
// the pod's labels and annotations, the network namespace mode, kubelet's
// hostname and dns_config.
func SandboxOf(cfg *runtimeapi.PodSandboxConfig) podfacts.Sandbox {
	md := cfg.GetMetadata()
	sb := podfacts.Sandbox{Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUid(),
		Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(), HostNetwork: hostNetwork(cfg), Hostname: cfg.GetHostname()}
	if dns := cfg.GetDnsConfig(); dns != nil {
		sb.DNS = &policy.Output{Nameservers: dns.GetServers(), Searches: dns.GetSearches(), Options: dns.GetOptions()}
	}
	return sb
}
