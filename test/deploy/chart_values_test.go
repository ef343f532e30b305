package deploy

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// get reads the field at path (map keys, or [i] for list items) of o.
func get(o any, path ...string) any {
	for _, p := range path {
		switch v := o.(type) {
		case map[string]any:
			o = v[p]
		case []any:
			var i int
			if _, err := fmt.Sscanf(p, "[%d]", &i); err != nil || i >= len(v) {
				return nil
			}
			o = v[i]
		default:
			return nil
		}
	}
	return o
}

// firstContainer returns the first container of a workload's pod template.
func firstContainer(o map[string]any) map[string]any {
	c, _ := get(o, "spec", "template", "spec", "containers", "[0]").(map[string]any)
	return c
}

// args returns a container's args as strings.
func args(c map[string]any) []string {
	var out []string
	list, _ := c["args"].([]any)
	for _, a := range list {
		s, _ := a.(string)
		out = append(out, s)
	}
	return out
}

// hostPaths returns a workload's hostPath volumes, name to path.
func hostPaths(o map[string]any) map[string]string {
	out := map[string]string{}
	vols, _ := get(o, "spec", "template", "spec", "volumes").([]any)
	for _, v := range vols {
		name, _ := get(v, "name").(string)
		if p, ok := get(v, "hostPath", "path").(string); ok {
			out[name] = p
		}
	}
	return out
}

// TestChartValues sets one value at a time and checks where it lands.
func TestChartValues(t *testing.T) {
	helm := helmBin(t)
	render := func(t *testing.T, sets ...string) map[objectKey]map[string]any {
		t.Helper()
		var a []string
		for _, s := range sets {
			a = append(a, "--set", s)
		}
		return chartObjectsAll(t, helmTemplate(t, helm, a...))
	}
	obj := func(t *testing.T, objs map[objectKey]map[string]any, kind, ns, name string) map[string]any {
		t.Helper()
		o, ok := objs[objectKey{kind, ns, name}]
		if !ok {
			t.Fatalf("no %s %s/%s", kind, ns, name)
		}
		return o
	}
	const nodeNS, dnsNS = "dnsconfigurer-node", "dnsconfigurer"
	for _, tc := range []struct {
		name  string
		sets  []string
		check func(t *testing.T, objs map[objectKey]map[string]any)
	}{
		{"image tag defaults to appVersion", nil, func(t *testing.T, objs map[objectKey]map[string]any) {
			for _, k := range []objectKey{{"Deployment", dnsNS, "dnsconfigurer-dns"}, {"Deployment", dnsNS, "dnsconfigurer-webhook"},
				{"DaemonSet", nodeNS, "dnsconfigurer-shim"}, {"DaemonSet", nodeNS, "dnsconfigurer-node-local-dns"}} {
				if img := firstContainer(obj(t, objs, k.kind, k.ns, k.name))["image"]; img != "dnsconfigurer:v0.3.0" {
					t.Errorf("%s: image %v, want dnsconfigurer:v0.3.0", k, img)
				}
			}
		}},
		{"image digest wins over the tag", []string{"image.repository=registry.example/dc", "image.tag=v9", "image.digest=sha256:" + strings.Repeat("ab", 32), "image.pullPolicy=Always"},
			func(t *testing.T, objs map[objectKey]map[string]any) {
				c := firstContainer(obj(t, objs, "Deployment", dnsNS, "dnsconfigurer-dns"))
				if c["image"] != "registry.example/dc@sha256:"+strings.Repeat("ab", 32) || c["imagePullPolicy"] != "Always" {
					t.Errorf("image %v pull %v", c["image"], c["imagePullPolicy"])
				}
			}},
		{"node-local address", []string{"nodeLocal.ip=169.254.25.10"}, func(t *testing.T, objs map[objectKey]map[string]any) {
			if a := args(firstContainer(obj(t, objs, "DaemonSet", nodeNS, "dnsconfigurer-node-local-dns"))); !slices.Contains(a, "--local-ip=169.254.25.10") {
				t.Errorf("node-local args %q", a)
			}
			if a := args(firstContainer(obj(t, objs, "DaemonSet", nodeNS, "dnsconfigurer-shim"))); !slices.Contains(a, "--node-local-dns=169.254.25.10,10.96.0.53") {
				t.Errorf("shim args %q", a)
			}
		}},
		{"node-local off", []string{"nodeLocal.enabled=false", "agent=nri"}, func(t *testing.T, objs map[objectKey]map[string]any) {
			if _, ok := objs[objectKey{"DaemonSet", nodeNS, "dnsconfigurer-node-local-dns"}]; ok {
				t.Error("node-local DaemonSet rendered")
			}
			for _, a := range args(firstContainer(obj(t, objs, "DaemonSet", nodeNS, "dnsconfigurer-nri"))) {
				if strings.HasPrefix(a, "--node-local-dns") {
					t.Errorf("nri plugin still has %s", a)
				}
			}
		}},
		{"node paths", []string{"node.resolvConf=/run/resolv.conf", "node.systemdResolveDir=/run/sd", "node.runDir=/var/run/dc", "shim.containerdDir=/run/k3s/containerd"},
			func(t *testing.T, objs map[objectKey]map[string]any) {
				want := map[string]string{"containerd": "/run/k3s/containerd", "shim-socket": "/var/run/dc", "resolv-conf": "/run/resolv.conf", "systemd-resolved": "/run/sd"}
				if got := hostPaths(obj(t, objs, "DaemonSet", nodeNS, "dnsconfigurer-shim")); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("shim host paths %v, want %v", got, want)
				}
				if got := hostPaths(obj(t, objs, "DaemonSet", nodeNS, "dnsconfigurer-node-local-dns")); got["resolv-conf"] != "/run/resolv.conf" {
					t.Errorf("node-local host paths %v", got)
				}
			}},
		{"nri paths", []string{"agent=nri", "nri.socketDir=/run/nri", "nri.stateDir=/var/lib/dc/nri"}, func(t *testing.T, objs map[objectKey]map[string]any) {
			ds := obj(t, objs, "DaemonSet", nodeNS, "dnsconfigurer-nri")
			hp := hostPaths(ds)
			if hp["nri-socket"] != "/run/nri" || hp["state"] != "/var/lib/dc/nri" || !slices.Contains(args(firstContainer(ds)), "--state-dir=/var/lib/dc/nri") {
				t.Errorf("nri host paths %v args %q", hp, args(firstContainer(ds)))
			}
			if _, ok := objs[objectKey{"DaemonSet", nodeNS, "dnsconfigurer-shim"}]; ok {
				t.Error("shim rendered with agent nri")
			}
		}},
		{"shim config and its checksum", []string{"shim.config=apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\nlimits: reject\n"},
			func(t *testing.T, objs map[objectKey]map[string]any) {
				cm := obj(t, objs, "ConfigMap", nodeNS, "dnsconfigurer-shim")
				if !strings.Contains(fmt.Sprint(get(cm, "data", "config.yaml")), "limits: reject") {
					t.Errorf("shim config %v", get(cm, "data"))
				}
				def := chartObjectsAll(t, helmTemplate(t, helm))
				a := get(obj(t, objs, "DaemonSet", nodeNS, "dnsconfigurer-shim"), "spec", "template", "metadata", "annotations", "dnsconfigurer.io/config-checksum")
				b := get(obj(t, def, "DaemonSet", nodeNS, "dnsconfigurer-shim"), "spec", "template", "metadata", "annotations", "dnsconfigurer.io/config-checksum")
				if a == nil || a == b {
					t.Errorf("config checksum %v, default %v: want a new one, so the DaemonSet rolls", a, b)
				}
			}},
		{"no shim DaemonSet", []string{"shim.daemonSet.enabled=false"}, func(t *testing.T, objs map[objectKey]map[string]any) {
			for k := range objs {
				if strings.Contains(k.name, "shim") {
					t.Errorf("%s rendered", k)
				}
			}
		}},
		{"replace-coredns", []string{"placement=replace-coredns", "cluster.dns=10.43.0.10"}, func(t *testing.T, objs map[objectKey]map[string]any) {
			svc := obj(t, objs, "Service", "kube-system", "kube-dns")
			if get(svc, "spec", "clusterIP") != "10.43.0.10" || get(svc, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
				t.Errorf("kube-dns %v", svc)
			}
			d := obj(t, objs, "Deployment", "kube-system", "dnsconfigurer-dns")
			if get(d, "spec", "template", "metadata", "labels", "k8s-app") != "kube-dns" {
				t.Errorf("cluster DNS pods not labelled k8s-app: kube-dns")
			}
		}},
		{"webhook without cert-manager", []string{"webhook.certManager.enabled=false", "webhook.caBundle=Q0E=", "webhook.tls.cert=CERT", "webhook.tls.key=KEY"},
			func(t *testing.T, objs map[objectKey]map[string]any) {
				s := obj(t, objs, "Secret", dnsNS, "dnsconfigurer-webhook-tls")
				if get(s, "data", "tls.crt") != base64.StdEncoding.EncodeToString([]byte("CERT")) || get(s, "data", "tls.key") != base64.StdEncoding.EncodeToString([]byte("KEY")) {
					t.Errorf("Secret %v", s)
				}
				vwc := obj(t, objs, "ValidatingWebhookConfiguration", "", "dnsconfigurer")
				hooks, _ := vwc["webhooks"].([]any)
				for i, h := range hooks {
					if get(h, "clientConfig", "caBundle") != "Q0E=" {
						t.Errorf("webhook %d: caBundle %v", i, get(h, "clientConfig", "caBundle"))
					}
				}
				if len(hooks) != 4 || get(vwc, "metadata", "annotations") != nil {
					t.Errorf("%d webhooks, annotations %v", len(hooks), get(vwc, "metadata", "annotations"))
				}
				for k := range objs {
					if k.kind == "Certificate" || k.kind == "Issuer" {
						t.Errorf("%s rendered without cert-manager", k)
					}
				}
			}},
		{"no webhook, in place of CoreDNS", []string{"webhook.enabled=false", "placement=replace-coredns"}, func(t *testing.T, objs map[objectKey]map[string]any) {
			for k := range objs {
				if strings.Contains(k.name, "webhook") || k.kind == "ValidatingWebhookConfiguration" || k == (objectKey{"Namespace", "", "dnsconfigurer"}) {
					t.Errorf("%s rendered", k)
				}
			}
			obj(t, objs, "Namespace", "", nodeNS)
		}},
		{"monitoring", []string{"monitoring.enabled=true", "monitoring.ruleLabels.release=prom"}, func(t *testing.T, objs map[objectKey]map[string]any) {
			r := obj(t, objs, "PrometheusRule", "kube-system", "dnsconfigurer")
			if get(r, "metadata", "labels", "release") != "prom" || get(r, "metadata", "labels", "app.kubernetes.io/name") != "dnsconfigurer" {
				t.Errorf("PrometheusRule labels %v", get(r, "metadata", "labels"))
			}
			cm := obj(t, objs, "ConfigMap", "kube-system", "dnsconfigurer-dashboard")
			if get(cm, "metadata", "labels", "grafana_dashboard") != "1" || !strings.HasPrefix(fmt.Sprint(get(cm, "data", "dashboard.json")), "{") {
				t.Errorf("dashboard ConfigMap %v", get(cm, "metadata"))
			}
		}},
		{"test pod", []string{"cluster.domain=corp.internal", "test.image=registry.example/tools:1"}, func(t *testing.T, objs map[objectKey]map[string]any) {
			p := obj(t, objs, "Pod", "kube-system", "dnsconfigurer-resolve")
			c := firstContainer(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": p["spec"]}}})
			if c["image"] != "registry.example/tools:1" || !strings.Contains(fmt.Sprint(c["command"]), "kubernetes.default.svc.corp.internal") {
				t.Errorf("test pod %v", c)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, render(t, tc.sets...)) })
	}
}

// chartObjectsAll is chartObjects with the helm test Pod kept.
func chartObjectsAll(t *testing.T, out []byte) map[objectKey]map[string]any {
	t.Helper()
	objs := map[objectKey]map[string]any{}
	for _, doc := range splitDocs(out) {
		o := map[string]any{}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatal(err)
		}
		if len(o) == 0 {
			continue
		}
		kind, _ := o["kind"].(string)
		ns, _ := get(o, "metadata", "namespace").(string)
		name, _ := get(o, "metadata", "name").(string)
		objs[objectKey{kind, ns, name}] = o
	}
	return objs
}

// TestChartSchema: values the chart cannot install are refused by helm
// with a message naming the value.
func TestChartSchema(t *testing.T) {
	helm := helmBin(t)
	for _, tc := range []struct {
		set  string
		want string
	}{
		{"agent=containerd", "at '/agent': value must be one of 'shim', 'nri'"},
		{"placement=beside", "at '/placement': value must be one of"},
		{"nodelocal.enabled=false", "additional properties 'nodelocal' not allowed"},
		{"cluster.dns=10.96.0.300", "at '/cluster/dns'"},
		{"cluster.domain=Cluster_Local", "at '/cluster/domain'"},
		{"nodeLocal.ip=link-local", "at '/nodeLocal/ip'"},
		{"image.digest=sha256:xyz", "at '/image/digest'"},
		{"image.pullPolicy=Sometimes", "at '/image/pullPolicy'"},
		{"node.resolvConf=etc/resolv.conf", "at '/node/resolvConf'"},
		{"webhook.caBundle=Q0E=", "give all three, or none"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := helmTemplateErr(t, helm, "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: %v, want an error with %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestChartInstall installs the chart with the helm CLI into a real
// kube-apiserver that has kubeadm's kube-dns Service: in place of CoreDNS
// with the NRI plugin (the Service adopted as the chart's README says),
// then upgrades to the shim, then uninstalls, after which kube-dns is
// still there at its address. There is no kubelet: the objects are
// checked, not their pods.
func TestChartInstall(t *testing.T) {
	helm := helmBin(t)
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not in PATH")
	}
	cp := apiserver.StartT(t)
	ctx := t.Context()
	c := cp.Client()
	kubeDNS := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := c.CoreV1().Services("kube-system").Create(ctx, kubeDNS, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := "dnsconfigurer-webhook.dnsconfigurer.svc"
	cert, err := apiserver.NewServingCert(host, []string{host}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "tls.crt", cert.Cert)
	writeFile(t, dir, "tls.key", cert.Key)
	run := func(name string, a ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, a...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig(), "HELM_CACHE_HOME="+filepath.Join(dir, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(a, " "), err, out)
		}
		return string(out)
	}
	// The chart's README, "Taking over kubeadm's kube-dns": let the
	// release adopt the Service.
	run("kubectl", "-n", "kube-system", "annotate", "service", "kube-dns", "meta.helm.sh/release-name=dnsconfigurer", "meta.helm.sh/release-namespace=kube-system")
	run("kubectl", "-n", "kube-system", "label", "service", "kube-dns", "app.kubernetes.io/managed-by=Helm")
	values := []string{"--set", "placement=replace-coredns", "--set", "cluster.dns=10.96.0.10", "--set", "cluster.dnsUpstream=10.96.0.11",
		"--set", "webhook.certManager.enabled=false",
		"--set", "webhook.caBundle=" + base64.StdEncoding.EncodeToString(cert.CA),
		"--set-file", "webhook.tls.cert=" + filepath.Join(dir, "tls.crt"), "--set-file", "webhook.tls.key=" + filepath.Join(dir, "tls.key")}
	out := run(helm, append([]string{"install", "dnsconfigurer", chartDir, "-n", "kube-system", "--set", "agent=nri"}, values...)...)
	t.Logf("helm install:\n%s", out)
	exists := func(get func(context.Context) error) bool {
		err := get(ctx)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	nri := func(ctx context.Context) error {
		_, err := c.AppsV1().DaemonSets("dnsconfigurer-node").Get(ctx, "dnsconfigurer-nri", metav1.GetOptions{})
		return err
	}
	shim := func(ctx context.Context) error {
		_, err := c.AppsV1().DaemonSets("dnsconfigurer-node").Get(ctx, "dnsconfigurer-shim", metav1.GetOptions{})
		return err
	}
	dns := func(ctx context.Context) error {
		_, err := c.AppsV1().Deployments("kube-system").Get(ctx, "dnsconfigurer-dns", metav1.GetOptions{})
		return err
	}
	for _, ns := range []string{"dnsconfigurer", "dnsconfigurer-node"} {
		if !exists(func(ctx context.Context) error {
			_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err
		}) {
			t.Errorf("Namespace %s not made by the chart", ns)
		}
	}
	if !exists(nri) || exists(shim) || !exists(dns) {
		t.Errorf("after install (nri): nri %t shim %t dns %t", exists(nri), exists(shim), exists(dns))
	}
	svc, err := c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil || svc.Annotations["helm.sh/resource-policy"] != "keep" || svc.Labels["kubernetes.io/name"] != "CoreDNS" {
		t.Errorf("kube-dns after install: %v %v %v", err, svc.Annotations, svc.Labels)
	}

	run(helm, append([]string{"upgrade", "dnsconfigurer", chartDir, "-n", "kube-system", "--set", "agent=shim"}, values...)...)
	if exists(nri) || !exists(shim) {
		t.Errorf("after upgrade (shim): nri %t shim %t", exists(nri), exists(shim))
	}

	out = run(helm, "uninstall", "dnsconfigurer", "-n", "kube-system")
	t.Logf("helm uninstall:\n%s", out)
	if exists(shim) || exists(dns) {
		t.Errorf("after uninstall: shim %t dns %t", exists(shim), exists(dns))
	}
	svc, err = c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("kube-dns after uninstall: %v (clusterIP %v): rollback must keep the cluster's DNS address", err, svc.Spec.ClusterIP)
	}
	if !bytes.Contains([]byte(out), []byte("kube-dns")) {
		t.Logf("helm did not name the kept Service in its output")
	}
}
