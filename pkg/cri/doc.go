// Package cri is dnsconfigurer's CRI shim: a gRPC server that sits on
// kubelet's --container-runtime-endpoint in front of containerd, rewrites
// the DNS config (and hostname) of RunPodSandbox requests with pkg/policy,
// and forwards every call to the runtime.
//
// # Interception
//
// The server registers a service description for runtime.v1.RuntimeService
// holding RunPodSandbox only. Every other call, all of ImageService and any
// method or service this build does not know (a newer kubelet's) reaches
// grpc.UnknownServiceHandler and is forwarded with a pass-through codec:
// message bytes are never decoded, and errors, status codes and details,
// header and trailer metadata and deadlines pass through unchanged.
// Streams (GetContainerEvents and the other server-streaming calls, and
// unknown methods of any shape) are pumped both ways. No Unimplemented
// server is embedded, so nothing is ever answered Unimplemented by the shim.
// RunPodSandbox's request is decoded (unknown fields survive re-encoding)
// and its response passed through undecoded.
//
// # The rewrite
//
// A pod's facts come from a PodLookup (PodInformer: an informer on the
// pods with spec.nodeName=<node>, looked up by UID, waiting up to the
// lookup timeout for a pod not seen yet) or, without an API server or for a
// pod it does not know, from the sandbox config itself (see FromSandbox).
// The node's resolver config is the last-good snapshot of a
// hostresolv.Watcher, behind HostConfig; no file is read per sandbox.
// dns_config is replaced by the engine's result; the hostname is replaced
// only with facts from the API server and never for a host-network sandbox.
//
// Limits: LimitsTrim trims as kubelet does (Warning Event DNSConfigForming
// on the pod through an EventSink when an API server is configured, a log
// line, dnsconfigurer_cri_limit_exceeded_total); LimitsReject fails the call
// with InvalidArgument naming the limit, the pod and the values over it.
//
// Failure policy: on an internal error (a malformed request, an unusable
// host resolver config, an engine error, a panic) FailOpen forwards
// kubelet's request unchanged and counts it in
// dnsconfigurer_cri_rewrite_errors_total; FailClosed fails the call.
//
// # Runtime connection
//
// gRPC reconnects to the runtime with exponential backoff (capped by
// WithMaxBackoff); calls made while it is down fail at once with
// Unavailable instead of waiting. The shim keeps nothing on disk: after a
// restart kubelet reconnects and carries on. Listen removes a stale socket,
// refuses a path a live process serves, and creates the socket with mode
// 0660.
//
// # Metrics
//
// dnsconfigurer_cri_calls_total{method,code},
// dnsconfigurer_cri_call_duration_seconds{method},
// dnsconfigurer_cri_sandboxes_total{source,outcome},
// dnsconfigurer_cri_rewrite_errors_total{reason},
// dnsconfigurer_cri_limit_exceeded_total{limit,action},
// dnsconfigurer_cri_pod_lookups_total{result},
// dnsconfigurer_cri_rewrite_duration_seconds and
// dnsconfigurer_cri_runtime_connected, registered on the Registerer given
// with WithRegistry.
//
// The package imports gRPC, cri-api and client-go; pkg/policy, pkg/fqdn
// and api/ must not import it.
package cri
