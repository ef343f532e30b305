package nriplugin

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Values of the containers_total result label.
const (
	resultAdjusted  = "adjusted"
	resultUnchanged = "unchanged"
	resultRejected  = "rejected"
)

// Values of the pod_lookups_total result label.
const (
	lookupHit  = "hit"  // the API server cache had the pod
	lookupMiss = "miss" // it did not in time: the facts come from the sandbox file
)

// Values of the errors_total stage label: where an internal error happened.
const (
	stageFacts      = "facts"       // the sandbox resolv.conf unreadable or unparsable, or the pod UID unusable
	stageHostConfig = "host_config" // the node's resolver config is unusable
	stageCompute    = "compute"     // the engine failed
	stageWrite      = "write"       // the pod file could not be written
	stageRemove     = "remove"      // a pod's state could not be removed
	stagePrune      = "prune"       // the state dir could not be cleaned at Synchronize
	stageUpdate     = "update"      // a live update of a running pod's file failed
)

// metrics are the plugin's Prometheus metrics, registered on the
// Registerer given to WithRegistry (none without one). Every name is
// dnsconfigurer_nri_*.
type metrics struct {
	containers    *prometheus.CounterVec // result
	errors        *prometheus.CounterVec // stage
	adjustSeconds prometheus.Histogram
	connected     prometheus.Gauge
	updates       prometheus.Counter
	lookups       *prometheus.CounterVec // result
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "dnsconfigurer", "nri"
	m := &metrics{
		containers: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "containers_total",
			Help: "CreateContainer events by result: adjusted (resolv.conf replaced), unchanged (left with kubelet's file), rejected (over the limits in limits mode reject)."},
			[]string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "errors_total",
			Help: "Internal errors by stage (facts, host_config, compute, write, remove, prune, update); a container that hit one was created unchanged."},
			[]string{"stage"}),
		adjustSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "adjust_duration_seconds",
			Help:    "Time the plugin spends on a CreateContainer event, pod lookup and file write included.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .01, .1, 1, 5}}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "connected",
			Help: "1 while the plugin is registered on the runtime's NRI socket, 0 otherwise."}),
		updates: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "live_updates_total",
			Help: "Running pods' files rewritten in place after a change of the node's resolver config."}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "pod_lookups_total",
			Help: "Pod lookups in the API server cache at CreateContainer: hit, miss (not seen within the lookup timeout; the facts come from the sandbox resolv.conf)."},
			[]string{"result"}),
	}
	// Pre-resolve the bounded label values so that they are exported at 0.
	for _, r := range []string{resultAdjusted, resultUnchanged, resultRejected} {
		m.containers.WithLabelValues(r)
	}
	for _, r := range []string{lookupHit, lookupMiss} {
		m.lookups.WithLabelValues(r)
	}
	for _, s := range []string{stageFacts, stageHostConfig, stageCompute, stageWrite, stageRemove, stagePrune, stageUpdate} {
		m.errors.WithLabelValues(s)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.containers, m.errors, m.adjustSeconds, m.connected, m.updates, m.lookups} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
