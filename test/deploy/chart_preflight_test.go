package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// TestChartPreflight: helm install --dry-run=server (the chart's lookup
// checks against a real kube-apiserver) on a kubeadm-shaped cluster:
// kube-system/kube-dns at 10.96.0.10 and, for the node-local cases,
// NodeLocal DNSCache's ConfigMap. The defaults install; an address
// another Service holds, a node-local address NodeLocal DNSCache binds,
// and a replace-coredns placement over a kube-dns not handed over are
// refused with the value, the object and the way out.
func TestChartPreflight(t *testing.T) {
	helm := helmBin(t)
	cp := apiserver.StartT(t)
	ctx := t.Context()
	c := cp.Client()
	kubeDNS := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	}
	if _, err := c.CoreV1().Services("kube-system").Create(ctx, kubeDNS, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	install := func(t *testing.T, values string, sets ...string) (string, error) {
		t.Helper()
		args := []string{"install", "dnsconfigurer", chartDir, "-n", "kube-system", "--dry-run=server"}
		if values != "" {
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "-f", f)
		}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		cmd := exec.CommandContext(ctx, helm, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig(), "HELM_CACHE_HOME="+filepath.Join(dir, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	nodeCache := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "node-local-dns", Namespace: "kube-system"},
		Data:       map[string]string{"Corefile": "cluster.local:53 {\n    errors\n    bind 169.254.20.10 10.96.0.10\n    forward . __PILLAR__CLUSTER__DNS__\n}\n"},
	}
	for _, tc := range []struct {
		name      string
		sets      []string
		values    string // a values file's text
		nodeCache bool
		want      []string // substrings of the error; none: installs
	}{
		{name: "defaults"},
		{name: "kube-dns's address", sets: []string{"cluster.dns=10.96.0.10"},
			want: []string{"cluster.dns 10.96.0.10 is the clusterIP of Service kube-system/kube-dns", "Set cluster.dns to a free address"}},
		{name: "kube-dns's address as the upstream", sets: []string{"cluster.dnsUpstream=10.96.0.10"},
			want: []string{"cluster.dnsUpstream 10.96.0.10 is the clusterIP of Service kube-system/kube-dns"}},
		{name: "NodeLocal DNSCache's address", nodeCache: true,
			want: []string{"nodeLocal.ip 169.254.20.10 is NodeLocal DNSCache's: ConfigMap kube-system/node-local-dns binds it"}},
		{name: "beside NodeLocal DNSCache on another address", nodeCache: true, sets: []string{"nodeLocal.ip=169.254.20.11"}},
		{name: "beside NodeLocal DNSCache without node-local", nodeCache: true, sets: []string{"nodeLocal.enabled=false"}},
		// cluster.dns left empty takes kube-dns's address: only the hand-over is missing.
		{name: "replace-coredns, kube-dns not handed over", sets: []string{"placement=replace-coredns"},
			want: []string{"Service kube-system/kube-dns exists and is not this release's", "meta.helm.sh/release-name=dnsconfigurer meta.helm.sh/release-namespace=kube-system"}},
		// A dns.config serve refuses (TestChartDNSConfigRefused has the
		// table): refused at install, naming the field.
		{name: "a dns.config serve refuses", values: "dns:\n  config: |\n    apiVersion: dnsconfigurer.io/v1alpha1\n    kind: ServerConfiguration\n    listen: [\"0.0.0.0:53\"]\n    cache:\n      maxTTL: 0s\n",
			want: []string{"dns.config.cache.maxTTL"}},
		{name: "a dns.config with a typo", values: "dns:\n  config:\n    apiVersion: dnsconfigurer.io/v1alpha1\n    kind: ServerConfiguration\n    listen: [\"0.0.0.0:53\"]\n    forwrd: []\n",
			want: []string{"dns.config.forwrd"}},
		{name: "replace-coredns at another address", sets: []string{"placement=replace-coredns", "cluster.dns=10.96.0.53"},
			want: []string{"cluster.dns 10.96.0.53: placement replace-coredns keeps Service kube-system/kube-dns, which is at 10.96.0.10; set cluster.dns=10.96.0.10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.nodeCache {
				if _, err := c.CoreV1().ConfigMaps("kube-system").Create(ctx, nodeCache, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := c.CoreV1().ConfigMaps("kube-system").Delete(ctx, nodeCache.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				}()
			}
			out, err := install(t, tc.values, tc.sets...)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("helm install --dry-run=server: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("helm install --dry-run=server succeeded, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("error lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
