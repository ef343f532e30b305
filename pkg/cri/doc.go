// Package cri is dnsconfigurer's CRI shim: it rewrites the DNS config of
// RunPodSandbox requests and passes every other call through.
//
// It sits on kubelet's --container-runtime-endpoint in front of containerd.
// It rewrites the DNS config (and hostname) with pkg/policy and leaves every
// other call untouched.
//
// # Interception
//
// The shim does not terminate gRPC: each kubelet connection is relayed to a
// runtime connection of its own at the HTTP/2 frame level by pkg/h2relay
// (proxy.go wires it). Frames pass through as read, byte for byte, in both
// directions: every method of RuntimeService and ImageService, streams such
// as GetContainerEvents, methods and services this build does not know, and
// with them status codes, details, metadata, deadlines, SETTINGS, PING and
// GOAWAY. Nothing is ever answered Unimplemented by the shim. The relay
// holds the request of RunPodSandbox only. kubelet gets its flow-control
// credit back at once, so a request larger than a window does not stall. The
// relay hands the message to the shim's rewriter (sandboxRewriter in
// proxy.go). The rewriter decodes the RunPodSandboxRequest (unknown fields
// survive re-encoding), rewrites it (sandbox.go) and returns it. The relay
// sends it on within the runtime's windows, with flow control kept exact
// (see pkg/h2relay). An unchanged request is sent on as the original bytes.
// A rejected one is answered with a trailers-only response that leaves the
// HPACK dynamic table untouched, and the runtime's stream is reset. A
// request that is not one uncompressed gRPC message is a bad request under
// the failure policy. The response is never decoded. The relay reports each
// call's method and status, which the shim counts
// (dnsconfigurer_cri_calls_total, "other" for methods cri-api does not
// have).
//
// Why a frame relay: a gRPC server plus client in the middle adds two
// HTTP/2 stacks to every call. Measured against real containerd, that is
// +160 µs on Version and +380 µs on ListContainers with 200 containers.
// The relay adds a few microseconds more than a process that only copies
// bytes (BenchmarkShimOverhead in test/e2e/shim measures both).
//
// # The rewrite
//
// A pod's facts come from a podfacts.PodLookup (podfacts.PodInformer: an
// informer on the pods with spec.nodeName=<node>, looked up by UID,
// waiting up to the lookup timeout for a pod not seen yet) or, without an
// API server or for a pod it does not know, from the sandbox config itself
// (SandboxOf, then podfacts.FromSandbox).
// A pod stands for a sandbox only if it is on this node and its namespace
// and name are the sandbox metadata's; a mirror pod only for a static pod's
// sandbox; two candidates are none (README.md, "Threat model").
// The node's resolver config is the last-good snapshot of a
// hostresolv.Watcher, behind HostConfig; no file is read per sandbox.
// dns_config is replaced by the engine's result; the hostname is replaced
// only with facts from the API server and never for a host-network sandbox.
//
// Limits: LimitsTrim trims as kubelet does. It logs a line, counts
// dnsconfigurer_cri_limit_exceeded_total and, when an API server is
// configured, posts a Warning Event DNSConfigForming on the pod through a
// podfacts.EventSink. LimitsReject fails the call with InvalidArgument
// naming the limit, the pod and the values over it.
//
// Failure policy: on an internal error (a malformed request, an unusable
// host resolver config, an engine error, a panic) FailOpen forwards
// kubelet's request unchanged and counts it in
// dnsconfigurer_cri_rewrite_errors_total; FailClosed fails the call.
//
// # Runtime connection
//
// Each kubelet connection gets its own runtime connection; when the
// runtime goes away, both are closed and kubelet reconnects. While the
// runtime cannot be reached, a connection is answered by a gRPC server of
// its own (unavailable.go) that fails every call at once with Unavailable
// and the dial error instead of letting it wait; once the runtime answers
// again (probed with backoff capped by WithMaxBackoff) that server stops
// gracefully, which sends GOAWAY, and kubelet reconnects through the
// relay.
// A gRPC connection of its own reports the runtime's health (RuntimeReady,
// dnsconfigurer_cri_runtime_connected). The shim keeps nothing on disk:
// after a restart kubelet reconnects and carries on. Listen removes a stale
// socket, refuses a path a live process serves, and creates the socket with
// mode 0660.
//
// WithMaxConns bounds the client connections: 4096 by default, and at
// most ConnBudget of the open-file limit. Past it the longest idle one is
// evicted with GOAWAY. A new one is refused only when every one has a call
// in flight.
//
// # Metrics
//
// The dnsconfigurer_cri_* series are registered on the Registerer given
// with WithRegistry. README.md, "Metrics", lists them.
//
// The pod lookup, the inverse, the Events and the limits verdict are
// pkg/podfacts', which the NRI plugin (pkg/nriplugin) uses too, so that
// both adapters decide a pod's DNS the same way. Neither imports the
// other.
//
// The package imports pkg/h2relay, pkg/podfacts, gRPC, cri-api, client-go
// and api/v1alpha1 (its defaults); it has no HTTP/2 code of its own.
// pkg/policy, pkg/fqdn, pkg/h2relay, pkg/podfacts, pkg/nriplugin and api/
// must not import it.
package cri
