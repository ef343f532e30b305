package convert_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

// issueBase is kubeadm's default Corefile, the one each case of issue 69
// adds its line to or changes a line of.
const issueBase = `.:53 {
    errors
    health
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
}
`

// issueCase is one "Done when" configuration of issue 69: a Corefile
// (kubeadm's with one change) or a corpus directory, the questions it is
// about, and what CoreDNS must answer to them (a substring of its answer,
// so that a question both servers get wrong alike does not pass).
type issueCase struct {
	name     string
	corefile string // kubeadm's, changed; or
	dir      string // a corpus directory, run with its QUESTIONS
	// questions, "NAME TYPE", besides the common ones.
	questions []string
	expect    map[string]string // question label → in CoreDNS's answer
	// reportHas are words convert's report must have.
	reportHas []string
}

// The fake upstreams answer A 192.0.2.N (PTR extN.example.): 2 is the
// resolv.conf's nameserver (and an address forwarded to with it), 3 the
// first forward directive with addresses of its own.
const (
	issueResolverAnswer = "192.0.2.2"
	issueFirstForward   = "192.0.2.3"
)

// The CIDR zone case's objects: a Service whose endpoint is inside
// 10.0.0.0/24 (no ClusterIP is: the API server's range is ServiceCIDR).
const (
	issueNamespace    = "issue69"
	issueCIDREndpoint = "10.0.0.7"
	// k8s_external's Services in that namespace: lb's ingress, ext's
	// external IP.
	issueLBIngress  = "203.0.113.69"
	issueExternalIP = "203.0.113.70"
)

func issueCases(t *testing.T, client kubernetes.Interface) []issueCase {
	// k8s_external answers a Service's external IPs and LoadBalancer
	// ingress under its zone: ask each such Service's name, and a
	// ClusterIP-only one.
	external := []string{"web.default.example.org. A", "nope.default.example.org. A"}
	svcs, err := client.CoreV1().Services("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		if len(s.Spec.ExternalIPs) > 0 || len(s.Status.LoadBalancer.Ingress) > 0 {
			external = append(external, fmt.Sprintf("%s.%s.example.org. A", s.Name, s.Namespace))
		}
	}
	return []issueCase{
		{
			name:     "template-aaaa-nxdomain",
			corefile: strings.Replace(issueBase, "    errors\n", "    errors\n    template ANY AAAA {\n       rcode NXDOMAIN\n    }\n", 1),
			questions: []string{
				"db.default.svc.cluster.local. AAAA",
				"www.example.net. AAAA",
				"www.example.net. A",
			},
			expect: map[string]string{
				"web.default.svc.cluster.local. AAAA": "NXDOMAIN []",
				"db.default.svc.cluster.local. AAAA":  "NXDOMAIN []",
				"www.example.net. AAAA":               "NXDOMAIN []",
				"web.default.svc.cluster.local. A":    "NOERROR [web.default.svc.cluster.local.",
				"db.default.svc.cluster.local. A":     "NOERROR [db.default.svc.cluster.local.",
				"www.example.net. A":                  issueResolverAnswer,
			},
		},
		{
			name: "openshift-node-dns-templates",
			dir:  filepath.Join(corpusDir, "60-openshift-onprem-node-dns-stock"),
			expect: map[string]string{
				"console-openshift-console.apps.ostest.test.metalkube.org. A":    "192.168.111.4",
				"console-openshift-console.apps.ostest.test.metalkube.org. AAAA": "NOERROR []",
				"oauth-openshift.APPS.ostest.test.metalkube.org. A":              "192.168.111.4",
				"api.ostest.test.metalkube.org. A":                               "192.168.111.5",
				"api.ostest.test.metalkube.org. AAAA":                            "NOERROR []",
				"api-int.ostest.test.metalkube.org. A":                           "192.168.111.5",
				"api-int.ostest.test.metalkube.org. AAAA":                        "NOERROR []",
				"api.ostest.test.metalkube.org. TXT":                             "NOERROR []",
				"master-0.ostest.test.metalkube.org. A":                          issueFirstForward,
				"apps.ostest.test.metalkube.org. A":                              issueFirstForward,
			},
		},
		forwardIssueCase("forward-tls-servername", "    forward . tls://9.9.9.9 {\n       tls_servername dns.quad9.net\n    }\n",
			"upstreams tls://9.9.9.9, tls serverName dns.quad9.net", map[string]string{
				"www.example.net. A":          issueFirstForward,
				"example.org. A":              issueFirstForward,
				"nx.example.org. A":           "NXDOMAIN",
				"1.2.0.192.in-addr.arpa. PTR": "ext3.example.",
			}),
		{
			name:      "k8s-external",
			corefile:  strings.Replace(issueBase, "    prometheus :9153\n", "    k8s_external example.org\n    prometheus :9153\n", 1),
			questions: external,
			expect: map[string]string{
				"web.default.svc.cluster.local. A":          "NOERROR [web.default.svc.cluster.local.",
				"web.default.example.org. A":                "NXDOMAIN", // a ClusterIP only
				"example.org. A":                            "NOERROR []",
				"lb." + issueNamespace + ".example.org. A":  issueLBIngress,
				"ext." + issueNamespace + ".example.org. A": issueExternalIP,
			},
		},
		{
			name:     "kubernetes-cidr-zone",
			corefile: strings.Replace(issueBase, "kubernetes cluster.local in-addr.arpa ip6.arpa {", "kubernetes cluster.local 10.0.0.0/24 {", 1),
			questions: []string{
				reverseName(issueCIDREndpoint) + " PTR", // inside, an endpoint
				"200.0.0.10.in-addr.arpa. PTR",          // inside, nothing there
				"3.2.1.10.in-addr.arpa. PTR",            // outside (web's endpoint)
			},
			expect: map[string]string{
				reverseName(issueCIDREndpoint) + " PTR": "10-0-0-7.cidr." + issueNamespace + ".svc.cluster.local.",
				"200.0.0.10.in-addr.arpa. PTR":          "ext2.example.", // fallthrough in-addr.arpa
				"3.2.1.10.in-addr.arpa. PTR":            "ext2.example.",
				"(web's ClusterIP).in-addr.arpa. PTR":   "ext2.example.",
				"web.default.svc.cluster.local. A":      "NOERROR [web.default.svc.cluster.local.",
			},
		},
		forwardIssueCase("forward-resolvconf-and-address", "    forward . /etc/resolv.conf 8.8.8.8\n",
			"upstreams /etc/resolv.conf 8.8.8.8", map[string]string{
				"www.example.net. A": issueResolverAnswer,
				"example.org. A":     issueResolverAnswer,
				"nx.example.org. A":  "NXDOMAIN",
			}),
	}
}

// forwardIssueCase is kubeadm's Corefile with forward for its forward
// line, asked www.example.net., CoreDNS answering as expect says and
// convert's report having report.
func forwardIssueCase(name, forward, report string, expect map[string]string) issueCase {
	return issueCase{
		name:      name,
		corefile:  strings.Replace(issueBase, "    forward . /etc/resolv.conf\n", forward, 1),
		questions: []string{"www.example.net. A"},
		expect:    expect,
		reportHas: []string{report},
	}
}

// TestIssue69Cases runs the configurations issue 69's "Done when" names
// side by side, as TestCorpus runs the corpus (corpusCase.run): convert
// must exit 0, CoreDNS 1.15
// must run the configuration, CoreDNS's answers must be what the case is
// about (expect), and serve must answer every question as CoreDNS does.
//
// TestCorpus's rule, a difference is allowed where the block has any
// differs or dropped line, is too weak here: kubeadm's block always has
// its health and ready "differs" lines, so every name it serves would
// count as reported. The issue asks for the answers CoreDNS gives: every
// difference fails.
func TestIssue69Cases(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	netns.Require(t)
	webIP := objects(t, cp.Client())
	issueObjects(t, cp.Client())
	corednsBin, api := corednsAndAPI(t, cp.Kubeconfig())
	cases := issueCases(t, cp.Client())
	var texts []string
	for _, ic := range cases {
		texts = append(texts, ic.corefile)
	}
	dot := newDoTCA(t, append(servernames(t), issueTLSNames(strings.Join(texts, "\n"))...))
	sem := make(chan struct{}, 2)
	for _, ic := range cases {
		t.Run(ic.name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			c := corpusCase{name: ic.name, dir: ic.dir, input: "Corefile"}
			if ic.dir == "" {
				c.dir = t.TempDir()
				write(t, filepath.Join(c.dir, "Corefile"), ic.corefile)
				if len(ic.questions) > 0 {
					write(t, filepath.Join(c.dir, "QUESTIONS"), strings.Join(ic.questions, "\n")+"\n")
				}
			}
			r := c.run(t, corednsBin, cp.Kubeconfig(), api, webIP, dot)
			t.Logf("%s: CoreDNS %s; convert %s; %d same, %d differ reported, %d differ silent", ic.name, r.coredns, r.convert, r.same, len(r.reported), len(r.silent))
			if !strings.HasPrefix(r.convert, "exit 0:") {
				t.Errorf("convert: %s, want exit 0:\n%s", r.convert, r.report)
			}
			if r.coredns != "runs" {
				t.Fatalf("CoreDNS 1.15: %s, want runs", r.coredns)
			}
			labels := make([]string, 0, len(r.answers))
			for l := range r.answers {
				labels = append(labels, l)
			}
			slices.Sort(labels)
			for _, l := range labels {
				a := r.answers[l]
				verdict := "same"
				if a[0] != a[1] {
					verdict = "DIFFERENT; serve: " + a[1]
					t.Errorf("%s: %s (reported: %v):\n  coredns:       %s\n  dnsconfigurer: %s", ic.name, l, slices.Contains(r.reported, l), a[0], a[1])
				}
				t.Logf("%s: %s: coredns %s: %s", ic.name, l, a[0], verdict)
			}
			for l, want := range ic.expect {
				a, ok := r.answers[l]
				switch {
				case !ok:
					t.Errorf("%s: %s was not asked", ic.name, l)
				case !strings.Contains(a[0], want):
					t.Errorf("%s: %s: CoreDNS answers %s, want it to contain %q (the case does not test what it is about)", ic.name, l, a[0], want)
				}
			}
			for _, w := range ic.reportHas {
				if !strings.Contains(r.report, w) {
					t.Errorf("%s: convert's report does not say %q:\n%s", ic.name, w, r.report)
				}
			}
		})
	}
}

// issueTLSNames are the tls_servername names and tls:// addresses of text.
func issueTLSNames(text string) []string {
	var names []string
	for _, m := range append(tlsServernameRe.FindAllStringSubmatch(text, -1), tlsTargetRe.FindAllStringSubmatch(text, -1)...) {
		names = append(names, m[1])
	}
	return names
}

// issueObjects creates, in a namespace of their own so that no corpus
// question meets them, the Service of the CIDR zone case (issue69/cidr,
// headless, its one endpoint at issueCIDREndpoint) and k8s_external's.
func issueObjects(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	ignoreExists := func(what string, err error) {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: issueNamespace}}, metav1.CreateOptions{})
	ignoreExists("namespace "+issueNamespace, err)
	port := int32(80)
	name := "http"
	_, err = client.CoreV1().Services(issueNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "cidr"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: name, Port: port}}},
	}, metav1.CreateOptions{})
	ignoreExists("service cidr", err)
	_, err = client.DiscoveryV1().EndpointSlices(issueNamespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "cidr-1", Labels: map[string]string{discoveryv1.LabelServiceName: "cidr"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{issueCIDREndpoint}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}, metav1.CreateOptions{})
	ignoreExists("endpoint slice cidr-1", err)

	// k8s_external's: a LoadBalancer with an ingress IP and a Service with
	// an external IP.
	lb, err := client.CoreV1().Services(issueNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lb"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: name, Port: port}}},
	}, metav1.CreateOptions{})
	if err == nil {
		lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: issueLBIngress}}
		_, err = client.CoreV1().Services(issueNamespace).UpdateStatus(ctx, lb, metav1.UpdateOptions{})
	}
	ignoreExists("service lb", err)
	_, err = client.CoreV1().Services(issueNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec:       corev1.ServiceSpec{ExternalIPs: []string{issueExternalIP}, Ports: []corev1.ServicePort{{Name: name, Port: port}}},
	}, metav1.CreateOptions{})
	ignoreExists("service ext", err)
}
