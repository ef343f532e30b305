package podfacts

import (
	"errors"
	"fmt"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// Sandbox is what a container runtime hands an agent about a pod sandbox.
// The shim reads it from the CRI sandbox config, the NRI plugin from NRI's
// PodSandbox and the sandbox's files.
type Sandbox struct {
	// Namespace, Name and UID are kubelet's sandbox metadata.
	Namespace, Name, UID string
	// Labels and Annotations are the pod's, as kubelet copies them in.
	Labels, Annotations map[string]string
	// HostNetwork is a sandbox in the node's network namespace.
	HostNetwork bool
	// Hostname is kubelet's sandbox hostname, "" when not known.
	Hostname string
	// DNS is kubelet's DNS config for the sandbox; nil when there is none.
	DNS *policy.Output
}

// Pod is the pod sb is for, as a lookup takes it.
func (sb Sandbox) Pod() SandboxPod {
	return SandboxPod{Namespace: sb.Namespace, Name: sb.Name, UID: sb.UID, Static: StaticPod(sb.Annotations)}
}

// Ref names sb's pod for an Event.
func (sb Sandbox) Ref() PodRef {
	return PodRef{Namespace: sb.Namespace, Name: sb.Name, UID: sb.UID, Labels: sb.Labels}
}

// ErrNoDNSConfig marks a sandbox without a DNS config. kubelet always
// sends one, so the sandbox comes from another client (crictl, a test).
var ErrNoDNSConfig = errors.New("podfacts: sandbox has no dns config")

// FromSandbox builds the engine input from a sandbox alone, for a pod the
// API server did not give (no API server, or not seen in time).
//
// The pod's identity comes from the metadata, hostNetwork from the
// network namespace, the autopath selection from the pod annotations.
// dnsPolicy and spec.dnsConfig are not in the sandbox:
// policy.Engine.Recover recovers them from kubelet's DNS config (see there
// for the shapes it knows and its blind spots). host is the node file
// kubelet read. The engine then recomputes the pod with the current host
// config, or switches it to autopath when the annotation asks. The
// namespace's label is not known here (Input.NamespacePolicy is empty), so
// the engine's cluster default applies.
//
// kubelet's sandbox hostname is kept (HostnameOverride), because the
// pod's hostname fields are not in the sandbox.
func FromSandbox(sb Sandbox, eng *policy.Engine, host policy.Host) (policy.Input, error) {
	if sb.Name == "" || sb.UID == "" {
		return policy.Input{}, fmt.Errorf("podfacts: sandbox of pod %q (uid %q): name and uid are required", sb.Namespace+"/"+sb.Name, sb.UID)
	}
	if sb.DNS == nil {
		return policy.Input{}, ErrNoDNSConfig
	}
	in := policy.Input{
		Name:             sb.Name,
		Namespace:        sb.Namespace,
		UID:              sb.UID,
		PolicyAnnotation: sb.Annotations[policy.AnnotationDNSPolicy],
		HostNetwork:      sb.HostNetwork,
	}
	if h := sb.Hostname; h != "" && !in.HostNetwork {
		in.HostnameOverride = &h
	}
	in, _ = eng.Recover(in, *sb.DNS, host)
	return in, nil
}
