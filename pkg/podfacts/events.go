package podfacts

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// PodRef names a pod for an Event. Labels, when known, tell its workload
// (see Workload).
type PodRef struct {
	Namespace, Name, UID string
	Labels               map[string]string
}

// EventSink reports Warning Events about pods.
type EventSink interface {
	Warning(pod PodRef, reason, message string)
}

// Recorder is an EventSink that records Kubernetes Events through a
// client-go EventRecorder (aggregated and rate-limited as kubelet's are).
type Recorder struct {
	rec record.EventRecorder
}

var _ EventSink = (*Recorder)(nil)

// Event source components of the shim and the NRI plugin.
const (
	ComponentShim = "dnsconfigurer-shim"
	ComponentNRI  = "dnsconfigurer-nri"
)

// NewEventRecorder returns an EventSink that creates Events through client
// with source component (ComponentShim, ComponentNRI) on node, and a
// function that stops it (flushing what is queued is best effort).
func NewEventRecorder(client kubernetes.Interface, component, node string) (*Recorder, func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: node})
	return &Recorder{rec: rec}, b.Shutdown
}

// NewAgentEvents is the agents' EventSink: NewEventRecorder behind
// WorkloadEvents (once per workload and EventWindow), its counter on reg.
func NewAgentEvents(client kubernetes.Interface, component, node string, reg prometheus.Registerer) (EventSink, func(), error) {
	rec, stop := NewEventRecorder(client, component, node)
	w, err := NewWorkloadEvents(rec, EventWindow, EventWorkloads, reg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return w, stop, nil
}

// Warning records a Warning Event on the pod.
func (r *Recorder) Warning(pod PodRef, reason, message string) {
	r.rec.Event(&corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1",
		Namespace: pod.Namespace, Name: pod.Name, UID: types.UID(pod.UID),
	}, corev1.EventTypeWarning, reason, message)
}
