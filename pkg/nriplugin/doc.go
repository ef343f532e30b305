// Package nriplugin is dnsconfigurer's NRI plugin: registered on the
// container runtime's NRI socket (containerd 2.x, github.com/containerd/nri
// v0.12.3), it gives every container of a pod the resolver config the
// policy engine computes for the pod, with no kubelet change and nothing on
// kubelet's call path.
//
// # What it does
//
// NRI cannot change a sandbox's DNS config: RunPodSandbox only lets a
// plugin veto, and the pod's PodSandbox carries its name, namespace, UID,
// labels and annotations but no dnsPolicy, dnsConfig or spec. The plugin
// therefore acts at CreateContainer:
//
//   - The pod's facts come from the API server when a lookup is configured
//     (cri.SandboxLookup, the shim's node-scoped PodInformer, by UID with the
//     namespace and name checked), else, or for a pod it does not know, from
//     kubelet's own output: the sandbox resolv.conf that the container's
//     original /etc/resolv.conf mount points at, read with the shim's
//     inverse (cri.FromSandbox, policy.Engine.Recover). hostNetwork comes
//     from the sandbox's namespaces (no network namespace entry), the
//     autopath selection from the pod annotations.
//   - The engine (policy.Engine.Compute, the same as the shim's) computes
//     the pod's config with the node's resolver config, the last-good
//     snapshot of a hostresolv.Watcher.
//   - It is written to <state-dir>/<pod uid>/resolv.conf (directories 0711,
//     traversable by user-namespaced pods; the file 0644), and the
//     adjustment replaces the container's /etc/resolv.conf mount with a
//     read-only bind of it. Every container of a pod binds the same file:
//     a new file is written atomically (temporary file, chmod, rename); a
//     file already there with the same content is left alone; one with
//     other content (the node file changed between two containers) is
//     rewritten in place, because a bind mount pins the inode.
//   - Containers whose /etc/resolv.conf is not the sandbox's file (the CRI
//     request mounts its own, or containerd found no file) are left
//     unchanged.
//
// Limits: LimitsTrim trims as kubelet does and logs; LimitsReject fails the
// container (and, with an API server, the sandbox at RunPodSandbox, the
// only event RunPodSandbox is subscribed for) with cri.RejectMessage.
//
// Failure: on an internal error (an unreadable or unparsable sandbox file,
// an unusable node resolver config, an engine error) the container is
// created unchanged, with kubelet's file, and the error is logged. NRI
// itself lets a container through unchanged when the plugin does not answer
// within plugin_request_timeout (2s by default) or is not connected, unless
// the runtime's default validator lists it in required_plugins.
//
// RemovePodSandbox removes the pod's state directory; Synchronize (at each
// connection) removes those of pods the runtime no longer has.
//
// # Connection
//
// Run registers the plugin as "<index>-<name>" on the socket and, when the
// runtime closes the connection (a containerd restart), registers again
// with a backoff doubling from 250ms up to 10s, until its context is done.
//
// The package imports the NRI stub and API, pkg/cri (for the pod lookup,
// the inverse and the reject message), pkg/policy and pkg/resolvconf;
// pkg/policy, pkg/cri and api/ must not import it.
package nriplugin
