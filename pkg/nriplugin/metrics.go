package nriplugin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
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
	return prom.New(reg, "nri", func(s *prom.Set) *metrics {
		m := &metrics{
			containers: s.CounterVec("containers_total",
				"CreateContainer events by result: adjusted (resolv.conf replaced), unchanged (left with kubelet's file), rejected (over the limits in limits mode reject).",
				"result"),
			errors: s.CounterVec("errors_total",
				"Internal errors by stage (facts, host_config, compute, write, remove, prune, update); a container that hit one was created unchanged.",
				"stage"),
			adjustSeconds: s.Histogram("adjust_duration_seconds",
				"Time the plugin spends on a CreateContainer event, pod lookup and file write included.",
				prom.AgentBuckets),
			connected: s.Gauge("connected",
				"1 while the plugin is registered on the runtime's NRI socket, 0 otherwise."),
			updates: s.Counter("live_updates_total",
				"Running pods' files rewritten in place after a change of the node's resolver config."),
			lookups: s.CounterVec("pod_lookups_total",
				"Pod lookups in the API server cache at CreateContainer: hit, miss (not seen within the lookup timeout; the facts come from the sandbox resolv.conf).",
				"result"),
		}
		// Pre-resolve the bounded label values so that they are exported at 0.
		for _, r := range []string{resultAdjusted, resultUnchanged, resultRejected} {
			m.containers.WithLabelValues(r)
		}
		for _, r := range []string{lookupHit, lookupMiss} {
			m.lookups.WithLabelValues(r)
		}
		for _, st := range []string{stageFacts, stageHostConfig, stageCompute, stageWrite, stageRemove, stagePrune, stageUpdate} {
			m.errors.WithLabelValues(st)
		}
		return m
	})
}
