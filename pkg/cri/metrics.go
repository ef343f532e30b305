package cri

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
)

// metrics are the shim's Prometheus metrics, registered on the Registerer
// given to New (none when it is nil). Every name is dnsconfigurer_cri_*.
type metrics struct {
	calls          *prometheus.CounterVec   // method, code
	callDuration   *prometheus.HistogramVec // method
	sandboxes      *prometheus.CounterVec   // source, outcome
	rewriteErrors  *prometheus.CounterVec   // reason
	limits         *prometheus.CounterVec   // limit, action
	lookups        *prometheus.CounterVec   // result
	rewriteSeconds prometheus.Histogram
	runtimeUp      prometheus.Gauge
	refusedConns   prometheus.Counter
	evictedConns   prometheus.Counter
	conns          prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	return prom.New(reg, "cri", func(s *prom.Set) *metrics {
		return &metrics{
			calls: s.CounterVec("calls_total",
				"CRI calls handled, by full method (\"other\" for methods this build does not know) and gRPC status code.",
				"method", "code"),
			callDuration: s.HistogramVec("call_duration_seconds",
				"Duration of CRI calls through the shim, runtime included, by full method.",
				[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 120},
				"method"),
			sandboxes: s.CounterVec("sandboxes_total",
				"RunPodSandbox requests by where the pod's facts came from (apiserver, sandbox, none) and outcome (rewritten, unchanged, skipped, rejected, failed_open, failed_closed).",
				"source", "outcome"),
			rewriteErrors: s.CounterVec("rewrite_errors_total",
				"Internal errors computing a sandbox's DNS (bad_request, host_config, compute, panic); with failure policy open the request was forwarded unchanged.",
				"reason"),
			limits: s.CounterVec("limit_exceeded_total",
				"Sandboxes whose DNS exceeded kubelet's limits, by limit (nameservers, searches) and action (trimmed, rejected).",
				"limit", "action"),
			lookups: s.CounterVec("pod_lookups_total",
				"Pod lookups in the API server cache by UID: hit, miss (fell back to the sandbox config).",
				"result"),
			rewriteSeconds: s.Histogram("rewrite_duration_seconds",
				"Time the shim spends computing a sandbox's DNS before forwarding it, pod lookup included.",
				prom.AgentBuckets),
			refusedConns: s.Counter("connections_refused_total",
				"New kubelet-side connections closed unserved: the shim served its maximum (maxConnections) and every connection had a call in flight."),
			evictedConns: s.Counter("connections_evicted_total",
				"Idle kubelet-side connections (no call in flight) sent GOAWAY and closed, the longest idle first, to serve a new one beyond the maximum (maxConnections)."),
			conns: s.Gauge("connections", "Kubelet-side connections being served."),
			runtimeUp: s.Gauge("runtime_connected",
				"1 while the connection to the container runtime is ready, 0 otherwise."),
		}
	})
}
