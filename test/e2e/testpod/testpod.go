// Package testpod builds the pods the node e2e tests run through the shim
// and the NRI plugin. There is one per dnsPolicy, and others with the
// autopath annotation, a dnsConfig or the host network.
package testpod

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// New is pod name in namespace team on node-1, with UID number n and one
// container of image, under dnsPolicy p; each mutate then changes it.
func New(name string, n int, p corev1.DNSPolicy, image string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", n)),
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		Spec: corev1.PodSpec{NodeName: "node-1", DNSPolicy: p, Containers: []corev1.Container{{Name: "main", Image: image}}},
	}
	for _, m := range mutate {
		m(pod)
	}
	return pod
}

// WithConfig gives the pod a dnsConfig: a nameserver, a search path and
// the options ndots:2 and edns0.
func WithConfig(p *corev1.Pod) {
	ndots := "2"
	p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.233.0.53"}, Searches: []string{"extra.test"},
		Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}, {Name: "edns0"}}}
}

// Autopath sets the pod's annotation to ClusterFirstWithAutopath.
func Autopath(p *corev1.Pod) {
	p.Annotations[policy.AnnotationDNSPolicy] = string(policy.ClusterFirstWithAutopath)
}

// HostNetwork puts the pod on the node's network.
func HostNetwork(p *corev1.Pod) { p.Spec.HostNetwork = true }

// OnlyConfig is the dnsConfig of a None pod: one nameserver and one
// search path.
func OnlyConfig(p *corev1.Pod) {
	p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.233.0.9"}, Searches: []string{"only.test"}}
}
