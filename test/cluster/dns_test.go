package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// dnsFixture is what testResolve and testAutopath resolve: a ClusterIP
// Service "web" and a headless Service "hl" over the same two pods of a
// Deployment (their EndpointSlices written by the real controller), a pod
// "named" with hostname web-0 and subdomain "sub", the headless Service
// that selects it, and an ExternalName Service "ext" for www.example.com.
type dnsFixture struct {
	ns        string
	webIP     string
	podIPs    []string
	namedIP   string
	namedName string
}

func makeDNSFixture(t *testing.T, c *Cluster) dnsFixture {
	ns := namespace(t, c)
	ctx := testContext(t, 3*time.Minute)
	labels := map[string]string{"app": "web"}
	replicas := int32(2)
	grace := int64(1)
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{Name: "c", Image: AgnhostImage, Args: []string{"netexec", "--http-port=8080"},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}}},
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	port := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Selector: labels, Ports: port}},
		{ObjectMeta: metav1.ObjectMeta{Name: "hl"}, Spec: corev1.ServiceSpec{Selector: labels, Ports: port, ClusterIP: corev1.ClusterIPNone}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sub"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "named"}, Ports: port, ClusterIP: corev1.ClusterIPNone}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "www.example.com"}},
	} {
		if _, err := c.Client.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	named := toolsPod("named")
	named.Spec.Hostname, named.Spec.Subdomain = "web-0", "sub"
	named.Labels = map[string]string{"app": "named"}
	namedPod := runPod(t, c, ns, named)
	if err := c.WaitRollout(ctx, "deployment", ns, "web"); err != nil {
		t.Fatal(err)
	}
	f := dnsFixture{ns: ns, namedIP: namedPod.Status.PodIP, namedName: "web-0.sub." + ns + ".svc.cluster.local"}
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.webIP = svc.Spec.ClusterIP
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		f.podIPs = append(f.podIPs, p.Status.PodIP)
	}
	slices.Sort(f.podIPs)
	return f
}

// testResolve: pods resolve, through the Service IP (which deploy/'s
// node-local stage takes over on the node: cluster names reach the
// deployed cluster DNS through its upstream Service), Services whose EndpointSlices the real
// controller wrote, headless Services, pod hostnames, pod A records,
// ExternalName and external names through the node's upstream stub.
func testResolve(t *testing.T, c *Cluster) {
	f := makeDNSFixture(t, c)
	client := runPod(t, c, f.ns, toolsPod("client"))
	dashed := strings.ReplaceAll(client.Status.PodIP, ".", "-")
	tests := []struct {
		name, qtype string
		want        []string
	}{
		{"web." + f.ns + ".svc.cluster.local", "A", []string{f.webIP}},
		{"hl." + f.ns + ".svc.cluster.local", "A", f.podIPs},
		{f.namedName, "A", []string{f.namedIP}},
		{"kubernetes.default.svc.cluster.local", "A", []string{"10.96.0.1"}},
		{dashed + "." + f.ns + ".pod.cluster.local", "A", []string{client.Status.PodIP}},
		{"_http._tcp.web." + f.ns + ".svc.cluster.local", "SRV", []string{"0 100 80 web." + f.ns + ".svc.cluster.local."}},
		{"ext." + f.ns + ".svc.cluster.local", "CNAME", []string{"www.example.com."}},
		{"www.example.com", "A", []string{ExternalA.String()}},
	}
	ctx := testContext(t, 2*time.Minute)
	for _, tc := range tests {
		t.Run(tc.qtype+"/"+tc.name, func(t *testing.T) {
			out, err := c.exec(ctx, f.ns, "client", "dig", "+short", "+tcp", tc.name, tc.qtype)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Fields(strings.TrimSpace(out))
			if tc.qtype == "SRV" {
				got = []string{strings.TrimSpace(out)}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("dig %s %s: %q, want %q", tc.name, tc.qtype, got, tc.want)
			}
		})
	}
	// glibc's resolver with the pod's search path and ndots:5 (IPv4: the
	// cluster is IPv4 only, but ext's CNAME target has an AAAA too).
	for name, want := range map[string]string{"web": f.webIP, "web." + f.ns: f.webIP, "kubernetes.default": "10.96.0.1", "ext": ExternalA.String()} {
		t.Run("getent/"+name, func(t *testing.T) {
			out, err := c.exec(ctx, f.ns, "client", "getent", "ahostsv4", name)
			if err != nil {
				t.Fatal(err)
			}
			if fields := strings.Fields(out); len(fields) == 0 || fields[0] != want {
				t.Errorf("getent ahostsv4 %s: %q, want %s", name, out, want)
			}
		})
	}
}

// testAutopath: a pod with the autopath annotation resolves short names,
// name.namespace and external names with one query per address family,
// counted at the node-local stage (its cache hits plus misses: every
// query it gets is one or the other).
func testAutopath(t *testing.T, c *Cluster) {
	f := makeDNSFixture(t, c)
	p := toolsPod("autopath")
	p.Annotations = map[string]string{"dnsconfigurer.io/dns-policy": "ClusterFirstWithAutopath"}
	runPod(t, c, f.ns, p)
	ctx := testContext(t, 2*time.Minute)
	for _, tc := range []struct{ name, want string }{
		{"web", f.webIP},
		{"hl." + f.ns, f.podIPs[0]},
		{"kubernetes.default", "10.96.0.1"},
		{"www.example.com", ExternalA.String()},
		{"other.example.org", ExternalA.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := c.nodeLocalQueries(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// ahosts asks for A and AAAA.
			out, err := c.exec(ctx, f.ns, "autopath", "getent", "ahosts", tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("getent ahosts %s: %q, want %s among the addresses", tc.name, out, tc.want)
			}
			after, err := c.nodeLocalQueries(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n := after - before; n != 2 {
				t.Errorf("%s: %d queries at the node-local stage, want 2 (A and AAAA, one each)", tc.name, n)
			} else {
				t.Logf("%s: %d queries (A+AAAA) at the node-local stage", tc.name, n)
			}
		})
	}
}

// nodeLocalQueries returns the node-local stage's query count so far, from
// its /metrics on the node's loopback.
func (c *Cluster) nodeLocalQueries(ctx context.Context) (int, error) {
	return c.nodeLocalQueriesAt(ctx, 9353)
}

// nodeLocalQueriesAt is nodeLocalQueries for a stage whose metrics are on
// another port of the node's loopback.
func (c *Cluster) nodeLocalQueriesAt(ctx context.Context, port int) (int, error) {
	return c.scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), "dnsconfigurer_nodelocal_cache_hits_total", "dnsconfigurer_nodelocal_cache_misses_total")
}

// scrape sums every series of the named metrics at url, dialled from the
// node's network namespace. Each name must be there.
func (c *Cluster) scrape(ctx context.Context, url string, names ...string) (int, error) {
	return c.scrapeSum(ctx, url, true, names...)
}

// scrapeSum is scrape; with required false, a name with no series yet (a
// labelled counter before its first count) counts 0.
func (c *Cluster) scrapeSum(ctx context.Context, url string, required bool, names ...string) (int, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: c.dialContext, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	total, seen := 0, map[string]bool{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{") // a series per label set
		if !slices.Contains(names, name) {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, err
		}
		total += int(v)
		seen[name] = true
	}
	if required && len(seen) != len(names) {
		return 0, fmt.Errorf("%s lacks some of %q", url, names)
	}
	return total, sc.Err()
}
