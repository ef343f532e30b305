// Package podfacts is what the node agents (the CRI shim and the NRI plugin)
// know of a pod, and how they report on it.
//
// Both agents decide a pod's DNS the same way because both take their
// facts from here. pkg/cri and pkg/nriplugin are siblings: each imports
// this package, neither imports the other.
//
// # Pod lookup
//
// PodInformer watches the pods bound to one node (field selector
// spec.nodeName=<node>) and keeps them slimmed to the fields the engine
// reads. PodFor finds a sandbox's pod by UID and checks it against the
// sandbox metadata kubelet sent: a pod stands for a sandbox only if it is
// on this node and has the sandbox's namespace and name. A mirror pod
// stands only for a static pod's sandbox (StaticPod), and two candidates
// are none. pkg/cri's README ("Threat model") says why. An agent waits
// for a pod not seen yet up to its lookup timeout, and not at all for a
// static pod (SandboxPod.LookupWait).
//
// NamespaceInformer gives each pod its namespace's
// dnsconfigurer.io/dns-policy label (WithNamespaces). It needs list and
// watch on namespaces; without them the cluster default applies.
//
// # The sandbox inverse
//
// Without the API server, an agent knows a pod only from its sandbox:
// what the runtime hands over (Sandbox: kubelet's metadata, the pod's
// labels and annotations, the network namespace, kubelet's hostname and
// DNS config). FromSandbox turns that into the engine's input with
// policy.Engine.Recover. The shim fills a Sandbox from the CRI sandbox
// config, the NRI plugin from NRI's PodSandbox and the sandbox's files;
// neither builds the other's types.
//
// # The node's resolver config
//
// HostOf is the engine's view of a hostresolv.Snapshot: the file as
// kubelet reads it, or why it is unusable. It lives here, not in
// pkg/hostresolv, so that the watcher does not import the engine.
// ReadHost reads the file once, for the commands that assume a node
// (render, validate, demo).
//
// # Events and limits
//
// Recorder posts Warning Events on pods through client-go, with the
// source component of the agent (ComponentShim, ComponentNRI).
// WorkloadEvents posts a limit warning once per workload and hour
// instead of once per pod. NewAgentEvents is the two together.
// OverLimits picks the warnings that trimmed a limit, and RejectMessage
// is the text both agents fail a pod with under limits mode reject.
//
// # Metrics
//
// dnsconfigurer_cri_pod_lookup_rejected_total{reason} (InformerRegistry)
// and dnsconfigurer_cri_events_suppressed_total{reason}
// (NewWorkloadEvents), on the Registerer given. They keep the names they
// had when this code lived in pkg/cri, as do the informers' log lines
// (component "cri"), so dashboards and alerts still match.
//
// The package imports client-go, client_golang, pkg/hostresolv,
// pkg/podspec and pkg/policy. It imports no gRPC, CRI or NRI API.
// pkg/policy, pkg/podspec, pkg/hostresolv and api/ must not import it.
package podfacts
