package feed

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkToEndpointSlice converts a slice of 50 ready endpoints, as the
// churn benchmark's headless Services have (test/bench TestChurn).
func BenchmarkToEndpointSlice(b *testing.B) {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(80)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for i := range 50 {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ToEndpointSlice(sl); err != nil {
			b.Fatal(err)
		}
	}
}
