package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// chartLocalIP is the chart's default nodeLocal.ip. Its Service addresses
// are picked in the cluster's range: the 53rd and the 54th when free
// (charts/dnsconfigurer/templates/_addresses.tpl).
const chartLocalIP = "169.254.20.10"

// defaultsNames are what the pods of TestClusterHelmDefaults look up
// through kube-dns all along.
var defaultsNames = []string{"web", "kubernetes.default", "legacy.internal", "www.example.com"}

// TestClusterHelmDefaults installs the chart with its default values on
// a kubeadm-shaped cluster: kube-system/kube-dns at 10.96.0.10 with
// CoreDNS behind it and pods resolving through it with glibc's, musl's
// and Go's resolvers. Only what this harness's node needs is set (the
// image, the node's file paths, no shim DaemonSet: the shim is the node's
// own process). kube-dns's address is refused with the reason; the
// defaults install beside it, answer at their own address, pass helm
// test, and helm uninstall leaves the cluster's objects and the node as
// they were. No lookup fails or changes its answer at any step. It prints
// one line per step:
//
//	migration: step NAME: lookups N failed M changed K longest-ms L
func TestClusterHelmDefaults(t *testing.T) {
	helmDefaults{desc: "kubeadm's CoreDNS at kube-dns; the chart with its defaults", names: defaultsNames,
		setUpName: "kubeadm's CoreDNS", setUp: (*migration).setUpKubeDNS}.run(t)
}

// helmDefaults is a run of TestClusterHelmDefaults's steps on the cluster
// of opts, after setUp (the step setUpName), with the image pulled from a
// registry when fromRegistry, and then's steps once the defaults' passed.
type helmDefaults struct {
	opts         Options
	desc         string
	names        []string // looked up all along
	setUpName    string
	setUp        func(*migration, *testing.T)
	fromRegistry bool
	coreDNSOnly  []string // when set, for defaultsRun.coreDNSOnly
	then         func(*defaultsRun) []migrationStep
}

func (h helmDefaults) run(t *testing.T) {
	helm := helmBin(t)
	withCluster(t, h.opts, h.desc, func(t *testing.T, c *Cluster, st *steps) {
		m := &migration{c: c, outer: t, names: h.names, logs: c.keepDNSLogs(t.Context())}
		if !st.run(t, h.setUpName, func(t *testing.T) { h.setUp(m, t) }) {
			return
		}
		d := newDefaultsRun(m, helm)
		if h.coreDNSOnly != nil {
			d.coreDNSOnly = h.coreDNSOnly
		}
		if h.fromRegistry && !st.run(t, "the image in a registry", d.fromRegistry) {
			return
		}
		if !st.run(t, "objects before", func(t *testing.T) { d.before = d.objects(t) }) {
			return
		}
		if runSteps(t, st, m, d.steps()) && h.then != nil {
			runSteps(t, st, m, h.then(d))
		}
		st.run(t, "lookups", m.check)
	})
}

// runSteps runs steps inside their windows, up to the first that fails.
func runSteps(t *testing.T, st *steps, m *migration, steps []migrationStep) bool {
	for _, s := range steps {
		if !st.run(t, s.name, func(t *testing.T) { m.step(t, s) }) {
			return false
		}
	}
	return true
}

// applyCoreDNS applies manifest, kept in the cluster's file name, and waits
// for CoreDNS's rollout.
func (m *migration) applyCoreDNS(t *testing.T, ctx context.Context, name, manifest string) {
	t.Helper()
	c := m.c
	p := c.path(name)
	if err := os.WriteFile(p, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(ctx, "apply", "-f", p); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := c.WaitRollout(ctx, "deployment", "kube-system", "coredns"); err != nil {
		t.Fatalf("%v\n%s", err, c.logTails(20))
	}
}

// setUpKubeDNS applies kubeadm's CoreDNS of the operator's cluster
// (operatorManifests without NodeLocal DNSCache) and starts the resolving
// pods once kube-dns answers.
func (m *migration) setUpKubeDNS(t *testing.T) {
	c := m.c
	ctx := testContext(t, 10*time.Minute)
	if err := m.buildResolvers(ctx); err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, d := range strings.Split(operatorManifests(c.KubeDNS()), "\n---\n") {
		if !strings.Contains(d, "node-local-dns") && !strings.Contains(d, "kube-dns-upstream") {
			docs = append(docs, d)
		}
	}
	m.applyCoreDNS(t, ctx, "kube-dns.yaml", strings.Join(docs, "\n---\n"))
	m.want = map[string]string{
		"web":                m.webService(t, ctx),
		"kubernetes.default": c.KubernetesIP().String(),
		"legacy.internal":    HostsA.String(),
		"www.example.com":    ExternalA.String(),
	}
	if err := m.waitCoreDNSPods(ctx, "web."+m.ns+".svc.cluster.local.", m.want["web"]); err != nil {
		t.Fatal(err)
	}
	for _, r := range resolvers {
		runPod(t, c, m.ns, m.resolverPod(r.pod, r.binary, r.image))
	}
}

// defaultsRun is the state of TestClusterHelmDefaults past the set-up.
type defaultsRun struct {
	m      *migration
	helm   string
	before []string
	// dns and upstream are the addresses the defaults take: the range's
	// 53rd and 54th.
	dns, upstream string
	// image and tag are the chart's image values: the image imported on
	// the node, or one a registry holds.
	image, tag string
	// coreDNSOnly are the names only the cluster's Corefile answers, not
	// the chart's default configuration.
	coreDNSOnly []string
	// pulled is the digest pushed to the registry fromRegistry runs, ""
	// when the image is the one imported on the node.
	pulled string
}

func newDefaultsRun(m *migration, helm string) *defaultsRun {
	image, tag, _ := strings.Cut(ProductImage, ":")
	return &defaultsRun{m: m, helm: helm, dns: m.c.rangeAddr(53).String(), upstream: m.c.rangeAddr(54).String(), image: image, tag: tag, coreDNSOnly: []string{"legacy.internal"}}
}

// steps are the defaults' install, helm test and uninstall, after the
// refusal of kube-dns's address.
func (d *defaultsRun) steps() []migrationStep {
	return []migrationStep{
		{"kube-dns's address refused", d.refused},
		{"helm install with the defaults", d.install},
		{"helm test", d.test},
		{"helm uninstall", d.uninstall},
	}
}

// installArgs are helm install's arguments: the defaults, with this
// harness's node and image, and extra values.
func (d *defaultsRun) installArgs(t *testing.T, extra ...string) []string {
	chart, err := ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	_, resolved, run, err := d.m.c.deployFiles()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"install", HelmRelease, chart, "-n", HelmNamespace,
		"--set", "image.repository=" + d.image, "--set", "image.tag=" + d.tag,
		"--set", "node.resolvConf=" + d.m.c.NodeResolvConfPath(), "--set", "node.systemdResolveDir=" + resolved, "--set", "node.runDir=" + run,
		"--set", "shim.daemonSet.enabled=false", "--set", "test.image=" + DnsutilsImage,
	}
	for _, e := range extra {
		args = append(args, "--set", e)
	}
	return args
}

// refused: kube-dns's address is refused before anything is made.
func (d *defaultsRun) refused(t *testing.T, ctx context.Context) {
	kubeDNS := d.m.c.KubeDNS().String()
	out, err := d.m.c.Helm(ctx, d.helm, d.installArgs(t, "cluster.dns="+kubeDNS)...)
	if err == nil {
		t.Fatalf("helm install --set cluster.dns=%s succeeded:\n%s", kubeDNS, out)
	}
	if !strings.Contains(out, "cluster.dns "+kubeDNS+" is the clusterIP of Service kube-system/kube-dns") {
		t.Errorf("helm install --set cluster.dns=%s: %v, want the reason:\n%s", kubeDNS, err, out)
	}
	t.Logf("refused: %s", strings.TrimSpace(out))
	if got := d.objects(t); !slices.Equal(got, d.before) {
		t.Errorf("the refused install left objects: %s", objectsDiff(d.before, got))
	}
}

// install: the defaults install and roll out; dnsconfigurer answers at
// its own address, node-local holds its own two, kube-dns is untouched.
func (d *defaultsRun) install(t *testing.T, ctx context.Context) {
	c := d.m.c
	out, err := c.Helm(ctx, d.helm, d.installArgs(t)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// NOTES say which addresses were taken and why.
	for _, w := range []string{"The cluster DNS answers at " + d.dns, "node-local reaches it at " + d.upstream, "read from ServiceCIDR kubernetes"} {
		if !strings.Contains(out, w) {
			t.Errorf("helm install's notes lack %q:\n%s", w, out)
		}
	}
	t.Logf("helm install's notes:\n%s", out[strings.Index(out, "NOTES:")+1:])
	for _, w := range []struct{ kind, ns, name string }{
		{"deployment", DeployNamespace, DNSDeployment}, {"daemonset", NodeNamespace, NodeLocalDS}, {"deployment", DeployNamespace, WebhookName},
	} {
		if err := c.WaitRollout(ctx, w.kind, w.ns, w.name); err != nil {
			t.Fatalf("%v\n%s", err, c.describeNamespace(w.ns))
		}
	}
	for _, s := range []struct{ ns, name, ip string }{
		{DeployNamespace, DNSService, d.dns}, {DeployNamespace, DNSService + "-upstream", d.upstream}, {"kube-system", "kube-dns", c.KubeDNS().String()},
	} {
		svc, err := c.Client.CoreV1().Services(s.ns).Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ClusterIP != s.ip {
			t.Errorf("Service %s/%s at %s, want %s", s.ns, s.name, svc.Spec.ClusterIP, s.ip)
		}
	}
	if err := d.waitAddrs(ctx, 2); err != nil {
		t.Fatal(err)
	}
	d.checkPulled(t, ctx, DeployNamespace)
	// dig in the glibc pod, at dnsconfigurer's Service address (node-local
	// on the node) and at kube-dns: the same answers, but for the hosts
	// entries, which only the cluster's Corefile has (the chart's default
	// configuration is deploy/'s).
	for _, name := range d.m.names {
		servers := []string{d.dns, chartLocalIP, c.KubeDNS().String()}
		if slices.Contains(d.coreDNSOnly, name) {
			servers = servers[2:]
		}
		d.digAt(t, ctx, name, servers...)
	}
}

// digAt asks each server for name's A record with dig in the glibc pod
// and wants the answer the lookups want.
func (d *defaultsRun) digAt(t *testing.T, ctx context.Context, name string, servers ...string) {
	t.Helper()
	for _, server := range servers {
		got, err := d.m.c.exec(ctx, d.m.ns, "glibc", "dig", "+short", "+tries=2", "+time=2", "@"+server, d.m.absolute(name), "A")
		if err != nil {
			t.Fatal(err)
		}
		if got = strings.TrimSpace(got); got != d.m.want[name] {
			t.Errorf("dig @%s %s: %q, want %s", server, d.m.absolute(name), got, d.m.want[name])
		}
	}
}

// test runs helm test.
func (d *defaultsRun) test(t *testing.T, ctx context.Context) {
	out, err := d.m.c.Helm(ctx, d.helm, "test", HelmRelease, "-n", HelmNamespace)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "Phase:          Succeeded") && !strings.Contains(out, "Phase: Succeeded") {
		t.Errorf("helm test did not report success:\n%s", out)
	}
}

// uninstall: helm uninstall --wait leaves the objects as they were
// before the install and takes node-local's addresses off the node.
func (d *defaultsRun) uninstall(t *testing.T, ctx context.Context) {
	c := d.m.c
	out, err := c.Helm(ctx, d.helm, "uninstall", HelmRelease, "-n", HelmNamespace, "--wait")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := d.waitAddrs(ctx, 0); err != nil {
		t.Error(err)
	}
	err = waitFor(ctx, "the cluster's objects as before the install", func(ctx context.Context) (bool, error) {
		got := d.objects(t)
		return slices.Equal(got, d.before), fmt.Errorf("%s", objectsDiff(d.before, got))
	})
	if err != nil {
		t.Error(err)
	}
}

// waitAddrs waits until the node holds n of node-local's two default
// addresses.
func (d *defaultsRun) waitAddrs(ctx context.Context, n int) error {
	return waitFor(ctx, fmt.Sprintf("%d of %s and %s on the node", n, chartLocalIP, d.dns), func(ctx context.Context) (bool, error) {
		out, err := exec.CommandContext(ctx, "ip", "-n", d.m.c.Node.NetNS, "-o", "addr", "show").CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("ip addr: %w: %s", err, out)
		}
		got := 0
		for _, ip := range []string{chartLocalIP, d.dns} {
			if strings.Contains(string(out), " "+ip+"/") {
				got++
			}
		}
		return got == n, fmt.Errorf("%d", got)
	})
}

// objects are the cluster's objects an install could add or leave
// behind, as kubectl's kind/name lines with their namespaces, sorted.
// Pods, endpoints, events and leases come and go by themselves and are
// left out.
func (d *defaultsRun) objects(t *testing.T) []string {
	const kinds = "namespaces,services,deployments,daemonsets,configmaps,secrets,serviceaccounts,roles,rolebindings," +
		"clusterroles,clusterrolebindings,validatingwebhookconfigurations,mutatingwebhookconfigurations,poddisruptionbudgets"
	ctx := testContext(t, time.Minute)
	out, err := d.m.c.Kubectl(ctx, "get", kinds, "-A", "--no-headers", "-o", "custom-columns=KIND:.kind,NS:.metadata.namespace,NAME:.metadata.name")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return lines
}

// objectsDiff lists the lines only one side has.
func objectsDiff(before, after []string) string {
	var d []string
	for _, l := range before {
		if !slices.Contains(after, l) {
			d = append(d, "gone: "+l)
		}
	}
	for _, l := range after {
		if !slices.Contains(before, l) {
			d = append(d, "new: "+l)
		}
	}
	return strings.Join(d, "; ")
}
