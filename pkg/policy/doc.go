// Package policy is dnsconfigurer's pod DNS engine: it computes a pod's
// nameservers, search list, options, hostname and FQDN as kubelet v1.37
// does, or the node's own kubelet where releases differ.
//
// Its inputs are the pod's DNS fields, the node's DNS settings and the
// node's resolver config. It follows kubelet's semantics exactly
// (pkg/kubelet/network/dns, GeneratePodHostNameAndDomain). It adds the
// ClusterFirstWithAutopath policy of the KEP "DNS Autopath in PodSpec". It
// validates the same fields as the API server does (ValidateAPI: v1.37;
// ValidateAPIFor: a given release).
//
// Kubernetes 1.34 to 1.37 differ for pod DNS only in rules that follow a
// feature gate's default, each kept in release.go: kubelet before 1.35
// ignores spec.hostnameOverride (Node.KubeletVersion selects), and the API
// server before 1.36 only warns about nameservers with leading zeros or in
// IPv4-mapped form, and before 1.35 drops hostnameOverride. kubelet's DNS
// config itself (GetPodDNS) is the same in all four: their fixtures
// record it.
//
// It owns kubelet's rules once for every adapter: the ClusterFirst search
// shape (ClusterSearches, NamespaceSearch), the limits (Max*), the autopath
// zone, and the inverse of kubelet's output (Engine.Recover, which the CRI
// shim uses when only a sandbox config is known; its property, recomputing
// the recovered input gives kubelet's output back, is fuzzed and checked
// against real kubelet outputs in testdata/kubelet-outputs-<version>.json,
// one file per Kubernetes release). The node
// file's loopback nameservers are dropped for host-type pods in their own
// network namespace (resolvconf.WithoutLoopback), the one deliberate
// difference from kubelet besides autopath. kubelet and containerd hand
// the node's file over as it is; the rule is Docker's (libnetwork drops
// localhost nameservers from a container's resolv.conf unless it runs on
// the host network). A hostNetwork pod shares the node's network
// namespace, where a stub on 127.0.0.53 or 127.0.0.1 answers it, so it
// keeps them, as kubelet hands them over.
//
// The package is pure: it imports the standard library, pkg/fqdn and
// pkg/resolvconf only; no client-go, gRPC, DNS library, k8s.io/api or
// logger. Everything kubelet would
// log or emit as an Event is returned as a Warning value; adapters (the CRI
// shim, the webhook, the render command) decide how to report them.
//
// A pod's dnsConfig.options merge over the base options by kubelet's
// mergeDNSOptions keys: a base option's name before the first ':', a pod
// option's name verbatim (so {name: "ndots:3"} is kept beside ndots:5, and
// "name:" is re-rendered "name"). Where kubelet's output is random (options
// built from a Go map), the engine is stable: base options keep their order,
// an override replaces the value in place, new keys are appended in pod
// order; Recover accepts options in any order.
//
// Cluster policy (Node.DefaultPolicy, Node.Ndots, Input.NamespacePolicy):
// ClusterFirstWithAutopath is chosen by the pod's AnnotationDNSPolicy
// annotation, else its namespace's label of the same name, else the
// cluster default; the value ClusterFirst opts out at the annotation or
// label level. A label or the default upgrades only pods whose effective
// policy is ClusterFirst (ClusterFirst, or ClusterFirstWithHostNet off the
// host network); hostNetwork, Default and None pods are left alone. The
// ndots default replaces ndots:5 in a cluster DNS pod's base, so a pod's
// own dnsConfig.options ndots wins by the usual merge. Recover inverts
// kubelet's output without any of it.
//
// Engine.ComputeExplained returns with the result its Trace: each decision
// in order (the policy and its fallbacks, where every entry came from, each
// merge, override and limit with the entries it removed, the hostname and
// FQDN), under a stable rule name; the Trace type lists the rules. Compute
// records nothing and allocates no more for it.
package policy
