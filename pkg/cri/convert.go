package cri

import (
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// HostConfig is the node resolver config the shim reads on every sandbox:
// the last-good snapshot of a hostresolv.Watcher, never a file read.
type HostConfig interface {
	Current() hostresolv.Snapshot
}

// errNoDNSConfig marks a sandbox config without dns_config: kubelet always
// sends one, so the request comes from another client (crictl, a test) and
// is forwarded as it is.
var errNoDNSConfig = errors.New("cri: sandbox config has no dns_config")

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

// FromSandbox builds the engine input from a sandbox config alone, for a
// pod the API server did not give (no API server, or not seen in time).
//
// The pod's identity comes from the metadata, hostNetwork from the network
// namespace mode (NODE), the autopath selection from the pod annotations
// kubelet copies into the config. dnsPolicy and spec.dnsConfig are not in
// the config: policy.Engine.Recover recovers them from kubelet's own
// dns_config (see there for the shapes it knows and its blind spots), with
// host, the shim's resolver config, as the node file kubelet read. The
// engine then recomputes the pod with the current host config, or switches
// it to autopath when the annotation asks. The namespace's label is not
// known here (Input.NamespacePolicy is empty): the engine's cluster default
// applies.
//
// kubelet's sandbox hostname is kept (HostnameOverride), because the pod's
// hostname fields are not in the config.
func FromSandbox(cfg *runtimeapi.PodSandboxConfig, eng *policy.Engine, host policy.Host) (policy.Input, error) {
	name, namespace, uid, err := podIdentity(cfg)
	if err != nil {
		return policy.Input{}, err
	}
	dns := cfg.GetDnsConfig()
	if dns == nil {
		return policy.Input{}, errNoDNSConfig
	}
	in := policy.Input{
		Name:             name,
		Namespace:        namespace,
		UID:              uid,
		PolicyAnnotation: cfg.GetAnnotations()[policy.AnnotationDNSPolicy],
		HostNetwork:      hostNetwork(cfg),
	}
	if h := cfg.GetHostname(); h != "" && !in.HostNetwork {
		in.HostnameOverride = &h
	}
	in, _ = eng.Recover(in, policy.Output{Nameservers: dns.GetServers(), Searches: dns.GetSearches(), Options: dns.GetOptions()}, host)
	return in, nil
}
