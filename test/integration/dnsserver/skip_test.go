package dnsserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// skippedSeries is the series of objects_skipped_total for kind and reason.
func skippedSeries(kind, reason string) string {
	return testkit.Key("dnsconfigurer_dnsserver_objects_skipped_total", "kind", kind, "reason", reason)
}

// serverVersion is the API server's version.
func serverVersion(t *testing.T, client kubernetes.Interface) *version.Version {
	t.Helper()
	info, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		t.Fatalf("server version %q: %v", info.GitVersion, err)
	}
	return v
}

// TestDigitFirstService: a Service named with a digit first, which the
// API server accepts since Kubernetes 1.36 (KEP-5311, locked on in 1.37),
// is answered over real UDP and TCP for every record shape, as the
// upstream e2e spec "should work with a service name that starts with a
// digit" asks of CoreDNS.
func TestDigitFirstService(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns, client, srv := syncedServer(t, cp)
	if v := serverVersion(t, client); v.LessThan(version.MajorMinor(1, 36)) {
		t.Skipf("kube-apiserver %s refuses Service names that start with a digit (DNS-1035 before 1.36)", v)
	}
	name := func(s string) string { return s + "." + ns + ".svc." + zone + "." }
	// The control plane is shared: other tests' namespaces may hold
	// objects the server skips. Those were counted by the first sync.
	before := testkit.Gather(t, srv.reg).Sum("dnsconfigurer_dnsserver_objects_skipped_total")
	svc := createService(t, client, ns, "1kubernetes", corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}})
	waitAnswer(t, srv.addr, name("1kubernetes"), dns.TypeA, "NOERROR A "+svc.Spec.ClusterIP)
	mustAnswer(t, srv.addr, "_https._tcp."+name("1kubernetes"), dns.TypeSRV, "NOERROR SRV 0 100 443 "+name("1kubernetes"))
	reverse, err := dns.ReverseAddr(svc.Spec.ClusterIP)
	if err != nil {
		t.Fatal(err)
	}
	mustAnswer(t, srv.addr, reverse, dns.TypePTR, "NOERROR PTR "+name("1kubernetes"))

	// Its endpoints, one named with a digit first.
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "1kubernetes-1", Labels: map[string]string{discoveryv1.LabelServiceName: "1kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.7.1"}, Hostname: ptr("0-web"), Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
			{Addresses: []string{"10.244.7.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(443)), Protocol: ptr(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, srv.addr, "0-web."+name("1kubernetes"), dns.TypeA, "NOERROR A 10.244.7.1")
	mustAnswer(t, srv.addr, "10-244-7-2."+name("1kubernetes"), dns.TypeA, "NOERROR A 10.244.7.2")
	mustAnswer(t, srv.addr, "1.7.244.10.in-addr.arpa.", dns.TypePTR, "NOERROR PTR 0-web."+name("1kubernetes"))

	// Headless, and an ExternalName to it.
	createHeadless(t, client, ns, "2db", "10.244.7.3")
	waitAnswer(t, srv.addr, name("2db"), dns.TypeA, "NOERROR A 10.244.7.3")
	createService(t, client, ns, "3alias", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: name("2db")})
	waitAnswer(t, srv.addr, name("3alias"), dns.TypeA, "NOERROR A 10.244.7.3 CNAME "+name("2db"))
	if got := testkit.Gather(t, srv.reg).Sum("dnsconfigurer_dnsserver_objects_skipped_total") - before; got != 0 {
		t.Errorf("skipped %v objects of %s, want none", got, ns)
	}
}

// TestUnservableObject: an ExternalName whose target has a label over 63
// bytes passes the API server's check (a DNS-1123 subdomain, labels not
// measured) but no DNS message can carry it. The server does not answer
// for it, counts it once, posts one Warning Event on it naming the field,
// and answers the other names; an update with the same problem is not
// reported again, and the fix is served.
func TestUnservableObject(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns, client, srv := syncedServer(t, cp)
	name := func(s string) string { return s + "." + ns + ".svc." + zone + "." }
	long := strings.Repeat("a", 64) + ".example.com"
	svcs := client.CoreV1().Services(ns)
	skipped := skippedSeries(kubefeed.KindService, kubefeed.ReasonInvalidField)
	// The control plane is shared: other tests' namespaces may hold
	// objects the server skips. Those were counted by the first sync.
	before := testkit.Gather(t, srv.reg)[skipped]
	_, err := svcs.Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: long}}, metav1.CreateOptions{})
	if apierrors.IsInvalid(err) {
		t.Skipf("the API server refuses what DNS cannot carry (%v): it stores nothing the server must skip", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	counted := func(want float64) func() error {
		return func() error {
			if got := testkit.Gather(t, srv.reg)[skipped] - before; got != want {
				return fmt.Errorf("%s = %v more, want %v", skipped, got, want)
			}
			return nil
		}
	}
	testkit.WaitFor(t, followBound, counted(1))
	mustAnswer(t, srv.addr, name("ext"), dns.TypeCNAME, "NXDOMAIN")

	var event corev1.Event
	testkit.WaitFor(t, followBound, func() error {
		list, err := client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=ext"})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d events on ext, want 1: %v", len(list.Items), list.Items)
		}
		event = list.Items[0]
		return nil
	})
	if event.Type != corev1.EventTypeWarning || event.Reason != kubefeed.EventReasonSkipped || event.InvolvedObject.Kind != "Service" ||
		!strings.Contains(event.Message, `spec.externalName "`+long+`"`) || event.Source.Component != "dnsconfigurer-dns" {
		t.Errorf("event %s %s on %s (%s): %q", event.Type, event.Reason, event.InvolvedObject.Kind, event.Source.Component, event.Message)
	}

	// The same problem again: a later Service is served, nothing more is
	// counted (the watch delivers a namespace's Services in order).
	updateService(t, client, ns, "ext", func(s *corev1.Service) { s.Annotations = map[string]string{"touched": "1"} })
	web := createService(t, client, ns, "web", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}})
	waitAnswer(t, srv.addr, name("web"), dns.TypeA, "NOERROR A "+web.Spec.ClusterIP)
	if err := counted(1)(); err != nil {
		t.Error(err)
	}
	updateService(t, client, ns, "ext", func(s *corev1.Service) { s.Spec.ExternalName = "example.com" })
	waitAnswer(t, srv.addr, name("ext"), dns.TypeCNAME, "NOERROR CNAME example.com.")
}
