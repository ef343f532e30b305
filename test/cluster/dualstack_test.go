package cluster

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// testDualStack: on a dual-stack cluster the cluster DNS answers A and
// AAAA of a dual-stack Service with its two ClusterIPs, AAAA of a
// headless dual-stack Service with the pods' IPv6 addresses, NODATA (not
// NXDOMAIN) for AAAA of an IPv4-only Service, PTR in ip6.arpa for the IPv6
// ClusterIP, AAAA of a pod's IPv6 record, and serves over IPv6 (asked at a
// cluster DNS pod's IPv6 address); the node agent writes both clusterDNS
// addresses as nameservers, and the node-local stage answers on
// NodeLocalDNS6 and on the IPv6 cluster DNS address.
//
// On an IPv6-only cluster (c.ipv6Only) the same questions have the IPv6
// answers alone: Services are IPv6, A is NODATA.
func testDualStack(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	ctx := testContext(t, 5*time.Minute)
	labels := map[string]string{"app": "web"}
	replicas, grace := int32(2), int64(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &grace,
				Containers:                    []corev1.Container{{Name: "c", Image: AgnhostImage, Args: []string{"netexec", "--http-port=8080"}}},
			}}},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dual := corev1.IPFamilyPolicyRequireDualStack
	if c.ipv6Only {
		dual = corev1.IPFamilyPolicySingleStack
	}
	port := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "ds"}, Spec: corev1.ServiceSpec{Selector: labels, Ports: port, IPFamilyPolicy: &dual}},
		{ObjectMeta: metav1.ObjectMeta{Name: "hl"}, Spec: corev1.ServiceSpec{Selector: labels, Ports: port, IPFamilyPolicy: &dual, ClusterIP: corev1.ClusterIPNone}},
		{ObjectMeta: metav1.ObjectMeta{Name: "single"}, Spec: corev1.ServiceSpec{Selector: labels, Ports: port}},
	} {
		if _, err := c.Client.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitRollout(ctx, "deployment", ns, "web"); err != nil {
		t.Fatal(err)
	}
	client := runPod(t, c, ns, toolsPod("client"))
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, "ds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var v4, v6 []string // ds's ClusterIPs
	for _, ip := range svc.Spec.ClusterIPs {
		if netip.MustParseAddr(ip).Is4() {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}
	if len(v6) != 1 || len(v4) != len(svc.Spec.ClusterIPs)-1 || (len(v4) == 0) != c.ipv6Only {
		t.Fatalf("Service ds has ClusterIPs %v", svc.Spec.ClusterIPs)
	}
	var pod4, pod6 []string
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, ip := range p.Status.PodIPs {
			if netip.MustParseAddr(ip.IP).Is4() {
				pod4 = append(pod4, ip.IP)
			} else {
				pod6 = append(pod6, ip.IP)
			}
		}
	}
	slices.Sort(pod4)
	slices.Sort(pod6)
	if len(pod6) != 2 {
		t.Fatalf("web pods' IPv6 addresses: %v, want two", pod6)
	}
	client6 := ""
	for _, ip := range client.Status.PodIPs {
		if netip.MustParseAddr(ip.IP).Is6() {
			client6 = ip.IP
		}
	}
	dnsPods, err := c.Client.CoreV1().Pods(DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: dnsPodSelector})
	if err != nil || len(dnsPods.Items) == 0 {
		t.Fatalf("cluster DNS pods: %v (%v)", dnsPods, err)
	}
	dns6 := ""
	for _, ip := range dnsPods.Items[0].Status.PodIPs {
		if netip.MustParseAddr(ip.IP).Is6() {
			dns6 = ip.IP
		}
	}
	svcName := func(n string) string { return n + "." + ns + ".svc." + ClusterDomain }
	kubernetes, kubernetesType, nameservers := []string{"10.96.0.1"}, "A", []string{ClusterDNS.String(), ClusterDNS6.String()}
	single, singleType := "AAAA", "an IPv4-only Service"
	if c.ipv6Only {
		kubernetes, kubernetesType, nameservers = []string{"fd00:10:96::1"}, "AAAA", []string{ClusterDNS6.String()}
		single, singleType = "A", "an IPv6 Service"
	}
	tests := []struct {
		what string
		args []string
		want []string
	}{
		{"A of the Service", []string{svcName("ds"), "A"}, v4},
		{"AAAA of the Service", []string{svcName("ds"), "AAAA"}, v6},
		{"A of a headless Service", []string{svcName("hl"), "A"}, pod4},
		{"AAAA of a headless Service", []string{svcName("hl"), "AAAA"}, pod6},
		{single + " of " + singleType + " (NODATA)", []string{svcName("single"), single}, nil},
		{"PTR of the IPv6 ClusterIP", []string{"-x", v6[0]}, []string{svcName("ds") + "."}},
		{"AAAA of a pod's IPv6 record", []string{strings.ReplaceAll(client6, ":", "-") + "." + ns + ".pod." + ClusterDomain, "AAAA"}, []string{client6}},
		{"over IPv6, at a cluster DNS pod", []string{"@" + dns6, "kubernetes.default.svc." + ClusterDomain, kubernetesType}, kubernetes},
		{"at node-local's IPv6 address", []string{"@" + NodeLocalDNS6.String(), svcName("ds"), "AAAA"}, v6},
		{"at the IPv6 cluster DNS address (node-local)", []string{"@" + ClusterDNS6.String(), svcName("ds"), "AAAA"}, v6},
	}
	t.Run("nameservers", func(t *testing.T) {
		out, err := c.exec(ctx, ns, "client", "cat", "/etc/resolv.conf")
		if err != nil {
			t.Fatal(err)
		}
		got := parseResolvConf(out).nameservers
		if want := nameservers; !slices.Equal(got, want) {
			t.Errorf("client's nameservers %q, want %q:\n%s", got, want, out)
		}
	})
	for _, tc := range tests {
		t.Run(tc.what, func(t *testing.T) {
			out, err := c.exec(ctx, ns, "client", append([]string{"dig", "+noall", "+comments", "+answer"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "status: NOERROR") {
				t.Fatalf("dig %s: not NOERROR:\n%s", strings.Join(tc.args, " "), out)
			}
			var got []string
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) >= 5 && !strings.HasPrefix(l, ";") && f[3] != "CNAME" {
					got = append(got, f[4])
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("dig %s: %q, want %q\n%s", strings.Join(tc.args, " "), got, tc.want, out)
			}
		})
	}
}
