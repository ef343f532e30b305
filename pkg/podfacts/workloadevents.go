package podfacts

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Workload names the controller a pod most likely belongs to, from the
// labels and name its controller gives it (a CRI sandbox and an NRI pod
// carry no owner references): a Job (job-name labels), a Deployment
// (pod-template-hash: <deployment>-<hash>-<suffix>), a StatefulSet
// (statefulset.kubernetes.io/pod-name: <set>-<ordinal>) or a DaemonSet
// (controller-revision-hash with pod-template-generation: <set>-<suffix>).
// ok is false for any other pod.
func Workload(pod PodRef) (kind, name string, ok bool) {
	l := pod.Labels
	cut := func(s string) string {
		if i := strings.LastIndexByte(s, '-'); i > 0 {
			return s[:i]
		}
		return ""
	}
	switch {
	case l["batch.kubernetes.io/job-name"] != "":
		return "Job", l["batch.kubernetes.io/job-name"], true
	case l["job-name"] != "":
		return "Job", l["job-name"], true
	case l["pod-template-hash"] != "":
		if i := strings.LastIndex(pod.Name, "-"+l["pod-template-hash"]+"-"); i > 0 {
			return "Deployment", pod.Name[:i], true
		}
	case l["statefulset.kubernetes.io/pod-name"] == pod.Name && cut(pod.Name) != "":
		return "StatefulSet", cut(pod.Name), true
	case l["controller-revision-hash"] != "" && l["pod-template-generation"] != "" && cut(pod.Name) != "":
		return "DaemonSet", cut(pod.Name), true
	}
	return "", "", false
}

// WorkloadEvents is an EventSink that posts a limit warning once per
// workload and window instead of once per pod: kubelet's DNSConfigForming
// Events come once per pod, so a Deployment of 200 replicas with a bad
// dnsConfig posts 200 (kubernetes/kubernetes#126585, #82756). The first
// pod's Event names the workload and the fix; the others within the
// window are counted (dnsconfigurer_cri_events_suppressed_total), not
// posted. Pods of no known workload are posted as they come. It holds at
// most maxKeys workloads; past that, expired ones are dropped first, then
// Events pass through undeduplicated rather than grow it.
type WorkloadEvents struct {
	next       EventSink
	window     time.Duration
	maxKeys    int
	now        func() time.Time
	suppressed *prometheus.CounterVec // reason

	mu   sync.Mutex
	seen map[string]time.Time // workload and message → when it was posted
}

var _ EventSink = (*WorkloadEvents)(nil)

// The window and the bound of the agents' WorkloadEvents.
const (
	EventWindow    = time.Hour
	EventWorkloads = 4096
)

// NewWorkloadEvents wraps next; the counter is registered on reg (none
// when reg is nil).
func NewWorkloadEvents(next EventSink, window time.Duration, maxKeys int, reg prometheus.Registerer) (*WorkloadEvents, error) {
	w := &WorkloadEvents{next: next, window: window, maxKeys: maxKeys, now: time.Now, seen: map[string]time.Time{},
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dnsconfigurer", Subsystem: "cri", Name: "events_suppressed_total",
			Help: "Warning Events not posted because another pod of the same workload posted the same one within the window, by reason."},
			[]string{"reason"})}
	if reg != nil {
		if err := reg.Register(w.suppressed); err != nil {
			return nil, fmt.Errorf("register events_suppressed_total: %w", err)
		}
	}
	return w, nil
}

// Warning posts the Event, or counts it when the pod's workload posted it
// within the window.
func (w *WorkloadEvents) Warning(pod PodRef, reason, message string) {
	kind, name, ok := Workload(pod)
	if !ok {
		w.next.Warning(pod, reason, message)
		return
	}
	key := pod.Namespace + "/" + kind + "/" + name + "\x00" + reason + "\x00" + message
	now := w.now()
	w.mu.Lock()
	at, seen := w.seen[key]
	post := !seen || now.Sub(at) >= w.window
	if post {
		if !seen && len(w.seen) >= w.maxKeys {
			for k, t := range w.seen {
				if now.Sub(t) >= w.window {
					delete(w.seen, k)
				}
			}
		}
		if seen || len(w.seen) < w.maxKeys {
			w.seen[key] = now
		}
	}
	w.mu.Unlock()
	if !post {
		w.suppressed.WithLabelValues(reason).Inc()
		return
	}
	w.next.Warning(pod, reason, fmt.Sprintf("%s; every pod of %s %s gets this (posted once per %v): %s",
		message, kind, name, w.window, fixFor(kind, message)))
}

// fixFor is the fix of a limit warning, worded for the workload's kind.
func fixFor(kind, message string) string {
	spec := "spec.template.spec"
	if kind == "CronJob" {
		spec = "spec.jobTemplate.spec.template.spec"
	}
	switch {
	case strings.HasPrefix(message, "Nameserver limits"):
		return "list at most 3 nameservers in " + spec + ".dnsConfig.nameservers, counting the node's for dnsPolicy ClusterFirst and Default"
	case strings.HasPrefix(message, "Search Line limits"):
		return "keep " + spec + ".dnsConfig.searches, with the cluster's and the node's search domains, within 32 domains and 2048 characters"
	}
	return "see `dnsconfigurer validate --strict` on the workload"
}
