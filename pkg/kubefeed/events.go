package kubefeed

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// EventComponent is the source component of the cluster DNS's Events.
const EventComponent = "dnsconfigurer-dns"

// NewEventRecorder posts the feed's Events (an object it skips) through
// client, as core/v1 Events that client-go aggregates and rate limits. It
// returns the function that stops it. The ServiceAccount needs create and
// patch on events (deploy/dnsserver/rbac.yaml).
func NewEventRecorder(client kubernetes.Interface) (EventRecorder, func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent}), b.Shutdown
}
