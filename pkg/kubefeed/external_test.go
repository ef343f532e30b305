package kubefeed

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// TestToServiceExternalIPs: spec.externalIPs then the LoadBalancer
// ingress IPs, as CoreDNS's object.Service; what does not parse (and a
// hostname ingress) is left out, the Service kept.
func TestToServiceExternalIPs(t *testing.T) {
	lb := func(in ...corev1.LoadBalancerIngress) corev1.ServiceStatus {
		return corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: in}}
	}
	for _, tc := range []struct {
		name   string
		spec   corev1.ServiceSpec
		status corev1.ServiceStatus
		want   []string
	}{
		{"none", corev1.ServiceSpec{ClusterIP: "10.96.0.1"}, corev1.ServiceStatus{}, nil},
		{"externalIPs", corev1.ServiceSpec{ClusterIP: "10.96.0.1", ExternalIPs: []string{"198.51.100.7", "2001:db8::7"}}, corev1.ServiceStatus{},
			[]string{"198.51.100.7", "2001:db8::7"}},
		{"both, spec first", corev1.ServiceSpec{ClusterIP: "10.96.0.1", Type: corev1.ServiceTypeLoadBalancer, ExternalIPs: []string{"198.51.100.7"}},
			lb(corev1.LoadBalancerIngress{IP: "203.0.113.10"}, corev1.LoadBalancerIngress{Hostname: "lb.example.net"}),
			[]string{"198.51.100.7", "203.0.113.10"}},
		{"mapped and bad", corev1.ServiceSpec{ClusterIP: "None", ExternalIPs: []string{"::ffff:198.51.100.7", "nope"}}, corev1.ServiceStatus{},
			[]string{"198.51.100.7"}},
		{"ExternalName", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "x.example", ExternalIPs: []string{"198.51.100.7"}},
			corev1.ServiceStatus{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: tc.spec, Status: tc.status})
			if err != nil {
				t.Fatal(err)
			}
			var ips []string
			for _, a := range got.ExternalIPs {
				ips = append(ips, a.String())
			}
			if !slices.Equal(ips, tc.want) {
				t.Fatalf("ExternalIPs %v, want %v", ips, tc.want)
			}
		})
	}
}

// TestClusterFeedLoadBalancerStatus: a LoadBalancer's ingress IP, written
// to its status after the Service exists, reaches the snapshot.
func TestClusterFeedLoadBalancerStatus(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: "prod"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.21",
			Ports: []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP}}}}
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}, svc)
	st := newStore(t, store.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Cluster{Client: client, Store: st}).Run(ctx) }()
	external := func() []netip.Addr {
		if s := st.Snapshot(); s != nil {
			if n, ok := s.External("lb", "prod"); ok {
				return n.A()
			}
		}
		return nil
	}
	testkit.WaitEqual(t, 10*time.Second, "first sync", func() bool { return st.Snapshot() != nil }, true)
	if got := external(); got != nil {
		t.Fatalf("external addresses before the status: %v", got)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}}
	if _, err := client.CoreV1().Services("prod").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "ingress IP", func() bool {
		return slices.Equal(external(), []netip.Addr{netip.MustParseAddr("203.0.113.10")})
	}, true)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
}
