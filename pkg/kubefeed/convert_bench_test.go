package kubefeed

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkToEndpointSlice converts a slice of 50 ready endpoints: bare,
// as the churn benchmark's headless Services have (test/bench TestChurn),
// and as the EndpointSlice controller writes them, each endpoint with its
// pod as targetRef and its node.
func BenchmarkToEndpointSlice(b *testing.B) {
	for _, c := range []struct {
		name       string
		controller bool
	}{{"bare", false}, {"controller", true}} {
		b.Run(c.name, func(b *testing.B) {
			sl := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(80)), Protocol: ptr(corev1.ProtocolTCP)}},
			}
			for i := range 50 {
				ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}
				if c.controller {
					ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("web-7d9f8c6b5-%05d", i), UID: "0b8f1a52-5d6e-4c1b-9a7e-3f2d1c0b9a8e"}
					ep.NodeName = ptr(fmt.Sprintf("node-%d", i%7))
				}
				sl.Endpoints = append(sl.Endpoints, ep)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ToEndpointSlice(sl); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
