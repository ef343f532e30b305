package dnsserver_test

import (
	"context"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// TestServiceRecords creates, changes and deletes a ClusterIP Service, a
// headless Service with its EndpointSlice and an ExternalName Service
// through the API, and follows each change in the DNS answers.
func TestServiceRecords(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns, client, srv := syncedServer(t, cp)
	ctx := t.Context()
	svcs := client.CoreV1().Services(ns)
	epSlices := client.DiscoveryV1().EndpointSlices(ns)
	name := func(s string) string { return s + "." + ns + ".svc." + zone + "." }

	// The namespace exists (namespace informer): an empty non-terminal.
	waitAnswer(t, srv.addr, ns+".svc."+zone, dns.TypeA, "NOERROR")
	mustAnswer(t, srv.addr, name("web"), dns.TypeA, "NXDOMAIN")

	var web *corev1.Service
	if !t.Run("clusterip create", func(t *testing.T) {
		var err error
		web = createService(t, client, ns, "web", corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		}})
		waitAnswer(t, srv.addr, name("web"), dns.TypeA, "NOERROR A "+web.Spec.ClusterIP)
		mustAnswer(t, srv.addr, "_http._tcp."+name("web"), dns.TypeSRV, "NOERROR SRV 0 100 80 "+name("web"))
		mustAnswer(t, srv.addr, "_dns._udp."+name("web"), dns.TypeSRV, "NOERROR SRV 0 100 53 "+name("web"))
		mustAnswer(t, srv.addr, "_dns._tcp."+name("web"), dns.TypeSRV, "NXDOMAIN")
		reverse, err := dns.ReverseAddr(web.Spec.ClusterIP)
		if err != nil {
			t.Fatal(err)
		}
		mustAnswer(t, srv.addr, reverse, dns.TypePTR, "NOERROR PTR "+name("web"))
	}) {
		t.FailNow()
	}

	t.Run("clusterip port rename", func(t *testing.T) {
		updateService(t, client, ns, "web", func(s *corev1.Service) { s.Spec.Ports[0].Name = "www" })
		waitAnswer(t, srv.addr, "_www._tcp."+name("web"), dns.TypeSRV, "NOERROR SRV 0 100 80 "+name("web"))
		mustAnswer(t, srv.addr, "_http._tcp."+name("web"), dns.TypeSRV, "NXDOMAIN")
		mustAnswer(t, srv.addr, name("web"), dns.TypeA, "NOERROR A "+web.Spec.ClusterIP)
	})

	t.Run("headless endpoints", func(t *testing.T) {
		createService(t, client, ns, "db", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}}})
		// A headless Service without a ready endpoint has no name, as in
		// CoreDNS 1.15 (pkg/clusterdns README, "Where we differ").
		waitAnswer(t, srv.addr, name("db"), dns.TypeA, "NXDOMAIN")

		slice, err := epSlices.Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.1.1"}, Hostname: ptr("db-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
				{Addresses: []string{"10.244.1.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}},
			},
			Ports: []discoveryv1.EndpointPort{{Name: ptr("pg"), Port: ptr(int32(5432)), Protocol: ptr(corev1.ProtocolTCP)}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitAnswer(t, srv.addr, name("db"), dns.TypeA, "NOERROR A 10.244.1.1")
		mustAnswer(t, srv.addr, "db-0."+name("db"), dns.TypeA, "NOERROR A 10.244.1.1")
		mustAnswer(t, srv.addr, "_pg._tcp."+name("db"), dns.TypeSRV, "NOERROR SRV 0 100 5432 db-0."+name("db"))
		mustAnswer(t, srv.addr, "10-244-1-9."+name("db"), dns.TypeA, "NXDOMAIN") // not ready

		// An endpoint added, without a hostname: its dashed-IP name.
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.1.2"}})
		if slice, err = epSlices.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAnswer(t, srv.addr, name("db"), dns.TypeA, "NOERROR A 10.244.1.1 A 10.244.1.2")
		mustAnswer(t, srv.addr, "10-244-1-2."+name("db"), dns.TypeA, "NOERROR A 10.244.1.2")
		mustAnswer(t, srv.addr, "_pg._tcp."+name("db"), dns.TypeSRV,
			"NOERROR SRV 0 50 5432 10-244-1-2."+name("db")+" SRV 0 50 5432 db-0."+name("db"))
		mustAnswer(t, srv.addr, "2.1.244.10.in-addr.arpa.", dns.TypePTR, "NOERROR PTR 10-244-1-2."+name("db"))

		// The first endpoint removed.
		slice.Endpoints = slice.Endpoints[1:]
		if slice, err = epSlices.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAnswer(t, srv.addr, name("db"), dns.TypeA, "NOERROR A 10.244.1.2")
		mustAnswer(t, srv.addr, "db-0."+name("db"), dns.TypeA, "NXDOMAIN")

		// A hostname given to the remaining endpoint replaces its dashed name.
		slice.Endpoints[1].Hostname = ptr("db-1")
		if slice, err = epSlices.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAnswer(t, srv.addr, "db-1."+name("db"), dns.TypeA, "NOERROR A 10.244.1.2")
		mustAnswer(t, srv.addr, "10-244-1-2."+name("db"), dns.TypeA, "NXDOMAIN")

		// The not-ready endpoint becomes ready.
		slice.Endpoints[0].Conditions.Ready = ptr(true)
		if _, err = epSlices.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAnswer(t, srv.addr, name("db"), dns.TypeA, "NOERROR A 10.244.1.2 A 10.244.1.9")

		if err := epSlices.Delete(ctx, "db-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAnswer(t, srv.addr, name("db"), dns.TypeA, "NXDOMAIN") // no endpoint left: no name
		mustAnswer(t, srv.addr, "db-1."+name("db"), dns.TypeA, "NXDOMAIN")
	})

	t.Run("externalname", func(t *testing.T) {
		createService(t, client, ns, "alias", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "web." + ns + ".svc." + zone})
		// In the zone: the CNAME, followed inside the server.
		waitAnswer(t, srv.addr, name("alias"), dns.TypeA, "NOERROR A "+web.Spec.ClusterIP+" CNAME "+name("web"))

		updateService(t, client, ns, "alias", func(s *corev1.Service) { s.Spec.ExternalName = "db." + ns + ".svc." + zone })
		waitAnswer(t, srv.addr, name("alias"), dns.TypeCNAME, "NOERROR CNAME "+name("db"))

		updateService(t, client, ns, "alias", func(s *corev1.Service) { s.Spec.ExternalName = "www.example.com" })
		waitAnswer(t, srv.addr, name("alias"), dns.TypeCNAME, "NOERROR CNAME www.example.com.")
	})

	t.Run("clusterip to externalname", func(t *testing.T) {
		s := createService(t, client, ns, "moved", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}})
		waitAnswer(t, srv.addr, name("moved"), dns.TypeA, "NOERROR A "+s.Spec.ClusterIP)
		updateService(t, client, ns, "moved", func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "www.example.com"}
		})
		waitAnswer(t, srv.addr, name("moved"), dns.TypeCNAME, "NOERROR CNAME www.example.com.")
		mustAnswer(t, srv.addr, "_http._tcp."+name("moved"), dns.TypeSRV, "NXDOMAIN")
		reverse, err := dns.ReverseAddr(s.Spec.ClusterIP)
		if err != nil {
			t.Fatal(err)
		}
		// Without an upstream, reverse names the store does not know are
		// answered here.
		mustAnswer(t, srv.addr, reverse, dns.TypePTR, "NXDOMAIN")
	})

	t.Run("delete", func(t *testing.T) {
		for _, s := range []string{"web", "db", "alias", "moved"} {
			if err := svcs.Delete(ctx, s, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitAnswer(t, srv.addr, name("web"), dns.TypeA, "NXDOMAIN")
		waitAnswer(t, srv.addr, name("db"), dns.TypeA, "NXDOMAIN")
		waitAnswer(t, srv.addr, name("alias"), dns.TypeCNAME, "NXDOMAIN")
		mustAnswer(t, srv.addr, "_www._tcp."+name("web"), dns.TypeSRV, "NXDOMAIN")
		reverse, err := dns.ReverseAddr(web.Spec.ClusterIP)
		if err != nil {
			t.Fatal(err)
		}
		mustAnswer(t, srv.addr, reverse, dns.TypePTR, "NXDOMAIN")
		// The namespace is still there.
		mustAnswer(t, srv.addr, ns+".svc."+zone, dns.TypeA, "NOERROR")
	})
}

// TestPodRecords follows a pod through its life in --pods verified mode:
// its record exists only while a pod with that IP runs in that namespace.
func TestPodRecords(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	other := cp.Namespace(t)
	checkGoroutines(t)
	client := newClient(t, cp.Config())
	srv := startServer(t, cp.Config())
	srv.waitSynced(t)
	ctx := t.Context()
	pods := client.CoreV1().Pods(ns)
	const ip = "10.244.7.3"
	name := "10-244-7-3." + ns + ".pod." + zone + "."
	otherName := "10-244-7-3." + other + ".pod." + zone + "."

	mustAnswer(t, srv.addr, name, dns.TypeA, "NXDOMAIN")
	pod := createPod(t, client, ns, "app")
	// A pod without an IP yet, and then a pod in another namespace with the
	// IP, give no record: that is what "verified" means.
	other1 := createPod(t, client, other, "marker")
	setPodStatus(t, client, other1, corev1.PodRunning, "10.244.7.4")
	waitAnswer(t, srv.addr, "10-244-7-4."+other+".pod."+zone, dns.TypeA, "NOERROR A 10.244.7.4")
	mustAnswer(t, srv.addr, name, dns.TypeA, "NXDOMAIN")

	pod = setPodStatus(t, client, pod, corev1.PodRunning, ip)
	waitAnswer(t, srv.addr, name, dns.TypeA, "NOERROR A "+ip)
	mustAnswer(t, srv.addr, otherName, dns.TypeA, "NXDOMAIN")

	// A finished pod's IP may already be another pod's: no record.
	setPodStatus(t, client, pod, corev1.PodSucceeded, ip)
	waitAnswer(t, srv.addr, name, dns.TypeA, "NXDOMAIN")

	// A new pod with the IP, then deleted.
	pod2 := createPod(t, client, ns, "app2")
	setPodStatus(t, client, pod2, corev1.PodRunning, ip)
	waitAnswer(t, srv.addr, name, dns.TypeA, "NOERROR A "+ip)
	if err := pods.Delete(ctx, "app2", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, srv.addr, name, dns.TypeA, "NXDOMAIN")
}

// createService creates the Service ns/name with spec.
func createService(t *testing.T, client kubernetes.Interface, ns, name string, spec corev1.ServiceSpec) *corev1.Service {
	t.Helper()
	s, err := client.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", ns, name, err)
	}
	return s
}

// createHeadless creates the headless Service ns/name with one endpoint at
// ip, in the EndpointSlice name-1, and returns the slice.
func createHeadless(t *testing.T, client kubernetes.Interface, ns, name, ip string) *discoveryv1.EndpointSlice {
	t.Helper()
	createService(t, client, ns, name, corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone})
	slice, err := client.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create endpoint slice %s/%s-1: %v", ns, name, err)
	}
	return slice
}

// createPod creates the pod ns/name with one container (whose image is
// never pulled: no kubelet runs).
func createPod(t *testing.T, client kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	pod, err := client.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return pod
}

// updateService gets a Service, changes it and writes it back.
func updateService(t *testing.T, client kubernetes.Interface, ns, name string, change func(*corev1.Service)) *corev1.Service {
	t.Helper()
	ctx := t.Context()
	s, err := client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(s)
	s, err = client.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update service %s/%s: %v", ns, name, err)
	}
	return s
}

// setPodStatus sets a pod's phase and IP through the status subresource, as
// the kubelet would.
func setPodStatus(t *testing.T, client kubernetes.Interface, pod *corev1.Pod, phase corev1.PodPhase, ip string) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), followBound)
	defer cancel()
	pod = pod.DeepCopy()
	pod.Status.Phase = phase
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	out, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status of pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return out
}
