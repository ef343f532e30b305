package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
	"github.com/dnsconfigurer/dnsconfigurer/test/registry"
)

// TestClusterHelmEKS is TestClusterHelmDefaults on EKS's Service range
// for a VPC in 10.0.0.0/8 (172.20.0.0/16, kube-dns at 172.20.0.10), with
// the chart's image pulled from a registry: kubeadm's 10.96.0.53 is
// outside it, and the defaults take 172.20.0.53 and 172.20.0.54. It
// prints the same lines.
func TestClusterHelmEKS(t *testing.T) {
	helmDefaults{opts: Options{ServiceCIDR: netip.MustParsePrefix("172.20.0.0/16")}, desc: "EKS's Service range; the chart from a registry",
		names: defaultsNames, setUpName: "kubeadm's CoreDNS", setUp: (*migration).setUpKubeDNS, fromRegistry: true}.run(t)
}

// k3sHost is a name of k3s's NodeHosts, and k3sHostA its address.
const (
	k3sHost  = "k3s-agent-1"
	k3sHostA = "192.168.1.11"
)

// k3sNames are what the pods of TestClusterHelmK3s look up all along.
var k3sNames = []string{"web", "kubernetes.default", k3sHost, "www.example.com"}

// TestClusterHelmK3s runs the chart on k3s's Service range
// (10.43.0.0/16, kube-dns at 10.43.0.10) beside k3s's own CoreDNS (k3s's
// manifest, test/convert/corpus/05-k3s-manifest, with the NodeHosts key k3s
// adds), with the image pulled from a registry. First
// TestClusterHelmDefaults's steps: the defaults take 10.43.0.53 and
// 10.43.0.54, pass helm test and uninstall cleanly. Then k3s's ConfigMap
// moves with Helm as charts/dnsconfigurer/README.md says: `dnsconfigurer
// convert --helm-values` of the live ConfigMap, helm install -f with it
// beside CoreDNS (its NodeHosts name answers at the new address), kube-dns
// handed over, helm upgrade to placement replace-coredns, CoreDNS scaled
// to 0; then back: CoreDNS up, helm uninstall. Pods look up a Service, a
// NodeHosts name and an external name through kube-dns all along with
// glibc's, musl's and Go's resolvers; no lookup may fail or change. It
// prints one line per step:
//
//	migration: step NAME: lookups N failed M changed K longest-ms L
func TestClusterHelmK3s(t *testing.T) {
	helmDefaults{opts: Options{ServiceCIDR: netip.MustParsePrefix("10.43.0.0/16")},
		desc:  "k3s's Service range and CoreDNS; the chart from a registry, then k3s's ConfigMap moved with Helm",
		names: k3sNames, setUpName: "k3s's CoreDNS", setUp: (*migration).setUpK3s, fromRegistry: true, coreDNSOnly: []string{k3sHost},
		then: func(d *defaultsRun) []migrationStep { return (&k3sMove{d: d}).steps() }}.run(t)
}

// k3sManifest is k3s's CoreDNS manifest from the convert corpus, with the
// cluster's CoreDNS image and the NodeHosts key k3s's server adds: the
// node's own line and another node's.
func (c *Cluster) k3sManifest() (string, error) {
	root, err := containerd.ModuleRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(root + "/test/convert/corpus/05-k3s-manifest/manifest.yaml")
	if err != nil {
		return "", err
	}
	s := string(b)
	for _, r := range []struct{ old, new string }{
		{`image: "rancher/mirrored-coredns-coredns:1.11.3"`, `image: "` + CoreDNSImage + `"`},
		{"    import /etc/coredns/custom/*.server\n", "    import /etc/coredns/custom/*.server\n  NodeHosts: |\n    " + NodeIP.String() + " " + NodeName + "\n    " + k3sHostA + " " + k3sHost + "\n"},
		{"clusterIP: 10.43.0.10\n  clusterIPs: [10.43.0.10]", "clusterIP: " + c.KubeDNS().String() + "\n  clusterIPs: [" + c.KubeDNS().String() + "]"},
	} {
		if !strings.Contains(s, r.old) {
			return "", fmt.Errorf("k3s's manifest has no %q", r.old)
		}
		s = strings.Replace(s, r.old, r.new, 1)
	}
	return s, nil
}

// setUpK3s applies k3s's CoreDNS and starts the resolving pods once each
// CoreDNS pod answers.
func (m *migration) setUpK3s(t *testing.T) {
	c := m.c
	ctx := testContext(t, 10*time.Minute)
	if err := m.buildResolvers(ctx); err != nil {
		t.Fatal(err)
	}
	manifest, err := c.k3sManifest()
	if err != nil {
		t.Fatal(err)
	}
	m.applyCoreDNS(t, ctx, "k3s-coredns.yaml", manifest)
	m.want = map[string]string{
		"web":                m.webService(t, ctx),
		"kubernetes.default": c.KubernetesIP().String(),
		k3sHost:              k3sHostA,
		"www.example.com":    ExternalA.String(),
	}
	if err := m.waitCoreDNSPods(ctx, "web."+m.ns+".svc.cluster.local.", m.want["web"]); err != nil {
		t.Fatal(err)
	}
	if err := m.waitCoreDNSPods(ctx, k3sHost+".", k3sHostA); err != nil {
		t.Fatal(err)
	}
	for _, r := range resolvers {
		runPod(t, c, m.ns, m.resolverPod(r.pod, r.binary, r.image))
	}
}

// fromRegistry runs a registry on the node (TLS, its own CA), pushes the
// product image to it under a name the node has not imported, points the
// node's containerd at it (hosts.toml with the CA) and makes the chart's
// image that reference: every dnsconfigurer pod then pulls it.
func (d *defaultsRun) fromRegistry(t *testing.T) {
	c := d.m.c
	reg := registry.Start(d.m.outer, c.primaryIP(c.first()).String(), registry.Options{NetNS: c.Node.NetNS})
	res := reg.Push(t, c.Images[ProductImage], "dnsconfigurer/dnsconfigurer:v0.0.0-test")
	reg.WriteHostsTOML(t, c.registryConfigDir())
	d.image, d.tag = reg.Host+"/dnsconfigurer/dnsconfigurer", "v0.0.0-test"
	d.pulled = res.Digest
	t.Logf("pushed %s:%s (%s)", d.image, d.tag, res.Digest)
}

// checkPulled checks that the cluster DNS's pods run the image pulled
// from the registry.
func (d *defaultsRun) checkPulled(t *testing.T, ctx context.Context, ns string) {
	if d.pulled == "" {
		return
	}
	pods, err := d.m.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=dnsconfigurer-dns"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("no cluster DNS pod in %s", ns)
	}
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			if !strings.HasPrefix(s.Image, d.image+":"+d.tag) && !strings.HasPrefix(s.Image, d.image+"@") {
				t.Errorf("pod %s runs %s, want %s:%s", p.Name, s.Image, d.image, d.tag)
			}
			if !strings.HasPrefix(s.ImageID, d.image+"@") {
				t.Errorf("pod %s: image id %s, want one pulled from %s", p.Name, s.ImageID, d.image)
			}
		}
	}
}

// k3sMove is k3s's ConfigMap moved with Helm, after the defaults.
type k3sMove struct {
	d      *defaultsRun
	values string
}

func (k *k3sMove) steps() []migrationStep {
	return []migrationStep{
		{"convert k3s's ConfigMap to Helm values", k.convert},
		{"helm install with the converted values", k.install},
		{"kube-dns handed over", k.handOver},
		{"CoreDNS given a lameduck", k.lameduck},
		{"helm upgrade to replace-coredns, CoreDNS scaled to 0", k.replace},
		{"undo: CoreDNS back", k.coreDNSBack},
		{"undo: helm uninstall", k.uninstall},
	}
}

// convert runs dnsconfigurer convert --helm-values on the live ConfigMap.
func (k *k3sMove) convert(t *testing.T, ctx context.Context) {
	c := k.d.m.c
	cm, err := c.Kubectl(ctx, "-n", "kube-system", "get", "configmap", "coredns", "-o", "yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, cm)
	}
	in := c.path("k3s-configmap.yaml")
	if err := os.WriteFile(in, []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, c.Product, "convert", "--helm-values", in)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dnsconfigurer convert --helm-values: %v\n%s", err, stderr.String())
	}
	t.Logf("convert's report:\n%s", stderr.String())
	if !strings.Contains(string(out), k3sHostA+" "+k3sHost) {
		t.Errorf("the values do not carry NodeHosts:\n%s", out)
	}
	k.values = c.path("k3s-values.yaml")
	if err := os.WriteFile(k.values, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// install installs the chart beside CoreDNS with the converted values:
// the new address answers the NodeHosts name.
func (k *k3sMove) install(t *testing.T, ctx context.Context) {
	d := k.d
	c := d.m.c
	out, err := c.Helm(ctx, d.helm, append(d.installArgs(t), "-f", k.values)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := c.WaitRollout(ctx, "deployment", DeployNamespace, DNSDeployment); err != nil {
		t.Fatalf("%v\n%s", err, c.describeNamespace(DeployNamespace))
	}
	if err := c.WaitRollout(ctx, "daemonset", NodeNamespace, NodeLocalDS); err != nil {
		t.Fatalf("%v\n%s", err, c.describeNamespace(NodeNamespace))
	}
	d.checkPulled(t, ctx, DeployNamespace)
	for _, name := range d.m.names {
		d.digAt(t, ctx, name, d.dns, chartLocalIP)
	}
}

// handOver gives kube-dns to the release, as the chart's refusal says.
func (k *k3sMove) handOver(t *testing.T, ctx context.Context) {
	for _, args := range [][]string{
		{"-n", "kube-system", "label", "service", "kube-dns", "app.kubernetes.io/managed-by=Helm"},
		{"-n", "kube-system", "annotate", "service", "kube-dns", "meta.helm.sh/release-name=" + HelmRelease, "meta.helm.sh/release-namespace=" + HelmNamespace},
	} {
		if out, err := k.d.m.c.Kubectl(ctx, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}

// lameduck gives k3s's CoreDNS `health { lameduck 5s }`, which kubeadm's
// Corefile has and k3s's has not: without it a CoreDNS pod stops answering
// the moment it is told to stop, while kube-proxy still sends it queries
// (2 of 991 lookups failed when it was scaled to 0). Its reload plugin
// takes the new Corefile once the kubelet has updated the mounted file.
func (k *k3sMove) lameduck(t *testing.T, ctx context.Context) {
	c := k.d.m.c
	cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const health = "\n    health\n"
	if !strings.Contains(cm.Data["Corefile"], health) {
		t.Fatalf("k3s's Corefile has no bare health line:\n%s", cm.Data["Corefile"])
	}
	cm.Data["Corefile"] = strings.Replace(cm.Data["Corefile"], health, "\n    health {\n        lameduck 5s\n    }\n", 1)
	if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns,app.kubernetes.io/instance!=dnsconfigurer-dns"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		err := waitFor(ctx, "CoreDNS pod "+p.Name+" reloaded", func(ctx context.Context) (bool, error) {
			out, err := c.Kubectl(ctx, "-n", "kube-system", "logs", p.Name)
			return err == nil && strings.Contains(out, "Reloading complete"), fmt.Errorf("%v", err)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// replace upgrades the release to placement replace-coredns (its server
// joins kube-dns, node-local takes kube-dns's address on the node), then
// scales CoreDNS to 0.
func (k *k3sMove) replace(t *testing.T, ctx context.Context) {
	d := k.d
	c := d.m.c
	args := append(d.installArgs(t, "placement=replace-coredns"), "-f", k.values)
	args[0] = "upgrade"
	t.Logf("%s helm upgrade --set placement=replace-coredns", time.Now().Format("15:04:05.000"))
	if out, err := c.Helm(ctx, d.helm, args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := c.WaitRollout(ctx, "deployment", "kube-system", DNSDeployment); err != nil {
		t.Fatalf("%v\n%s", err, c.describeNamespace("kube-system"))
	}
	if err := c.WaitRollout(ctx, "daemonset", NodeNamespace, NodeLocalDS); err != nil {
		t.Fatalf("%v\n%s", err, c.describeNamespace(NodeNamespace))
	}
	d.checkPulled(t, ctx, "kube-system")
	t.Logf("%s rolled out; kubectl scale deployment coredns --replicas=0", time.Now().Format("15:04:05.000"))
	t.Cleanup(func() {
		for _, q := range [][]string{
			{"-n", NodeNamespace, "logs", "-l", "app.kubernetes.io/component=node-local-dns", "--timestamps", "--tail=60", "--prefix"},
			{"-n", "kube-system", "logs", "-l", "app.kubernetes.io/instance=dnsconfigurer-dns", "--timestamps", "--tail=30", "--prefix"},
		} {
			out, _ := c.Kubectl(context.Background(), q...)
			t.Logf("kubectl %s:\n%s", strings.Join(q, " "), out)
		}
	})
	if out, err := c.Kubectl(ctx, "-n", "kube-system", "scale", "deployment", "coredns", "--replicas=0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := c.waitNoCoreDNS(ctx); err != nil {
		t.Fatal(err)
	}
}

// coreDNSBack scales CoreDNS up again, beside the release's server.
func (k *k3sMove) coreDNSBack(t *testing.T, ctx context.Context) {
	for _, args := range [][]string{
		{"-n", "kube-system", "scale", "deployment", "coredns", "--replicas=1"},
		{"-n", "kube-system", "rollout", "status", "deployment/coredns"},
	} {
		if out, err := k.d.m.c.Kubectl(ctx, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if err := k.d.m.waitCoreDNSPods(ctx, k3sHost+".", k3sHostA); err != nil {
		t.Fatal(err)
	}
}

// uninstall: helm uninstall keeps kube-dns, whose pods are CoreDNS's
// again, and takes node-local's addresses off the node.
func (k *k3sMove) uninstall(t *testing.T, ctx context.Context) {
	c := k.d.m.c
	if out, err := c.Helm(ctx, k.d.helm, "uninstall", HelmRelease, "-n", HelmNamespace, "--wait"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	svc, err := c.Client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kube-dns after helm uninstall: %v", err)
	}
	if svc.Spec.ClusterIP != c.KubeDNS().String() {
		t.Errorf("kube-dns at %s after helm uninstall, want %s", svc.Spec.ClusterIP, c.KubeDNS())
	}
}
