package cri

import (
	"github.com/prometheus/client_golang/prometheus"
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
	const ns, sub = "dnsconfigurer", "cri"
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "calls_total",
			Help: "CRI calls handled, by full method (\"other\" for methods this build does not know) and gRPC status code."},
			[]string{"method", "code"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "call_duration_seconds",
			Help:    "Duration of CRI calls through the shim, runtime included, by full method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 120}},
			[]string{"method"}),
		sandboxes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "sandboxes_total",
			Help: "RunPodSandbox requests by where the pod's facts came from (apiserver, sandbox, none) and outcome (rewritten, unchanged, skipped, rejected, failed_open, failed_closed)."},
			[]string{"source", "outcome"}),
		rewriteErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "rewrite_errors_total",
			Help: "Internal errors computing a sandbox's DNS (bad_request, host_config, compute, panic); with failure policy open the request was forwarded unchanged."},
			[]string{"reason"}),
		limits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "limit_exceeded_total",
			Help: "Sandboxes whose DNS exceeded kubelet's limits, by limit (nameservers, searches) and action (trimmed, rejected)."},
			[]string{"limit", "action"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "pod_lookups_total",
			Help: "Pod lookups in the API server cache by UID: hit, miss (fell back to the sandbox config)."},
			[]string{"result"}),
		rewriteSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "rewrite_duration_seconds",
			Help:    "Time the shim spends computing a sandbox's DNS before forwarding it, pod lookup included.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .01, .1, 1, 5}}),
		refusedConns: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "connections_refused_total",
			Help: "New kubelet-side connections closed unserved: the shim served its maximum (maxConnections) and every connection had a call in flight."}),
		evictedConns: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "connections_evicted_total",
			Help: "Idle kubelet-side connections (no call in flight) sent GOAWAY and closed, the longest idle first, to serve a new one beyond the maximum (maxConnections)."}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "connections",
			Help: "Kubelet-side connections being served."}),
		runtimeUp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "runtime_connected",
			Help: "1 while the connection to the container runtime is ready, 0 otherwise."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.calls, m.callDuration, m.sandboxes, m.rewriteErrors, m.limits, m.lookups, m.rewriteSeconds, m.runtimeUp, m.refusedConns, m.evictedConns, m.conns} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
