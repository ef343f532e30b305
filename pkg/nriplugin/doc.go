// Package nriplugin is dnsconfigurer's NRI plugin: it gives every container
// of a pod the resolver config the policy engine computes for the pod.
//
// It registers on the container runtime's NRI socket (containerd 2.x,
// github.com/containerd/nri v0.12.3). It needs no kubelet change and puts
// nothing on kubelet's call path.
//
// # What it does
//
// NRI cannot change a sandbox's DNS config: RunPodSandbox only lets a
// plugin veto, and the pod's PodSandbox carries its name, namespace, UID,
// labels and annotations but no dnsPolicy, dnsConfig or spec. The plugin
// therefore acts at CreateContainer:
//
//   - The pod's facts come from the API server when a lookup is configured
//     (podfacts.SandboxLookup, the node-scoped PodInformer the shim uses too,
//     by UID with the namespace and name checked), else, or for a pod it does
//     not know, from kubelet's own output: the sandbox resolv.conf that the
//     container's original /etc/resolv.conf mount points at, read with the
//     inverse the shim uses too (podfacts.FromSandbox on a podfacts.Sandbox,
//     policy.Engine.Recover). hostNetwork comes from the sandbox's
//     namespaces (no network namespace entry), the autopath selection from
//     the pod annotations.
//   - The engine (policy.Engine.Compute, the same as the shim's) computes
//     the pod's config with the node's resolver config, the last-good
//     snapshot of a hostresolv.Watcher.
//   - It is written to <state-dir>/<pod uid>/resolv.conf (directories 0711,
//     traversable by user-namespaced pods; the file 0644), and the
//     adjustment replaces the container's /etc/resolv.conf mount with a
//     read-only bind of it. Every container of a pod binds the same file,
//     in every sandbox of the pod (kubelet makes a new sandbox, same UID,
//     when the pause container or the network namespace dies): a new file
//     is written atomically (temporary file, chmod, rename); a file
//     already there with the same content is left alone; one with other
//     content (the node file changed between two containers) is rewritten
//     in place, because a bind mount pins the inode.
//   - Containers whose /etc/resolv.conf is not the sandbox's file (the CRI
//     request mounts its own, or containerd found no file) are left
//     unchanged.
//
// Limits: LimitsTrim trims as kubelet does and logs; LimitsReject fails the
// container (and, with an API server, the sandbox at RunPodSandbox, the
// only event RunPodSandbox is subscribed for) with podfacts.RejectMessage.
// With an API server (WithEvents, podfacts.NewAgentEvents with source
// component dnsconfigurer-nri) both post the shim's Warning Events, reason
// DNSConfigForming, one per limit exceeded, on the pod.
//
// # Live update
//
// The engine input of each pod whose config derives from the node file
// (every type but none: Default, and ClusterFirst with the host's search
// paths) is remembered at CreateContainer, up to WithMaxPods pods (past it
// a pod is not followed, with a log line): in memory, and in the pod's
// record, <state-dir>/<pod uid>/pod.json (0600, the input as JSON, version
// 1), written before the pod file. Synchronize, at each connection, reads
// back the records of the runtime's pods it does not follow yet (a
// restarted plugin), refusing one of another pod, version or shape, a
// symbolic link or one over 64 KiB (logged, errors_total{stage="update"}),
// and rewrites their files with the current node config, which may have
// changed while the plugin was away. A pod file without a record (a None
// pod, or one written before records) is followed again from its next
// container. When the host config given to New also reports changes
// (HostSubscriber, a hostresolv.Watcher), Run recomputes the followed
// pods' files at each new snapshot and rewrites the changed ones in place,
// never by rename: each container's bind mount pins the inode, so only an
// in-place write reaches running containers. The rewrite never leaves the
// file empty or cut: a longer config first reserves its space (fallocate,
// so a full disk fails with the old config intact) and is written in one
// write; a shorter one is written padded with newlines to the old length,
// then the file is cut. A reader whose read overlaps that one write can
// still see part of each config; only a rename avoids that.
// Over the limits a live update writes the trimmed config whatever the
// limits mode, since a running pod cannot be rejected. A CreateContainer
// computes and writes under the same lock as an update, with the node
// config read under it, so the last writer always has the newest config.
//
// How a running program notices depends on its resolver: glibc (2.26 and
// later) checks resolv.conf's modification time at the next lookup and
// reloads it when it changed, in most programs (those that do not call
// res_init or keep their own _res state); musl reads the file at every
// lookup; Go's net package checks it at most every 5 seconds, at a
// lookup; programs that parse the file once at start (many JVM setups,
// some caching daemons) see the change only after a restart.
//
// Failure: on an internal error (an unreadable or unparsable sandbox file,
// an unusable node resolver config, an engine error) the container is
// created unchanged, with kubelet's file, and the error is logged. A
// sandbox file over 64 KiB, or holding bytes other than text or a
// nameserver that is not an IP address, is such an error: containerd
// cannot have written it from kubelet's config, so it is not recovered.
// A pod the API server lookup does not return within the lookup timeout
// (not seen yet, deleted, or no API server reachable) is recovered from
// the sandbox file instead, with a warning. NRI
// itself lets a container through unchanged when the plugin does not answer
// within plugin_request_timeout (2s by default) or is not connected, unless
// the runtime's default validator lists it in required_plugins.
//
// RemovePodSandbox removes the pod's state directory when no other
// sandbox of the pod may bind its file: the sandboxes of the last
// Synchronize (the runtime's list) and of the containers adjusted since.
// Past 16384 such sandboxes it removes none until the next Synchronize.
// Synchronize removes the directories of pods the runtime no longer has
// and anything else in the state dir. Symbolic links there are removed,
// never followed: the plugin opens its files with O_NOFOLLOW and refuses a
// pod directory that is not a directory. A pod UID that is not one path
// element of letters, digits, '-' and '_' (at most 128) leaves the
// container unchanged (errors_total{stage="facts"}).
//
// # Metrics
//
// On the registry given to WithRegistry, label values pre-resolved:
// dnsconfigurer_nri_containers_total{result="adjusted|unchanged|rejected"},
// dnsconfigurer_nri_errors_total{stage="facts|host_config|compute|write|remove|prune|update"},
// dnsconfigurer_nri_adjust_duration_seconds (a histogram of the time spent
// on a CreateContainer), dnsconfigurer_nri_connected (1 while registered),
// dnsconfigurer_nri_live_updates_total (files rewritten by a live update)
// and dnsconfigurer_nri_pod_lookups_total{result="hit|miss"} (API server
// lookups at CreateContainer; a miss falls back to the sandbox file).
//
// # Connection
//
// Run registers the plugin as "<index>-<name>" on the socket and, when the
// runtime closes the connection (a containerd restart), registers again
// with a backoff doubling from 250ms up to 10s, until its context is done.
//
// The package imports the NRI stub and API, client_golang (metrics),
// pkg/hostresolv (the node config and its changes), pkg/podfacts (the pod
// lookup, the inverse, the Events and the reject message), pkg/policy,
// pkg/resolvconf and api/v1alpha1 (its defaults). It does not import
// pkg/cri or the CRI API: the shim is a sibling. pkg/policy, pkg/podfacts,
// pkg/cri and api/ must not import it.
package nriplugin
