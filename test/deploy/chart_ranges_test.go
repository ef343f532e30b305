package deploy

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// serviceRanges are the Service ranges of the distributions operators run,
// with the address their kube-dns has (kubelet's clusterDNS).
// The chart reads the range from ServiceCIDR "kubernetes"; its fallback for
// releases before 1.33, Service default/kubernetes, is not run here: 1.37's
// API server does not start with the ServiceCIDR API off.
var serviceRanges = []struct{ name, cidr, kubeDNS string }{
	{name: "kubeadm", cidr: "10.96.0.0/12", kubeDNS: "10.96.0.10"},
	{name: "k3s and RKE2", cidr: "10.43.0.0/16", kubeDNS: "10.43.0.10"},
	{name: "kubespray", cidr: "10.233.0.0/18", kubeDNS: "10.233.0.3"},
	{name: "microk8s", cidr: "10.152.183.0/24", kubeDNS: "10.152.183.10"},
	{name: "EKS", cidr: "10.100.0.0/16", kubeDNS: "10.100.0.10"},
	{name: "EKS with a VPC in 10.0.0.0/8", cidr: "172.20.0.0/16", kubeDNS: "172.20.0.10"},
	{name: "AKS", cidr: "10.0.0.0/16", kubeDNS: "10.0.0.10"},
	{name: "IPv6 only", cidr: "fd00:10:96::/112", kubeDNS: "fd00:10:96::a"},
}

// TestChartServiceRanges renders the chart with its default values against
// a real kube-apiserver started with each distribution's Service range and
// kube-dns at its address (helm template --dry-run=server, so the chart's
// lookups read the cluster). The API server then judges what was rendered:
// the two Services are created. For each range:
//   - the defaults take the range's 53rd and 54th addresses, and the
//     Services say where the range was read;
//   - an upgrade keeps the addresses the Services have;
//   - taken addresses are skipped;
//   - kubeadm's 10.96.0.53, set on another range, is refused naming the
//     range and the value.
//
// It prints one line per range:
//
//	range: NAME CIDR dns DNS upstream UPSTREAM from FROM
func TestChartServiceRanges(t *testing.T) {
	helm := helmBin(t)
	for _, r := range serviceRanges {
		t.Run(r.name, func(t *testing.T) {
			cp := apiserver.StartT(t, apiserver.WithAPIServerArgs("--service-cluster-ip-range="+r.cidr))
			ctx := t.Context()
			c := cp.Client()
			prefix := netip.MustParsePrefix(r.cidr)
			nth := func(n int) string {
				a := prefix.Addr()
				for range n {
					a = a.Next()
				}
				return a.String()
			}
			mustService(ctx, t, c, "kube-system", "kube-dns", r.kubeDNS)
			if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dnsconfigurer"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			render := func(t *testing.T, sets ...string) (map[string]*corev1.Service, error) {
				return renderServices(ctx, t, helm, cp.Kubeconfig(), sets...)
			}
			const from = "read from ServiceCIDR kubernetes"

			// The defaults: the 53rd and 54th, which the API server accepts.
			svcs, err := render(t)
			if err != nil {
				t.Fatal(err)
			}
			checkAddrs(t, svcs, nth(53), nth(54))
			if !strings.Contains(svcs["dnsconfigurer-dns"].Annotations[commentKey], from) {
				t.Errorf("the Service does not say where the range was read (%q): %s", from, svcs["dnsconfigurer-dns"].Annotations[commentKey])
			}
			for _, name := range []string{"dnsconfigurer-dns", "dnsconfigurer-dns-upstream"} {
				s := svcs[name]
				s.Annotations = nil
				if _, err := c.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
					t.Fatalf("the API server refuses the rendered Service %s: %v", name, err)
				}
			}
			t.Logf("range: %s %s dns %s upstream %s from %s", r.name, r.cidr, svcs["dnsconfigurer-dns"].Spec.ClusterIP, svcs["dnsconfigurer-dns-upstream"].Spec.ClusterIP, from)

			// An upgrade keeps them, another Service made since or not.
			mustService(ctx, t, c, "default", "taken-53b", nth(60))
			svcs, err = render(t)
			if err != nil {
				t.Fatal(err)
			}
			checkAddrs(t, svcs, nth(53), nth(54))

			// Without them, taken addresses are skipped.
			for _, name := range []string{"dnsconfigurer-dns", "dnsconfigurer-dns-upstream"} {
				if err := c.CoreV1().Services("dnsconfigurer").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			mustService(ctx, t, c, "default", "taken-53", nth(53))
			mustService(ctx, t, c, "default", "taken-55", nth(55))
			svcs, err = render(t)
			if err != nil {
				t.Fatal(err)
			}
			checkAddrs(t, svcs, nth(54), nth(56))

			// kubeadm's address on another range is refused, naming it.
			other := "10.96.0.53"
			if prefix.Contains(netip.MustParseAddr(other)) {
				other = "10.43.0.53"
			}
			if prefix.Addr().Is6() {
				return // the API server checks IPv6 addresses
			}
			_, err = render(t, "cluster.dns="+other)
			want := fmt.Sprintf("cluster.dns %s is outside the cluster's Service range %s (read from ServiceCIDR kubernetes)", other, r.cidr)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Set cluster.dns to a free address inside it") {
				t.Errorf("cluster.dns=%s: %v, want an error with %q", other, err, want)
			}
		})
	}
}

// commentKey is where renderServices puts the comment above a Service's
// clusterIP, which says why the chart took it.
const commentKey = "test/clusterIP-comment"

// renderServices runs helm template --dry-run=server against the cluster
// of kubeconfig and returns the chart's two Services of the dnsconfigurer
// namespace by name, each with the comment above its clusterIP.
func renderServices(ctx context.Context, t *testing.T, helm, kubeconfig string, sets ...string) (map[string]*corev1.Service, error) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"template", "dnsconfigurer", chartDir, "-n", "dnsconfigurer", "--dry-run=server"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, out)
	}
	svcs := map[string]*corev1.Service{}
	for _, doc := range splitDocs(out) {
		var s corev1.Service
		if err := yaml.Unmarshal(doc, &s); err != nil || s.Kind != "Service" || s.Namespace != "dnsconfigurer" {
			continue
		}
		comment := ""
		for _, l := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(l, "  # ") {
				comment = strings.TrimPrefix(l, "  # ")
			}
			if strings.HasPrefix(l, "  clusterIP:") {
				break
			}
		}
		s.Annotations = map[string]string{commentKey: comment}
		svcs[s.Name] = &s
	}
	for _, name := range []string{"dnsconfigurer-dns", "dnsconfigurer-dns-upstream"} {
		if svcs[name] == nil {
			return nil, fmt.Errorf("no Service dnsconfigurer/%s rendered:\n%s", name, out)
		}
	}
	return svcs, nil
}

// checkAddrs checks the clusterIPs of the chart's two Services.
func checkAddrs(t *testing.T, svcs map[string]*corev1.Service, dns, upstream string) {
	t.Helper()
	if got := svcs["dnsconfigurer-dns"].Spec.ClusterIP; got != dns {
		t.Errorf("cluster DNS at %s, want %s (%s)", got, dns, svcs["dnsconfigurer-dns"].Annotations[commentKey])
	}
	if got := svcs["dnsconfigurer-dns-upstream"].Spec.ClusterIP; got != upstream {
		t.Errorf("its upstream Service at %s, want %s (%s)", got, upstream, svcs["dnsconfigurer-dns-upstream"].Annotations[commentKey])
	}
}

// mustService creates a DNS-shaped Service at ip.
func mustService(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name, ip string) {
	t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	}
	if _, err := c.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Service %s/%s at %s: %v", ns, name, ip, err)
	}
}
