package convert_test

import (
	"net"
	"sync"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// The fake upstreams' answers: the default route's and a stub domain's.
const (
	externalIP = "192.0.2.1"
	stubIP     = "192.0.2.53"
)

// fakeUpstream answers A with ip (TTL 60), PTR with ext.example., and
// NXDOMAIN for names under "nx.".
func fakeUpstream(t *testing.T, ip string) string {
	t.Helper()
	u := testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, r *dns.Msg) {
		switch {
		case len(q.Name) > 3 && q.Name[:3] == "nx.":
			r.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			r.Answer = append(r.Answer, testkit.A(q.Name, 60, ip))
		case q.Qtype == dns.TypePTR:
			r.Answer = append(r.Answer, &dns.PTR{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 60}, Ptr: "ext.example."})
		}
	}))
	return u.Addr
}

var (
	objectsOnce sync.Once
	webIP       string
)

// objects creates, once, the Services both servers answer: default/web
// (a ClusterIP, one endpoint, port http) and default/db (headless, two
// endpoints). It returns web's ClusterIP.
func objects(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	objectsOnce.Do(func() {
		ctx := t.Context()
		port := int32(80)
		name := "http"
		web, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: name, Port: port}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create service web: %v", err)
		}
		webIP = web.Spec.ClusterIP
		if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: name, Port: port}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create service db: %v", err)
		}
		for svc, ips := range map[string][]string{"web": {"10.1.2.3"}, "db": {"10.1.2.4", "10.1.2.5"}} {
			var eps []discoveryv1.Endpoint
			for _, ip := range ips {
				eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}})
			}
			if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   eps,
				Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create endpoint slice %s-1: %v", svc, err)
			}
		}
	})
	if webIP == "" {
		t.Fatal("the objects were not created")
	}
	return webIP
}

// reverse is the PTR name of ip.
func reverse(t *testing.T, ip string) string {
	t.Helper()
	r, err := dns.ReverseAddr(net.ParseIP(ip).String())
	if err != nil {
		t.Fatal(err)
	}
	return r
}
