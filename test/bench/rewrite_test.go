package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// rewriteRules are the same rules twice: as dnsconfigurer's rewrites and
// as CoreDNS's rewrite lines (one plugin, the rules in order). A rule
// without answerFrom is "answer auto" (implied for exact).
const rewriteRules = `rewrites:
- {from: db.example.com, to: web.prod.svc.cluster.local}
- {match: suffix, from: .corp.internal, to: .svc.cluster.local}
- {match: prefix, from: legacy-web, to: web}
- {match: substring, from: prod-east, to: prod}
- {match: regex, from: '^([a-z]+)-([a-z]+)\.k8s\.$', to: '{1}.{2}.svc.cluster.local'}
- {match: regex, from: '^([a-z]+)\.answered\.$', to: '{1}.prod.svc.cluster.local', answerFrom: '^([a-z]+)\.prod\.svc\.cluster\.local\.$', answerTo: '{1}.answered'}
- {from: a.chain.test, to: b.chain.test, continue: true}
- {from: b.chain.test, to: web.prod.svc.cluster.local}
- {from: stop.example.com, to: c.example.com}
- {from: c.example.com, to: web.prod.svc.cluster.local}
- {from: www.corp.example, to: api.example.com}
- {match: regex, from: '^(x+)\.long\.$', to: '{1}{1}{1}{1}{1}.example'}
`

const rewriteCorefile = `.:%d {
    bind 127.0.0.1
    rewrite name exact db.example.com web.prod.svc.cluster.local
    rewrite name suffix .corp.internal .svc.cluster.local answer auto
    rewrite name prefix legacy-web web answer auto
    rewrite name substring prod-east prod answer auto
    rewrite name regex ^([a-z]+)-([a-z]+)\.k8s\.$ {1}.{2}.svc.cluster.local answer auto
    rewrite stop {
        name regex ^([a-z]+)\.answered\.$ {1}.prod.svc.cluster.local
        answer name ^([a-z]+)\.prod\.svc\.cluster\.local\.$ {1}.answered
    }
    rewrite continue name exact a.chain.test b.chain.test
    rewrite name exact b.chain.test web.prod.svc.cluster.local
    rewrite name exact stop.example.com c.example.com
    rewrite name exact c.example.com web.prod.svc.cluster.local
    rewrite name exact www.corp.example api.example.com
    rewrite name regex ^(x+)\.long\.$ {1}{1}{1}{1}{1}.example answer auto
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s test
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . %s
    prometheus %s
}
`

// TestRewriteSideBySide is the proof that rewrites answer as CoreDNS 1.15's
// rewrite plugin: the same rules in both, the same Services in a real
// kube-apiserver, and a set of questions whose rcode, question and answer
// section (TTLs aside, records sorted) must be equal. It runs whenever the
// coredns, kube-apiserver and etcd binaries are found (no
// DNSCONFIGURER_BENCH: it takes seconds).
func TestRewriteSideBySide(t *testing.T) {
	corednsPath(t) // skips without coredns
	cp := apiserver.StartT(t)
	dcBin := buildbin.Dnsconfigurer(t)
	createRewriteObjects(t, cp)
	up := startStub(t)
	dir := t.TempDir()

	addr, maddr := testkit.FreeAddr(t, "127.0.0.1"), testkit.FreeAddr(t, "127.0.0.1")
	conf := fmt.Sprintf(`apiVersion: dnsconfigurer.io/v1alpha1
kind: ServerConfiguration
listen: [%q]
kubeconfig: %s
loadbalance: false
forward:
- {zone: ., upstreams: [%q]}
`, addr, cp.Kubeconfig(), up.addr) + rewriteRules
	confPath := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	dc := startServer(t, "dnsconfigurer", dir, addr, "http://"+maddr+"/metrics", dcBin, "serve", "--config", confPath, "--metrics-listen", maddr)
	cd := runCoreDNS(t, dir, func(port int, metrics string) string {
		return fmt.Sprintf(rewriteCorefile, port, cp.Kubeconfig(), up.addr, metrics)
	})
	// Both have synced once the headless Service's endpoint answers.
	for _, s := range []*server{dc, cd} {
		s.waitAnswer(t, question("db-0.db.prod.svc.cluster.local.", dns.TypeA), answersA("10.1.1.1"))
	}

	questions := []struct {
		name  string
		qtype uint16
	}{
		{"db.example.com.", dns.TypeA}, {"db.example.com.", dns.TypeAAAA}, {"db.example.com.", dns.TypeSRV},
		{"db.example.com.", dns.TypeCNAME}, {"DB.Example.COM.", dns.TypeA}, {"x.db.example.com.", dns.TypeA},
		{"web.prod.corp.internal.", dns.TypeA}, {"web.prod.corp.internal.", dns.TypeSRV},
		{"_http._tcp.web.prod.corp.internal.", dns.TypeSRV}, {"_pg._tcp.db.prod.corp.internal.", dns.TypeSRV},
		{"db.prod.corp.internal.", dns.TypeA}, {"db-0.db.prod.corp.internal.", dns.TypeA},
		{"alias.prod.corp.internal.", dns.TypeA}, {"ext.prod.corp.internal.", dns.TypeA}, {"nx.prod.corp.internal.", dns.TypeA},
		{"Web.Prod.Corp.Internal.", dns.TypeA},
		{"legacy-web.prod.svc.cluster.local.", dns.TypeA}, {"web.prod-east.svc.cluster.local.", dns.TypeA},
		{"web-prod.k8s.", dns.TypeA}, {"db-prod.k8s.", dns.TypeA}, {"web.answered.", dns.TypeA}, {"web.answered.", dns.TypeSRV},
		{"a.chain.test.", dns.TypeA}, {"b.chain.test.", dns.TypeA}, {"stop.example.com.", dns.TypeA},
		{"www.corp.example.", dns.TypeA}, {"other.example.com.", dns.TypeA}, {"web.prod.svc.cluster.local.", dns.TypeA},
		{strings.Repeat("x", 60) + ".long.", dns.TypeA},
	}
	c := &dns.Client{Timeout: 3 * time.Second}
	for _, q := range questions {
		t.Run(strings.TrimSuffix(q.name, ".")+"/"+dns.TypeToString[q.qtype], func(t *testing.T) {
			var got [2]string
			for i, s := range []*server{dc, cd} {
				m := question(q.name, q.qtype)
				m.SetEdns0(1232, false)
				r, _, err := c.Exchange(m, s.dns)
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				got[i] = comparable(r)
			}
			if got[0] != got[1] {
				t.Errorf("dnsconfigurer:\n%s\ncoredns:\n%s", got[0], got[1])
			}
			t.Logf("%s", got[0])
		})
	}
}

// comparable is what the side-by-side compares: rcode, question, and the
// answer section with TTLs zeroed, records sorted.
func comparable(r *dns.Msg) string {
	var rrs []string
	for _, rr := range r.Answer {
		rr = dns.Copy(rr)
		rr.Header().Ttl = 0
		rrs = append(rrs, rr.String())
	}
	slices.Sort(rrs)
	var qs []string
	for _, q := range r.Question {
		qs = append(qs, q.String())
	}
	return dns.RcodeToString[r.Rcode] + " " + strings.Join(qs, " ") + "\n" + strings.Join(rrs, "\n")
}

// createRewriteObjects makes namespace prod with a ClusterIP Service web
// (ports http and dns), a headless Service db with a named endpoint, an
// ExternalName alias to web and one (ext) to a name upstream.
func createRewriteObjects(t *testing.T, cp *apiserver.ControlPlane) {
	t.Helper()
	ctx, client := t.Context(), cp.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	services := []corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "alias"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "web.prod.svc.cluster.local"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "api.example.com"}},
	}
	for i := range services {
		if _, err := client.CoreV1().Services("prod").Create(ctx, &services[i], metav1.CreateOptions{}); err != nil {
			t.Fatalf("create service %s: %v", services[i].Name, err)
		}
	}
	port, proto, name := int32(5432), corev1.ProtocolTCP, "pg"
	hostname, ready := "db-0", true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.1.1"}, Hostname: &hostname, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.1.1.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	if _, err := client.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create endpoint slice: %v", err)
	}
}
