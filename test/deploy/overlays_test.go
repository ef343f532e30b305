package deploy

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// settings are the values of a dnsconfigurer-cluster-settings ConfigMap.
type settings struct{ clusterDNS, upstream, domain string }

func settingsOf(t *testing.T, o *objects) settings {
	t.Helper()
	if len(o.settings) != 1 {
		t.Fatalf("%d cluster settings ConfigMaps, want 1", len(o.settings))
	}
	d := o.settings[0].Data
	return settings{d["clusterDNS"], d["clusterDNSUpstream"], d["clusterDomain"]}
}

// renderObjects renders dir and decodes the output strictly.
func renderObjects(t *testing.T, dir string) (*objects, []byte) {
	t.Helper()
	out := renderDir(t, dir)
	r := &objects{}
	for i, doc := range splitDocs(out) {
		if err := r.add(fmt.Sprintf("%s: rendered document %d", dir, i+1), doc); err != nil {
			t.Fatal(err)
		}
	}
	return r, out
}

// checkSettings: every place that needs the cluster settings has them.
// agent is the node agent's DaemonSet: dnsconfigurer-shim, or
// dnsconfigurer-nri in overlays/nri.
func checkSettings(t *testing.T, r *objects, want settings, dnsService, agent string) {
	t.Helper()
	for _, s := range r.services {
		switch s.Name {
		case dnsService:
			if s.Spec.ClusterIP != want.clusterDNS {
				t.Errorf("Service %s/%s: clusterIP %s, want %s", s.Namespace, s.Name, s.Spec.ClusterIP, want.clusterDNS)
			}
		case "dnsconfigurer-dns-upstream":
			if s.Spec.ClusterIP != want.upstream {
				t.Errorf("Service %s/%s: clusterIP %s, want %s", s.Namespace, s.Name, s.Spec.ClusterIP, want.upstream)
			}
		}
	}
	args := func(kind, name string) []string { return r.workload(t, kind, name).spec.Containers[0].Args }
	for _, c := range []struct {
		kind, name, flag string
		want             []string
	}{
		{"Deployment", "dnsconfigurer-dns", "cluster-domain", []string{want.domain}},
		{"Deployment", "dnsconfigurer-webhook", "cluster-dns", []string{want.clusterDNS}},
		{"Deployment", "dnsconfigurer-webhook", "cluster-domain", []string{want.domain}},
		{"DaemonSet", agent, "cluster-dns", []string{want.clusterDNS}},
		{"DaemonSet", agent, "cluster-domain", []string{want.domain}},
		{"DaemonSet", agent, "node-local-dns", []string{nodeLocalIP + "," + want.clusterDNS}},
		{"DaemonSet", "dnsconfigurer-node-local-dns", "local-ip", []string{want.clusterDNS, nodeLocalIP}},
		{"DaemonSet", "dnsconfigurer-node-local-dns", "cluster-upstream", []string{want.upstream}},
		{"DaemonSet", "dnsconfigurer-node-local-dns", "cluster-domain", []string{want.domain}},
	} {
		if got := flagAll(args(c.kind, c.name), c.flag); !slices.Equal(got, c.want) {
			t.Errorf("%s %s: --%s %q, want %q", c.kind, c.name, c.flag, got, c.want)
		}
	}
	// Node-local watches the upstream Service where the render put it
	// (kube-system in place of CoreDNS).
	up := r.service(t, "dnsconfigurer-dns-upstream")
	nl := args("DaemonSet", "dnsconfigurer-node-local-dns")
	if got, want := flagSeparate(nl, "upstream-service"), up.Namespace+"/"+up.Name; got != want {
		t.Errorf("DaemonSet dnsconfigurer-node-local-dns: --upstream-service %q, want %q", got, want)
	}
}

// flagSeparate returns the value of a flag given as two arguments,
// --name value.
func flagSeparate(args []string, name string) string {
	if i := slices.Index(args, "--"+name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestOverlays renders each overlay of deploy/overlays, decodes it strictly
// and checks that its cluster settings reached every place; then an overlay
// of the base with settings of its own, in which no default may be left:
// the settings have one source.
func TestOverlays(t *testing.T) {
	for _, tc := range []struct{ dir, dnsService, dnsNamespace string }{
		{"overlays/side-by-side", "dnsconfigurer-dns", namespace},
		{"overlays/replace-coredns", "kube-dns", "kube-system"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			src := &objects{}
			b, err := os.ReadFile(filepath.Join(deployDir, tc.dir, "cluster-settings.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if err := src.add(tc.dir+"/cluster-settings.yaml", b); err != nil {
				t.Fatal(err)
			}
			r, _ := renderObjects(t, withKubeDNS(t, tc.dir))
			checkSettings(t, r, settingsOf(t, src), tc.dnsService, "dnsconfigurer-shim")
			if d := r.workload(t, "Deployment", "dnsconfigurer-dns"); !slices.ContainsFunc(r.deployments, func(x appsv1.Deployment) bool {
				return x.Name == d.name && x.Namespace == tc.dnsNamespace
			}) {
				t.Errorf("Deployment dnsconfigurer-dns not in %s", tc.dnsNamespace)
			}
		})
	}
	t.Run("examples", func(t *testing.T) {
		r, _ := renderObjects(t, filepath.Join(deployDir, "examples/node-resolver"))
		if len(r.webhookConfigs) != 1 || len(r.webhookConfigs[0].NodeResolver.Nameservers) == 0 {
			t.Errorf("examples/node-resolver: the webhook's nodeResolver is not set: %+v", r.webhookConfigs)
		}
		r, _ = renderObjects(t, filepath.Join(deployDir, "examples/autoscaler"))
		for _, d := range r.deployments {
			if d.Name == "dnsconfigurer-dns" && d.Spec.Replicas != nil {
				t.Errorf("examples/autoscaler: the cluster DNS Deployment keeps replicas %d, which an apply would reset", *d.Spec.Replicas)
			}
		}
		r.workload(t, "Deployment", "dnsconfigurer-dns-autoscaler")
	})
	t.Run("replace-coredns is kube-dns", func(t *testing.T) {
		r, _ := renderObjects(t, withKubeDNS(t, "overlays/replace-coredns"))
		checkKubeDNS(t, r)
	})
	t.Run("one source", func(t *testing.T) {
		checkOneSource(t, []string{"base"}, nil, "dnsconfigurer-shim")
	})
}

// checkOneSource renders the directories resources of deploy/ with the
// components and then cluster-settings, with settings other than the
// defaults, and
// checks that the settings reached every place and no default is left.
func checkOneSource(t *testing.T, resources, components []string, agent string) {
	t.Helper()
	want := settings{"10.100.0.10", "10.100.0.11", "example.internal"}
	dir := tempKustomization(t, resources, append(slices.Clone(components), "components/cluster-settings"), map[string]string{
		"cluster-settings.yaml": clusterSettings(want.clusterDNS, want.upstream, want.domain),
	})
	r, out := renderObjects(t, dir)
	checkSettings(t, r, want, "dnsconfigurer-dns", agent)
	for _, def := range []string{clusterDNSIP, "10.96.0.11", "cluster.local"} {
		if bytes.Contains(out, []byte(def)) {
			t.Errorf("the render with other settings still holds the default %q:\n%s", def, testkit.GrepLines(string(out), def))
		}
	}
}

// tempKustomization writes a kustomization into a temporary directory and
// returns the directory. resources and components are directories of
// deploy/ (made relative: kustomize takes no absolute paths); files are
// written next to the kustomization and listed after resources.
func tempKustomization(t *testing.T, resources, components []string, files map[string]string) string {
	t.Helper()
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	var k strings.Builder
	k.WriteString("resources:\n")
	for _, res := range resources {
		fmt.Fprintf(&k, "- %s\n", filepath.Join(rel, res))
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&k, "- %s\n", name)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(components) > 0 {
		k.WriteString("components:\n")
		for _, c := range components {
			fmt.Fprintf(&k, "- %s\n", filepath.Join(rel, c))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// withKubeDNS returns the directory to render for the overlay dir of
// deploy/ as a cluster has it: overlays/replace-coredns with kubeadm's
// kube-dns Service (deploy/kube-dns), which the overlay itself leaves out
// so that no rollback deletes it; any other overlay as it is.
func withKubeDNS(t *testing.T, dir string) string {
	t.Helper()
	if dir != "overlays/replace-coredns" {
		return filepath.Join(deployDir, dir)
	}
	return tempKustomization(t, []string{dir, "kube-dns"}, nil, nil)
}

// checkKubeDNS: the replace-CoreDNS overlay looks like kubeadm's CoreDNS
// from outside: kube-system/kube-dns with CoreDNS's ports and port names,
// selecting k8s-app: kube-dns, which the cluster DNS pods carry.
func checkKubeDNS(t *testing.T, r *objects) {
	t.Helper()
	var svc *corev1.Service
	for i := range r.services {
		if r.services[i].Name == "kube-dns" && r.services[i].Namespace == "kube-system" {
			svc = &r.services[i]
		}
	}
	if svc == nil {
		t.Fatal("no Service kube-system/kube-dns")
	}
	if !maps.Equal(svc.Spec.Selector, map[string]string{"k8s-app": "kube-dns"}) || svc.Labels["k8s-app"] != "kube-dns" {
		t.Errorf("kube-dns: selector %v labels %v, want k8s-app: kube-dns", svc.Spec.Selector, svc.Labels)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
	}
	if want := []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}; !slices.Equal(ports, want) {
		t.Errorf("kube-dns ports %q, want CoreDNS's %q", ports, want)
	}
	dns := r.workload(t, "Deployment", "dnsconfigurer-dns")
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dns.podLabels)) {
		t.Errorf("kube-dns does not select the cluster DNS pods %v", dns.podLabels)
	}
	c := dns.spec.Containers[0]
	for _, p := range svc.Spec.Ports {
		if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
			return cp.ContainerPort == p.TargetPort.IntVal && cp.Protocol == p.Protocol
		}) {
			t.Errorf("kube-dns port %s: targetPort %s is no %s port of the cluster DNS pods", p.Name, p.TargetPort.String(), p.Protocol)
		}
	}
}

// TestReplaceCoreDNSApply applies the replace-CoreDNS overlay to a real
// kube-apiserver (without the cert-manager objects) and shows that the
// usual "allow DNS" NetworkPolicy peer, pods labelled k8s-app: kube-dns in
// kube-system, selects the cluster DNS pods: a pod of the Deployment's
// template is listed by the policy's own selector as the API server stored
// it. Skips without kubectl or the test/testbin binaries.
func TestReplaceCoreDNSApply(t *testing.T) {
	// kubeadm's kube-dns is there before the overlay is applied.
	dir := "overlays/replace-coredns"
	r, cp, _ := applyRendered(t, dir, renderDir(t, withKubeDNS(t, dir)))
	ctx := t.Context()
	c := cp.Client()
	svc, err := c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != clusterDNSIP {
		t.Errorf("kube-system/kube-dns: clusterIP %s, want %s", svc.Spec.ClusterIP, clusterDNSIP)
	}
	if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "dnsconfigurer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dns := r.workload(t, "Deployment", "dnsconfigurer-dns")
	pod, err := c.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "dnsconfigurer-dns-", Labels: dns.podLabels},
		Spec:       dns.spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A NetworkPolicy of an application namespace that allows DNS egress
	// the way the Kubernetes docs and most charts write it.
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-dns", Namespace: "default"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
			}}}},
		},
	}
	np, err = c.NetworkingV1().NetworkPolicies("default").Create(ctx, np, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	peer := np.Spec.Egress[0].To[0]
	nsSel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	podSel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: nsSel.String()})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ns := range nss.Items {
		pods, err := c.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: podSel.String()})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			found = found || p.UID == pod.UID
		}
	}
	if !found {
		t.Errorf("NetworkPolicy peer %v / %v does not select the cluster DNS pod %s/%s (labels %v)", nsSel, podSel, pod.Namespace, pod.Name, pod.Labels)
	}
}

// applyOverlay renders dir of deploy/ and applies it to a real
// kube-apiserver without the cert-manager objects (there are no CRDs),
// then deletes the ValidatingWebhookConfiguration (its Service has no
// endpoints there). Skips without kubectl or the test/testbin binaries.
func applyOverlay(t *testing.T, dir string) (*objects, *apiserver.ControlPlane, []byte) {
	t.Helper()
	return applyRendered(t, dir, renderDir(t, filepath.Join(deployDir, dir)))
}

// applyRendered is applyOverlay for the output of kubectl kustomize, out,
// of the kustomization named dir in messages.
func applyRendered(t *testing.T, dir string, out []byte) (*objects, *apiserver.ControlPlane, []byte) {
	t.Helper()
	cp := apiserver.StartT(t)
	var keep [][]byte
	r := &objects{}
	for i, doc := range splitDocs(out) {
		if err := r.add(fmt.Sprintf("%s: rendered document %d", dir, i+1), doc); err != nil {
			t.Fatal(err)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(head.APIVersion, "cert-manager.io/") {
			keep = append(keep, doc)
		}
	}
	cmd := exec.CommandContext(t.Context(), "kubectl", "--kubeconfig", cp.Kubeconfig(),
		"apply", "--server-side", "--field-manager=dnsconfigurer-deploy-test", "-f", "-")
	cmd.Stdin = bytes.NewReader(bytes.Join(keep, []byte("---\n")))
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, b)
	}
	return r, cp, b
}

// nriDir is the overlay with the NRI plugin in place of the shim.
const nriDir = "overlays/nri"

// TestNRIOverlay renders overlays/nri (the NRI plugin, deploy/nri, in
// place of the shim), decodes it strictly and checks its cluster settings,
// the workloads' facts, the exact RBAC, the plugin DaemonSet's host paths
// and flags, and that the binary parses those flags.
func TestNRIOverlay(t *testing.T) {
	src := &objects{}
	b, err := os.ReadFile(filepath.Join(deployDir, nriDir, "cluster-settings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.add(nriDir+"/cluster-settings.yaml", b); err != nil {
		t.Fatal(err)
	}
	r, _ := renderObjects(t, filepath.Join(deployDir, nriDir))
	checkSettings(t, r, settingsOf(t, src), "dnsconfigurer-dns", "dnsconfigurer-nri")
	t.Run("workloads", func(t *testing.T) { checkWorkloads(t, r) })
	t.Run("rbac", func(t *testing.T) { checkRBAC(t, r) })
	t.Run("nri", func(t *testing.T) { checkNRI(t, r) })
	t.Run("no shim", func(t *testing.T) {
		for _, n := range r.names {
			if strings.Contains(n, "dnsconfigurer-shim") {
				t.Errorf("rendered %s: the shim is not part of %s", n, nriDir)
			}
		}
		if len(r.shimConfigs) != 0 {
			t.Errorf("%d ShimConfigurations rendered, want none", len(r.shimConfigs))
		}
	})
	t.Run("composition", func(t *testing.T) {
		for _, n := range r.names {
			kind, nsName, _ := strings.Cut(n, " ")
			ns, name, _ := strings.Cut(nsName, "/")
			want := namespaceOf(name)
			if kind == "Namespace" || strings.HasPrefix(kind, "Cluster") || kind == "ValidatingWebhookConfiguration" {
				want = ""
			}
			if ns != want {
				t.Errorf("rendered %s: want namespace %q", n, want)
			}
		}
		for _, w := range r.workloads() {
			for _, c := range w.spec.Containers {
				if c.Image != renderedImage {
					t.Errorf("%s %s container %s: image %q, want %s", w.kind, w.name, c.Name, c.Image, renderedImage)
				}
			}
		}
	})
	t.Run("one source", func(t *testing.T) {
		// The overlay's own directories, with other settings.
		b, err := os.ReadFile(filepath.Join(deployDir, nriDir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		k := decode[kustomization](t, nriDir+"/kustomization.yaml", b)
		var dirs, comps []string
		for _, res := range k.Resources {
			if d, ok := strings.CutPrefix(res, "../../"); ok {
				dirs = append(dirs, d)
			}
		}
		for _, c := range k.Components {
			if d, ok := strings.CutPrefix(c, "../../"); ok && d != "components/cluster-settings" {
				comps = append(comps, d)
			}
		}
		if !slices.Contains(comps, "components/agent-nri") || slices.Contains(comps, "components/agent-shim") || slices.Contains(dirs, "base") {
			t.Fatalf("%s resources %q components %q: want components/agent-nri and neither components/agent-shim nor ../../base", nriDir, k.Resources, k.Components)
		}
		checkOneSource(t, dirs, comps, "dnsconfigurer-nri")
	})
	t.Run("flags", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: not building the binary")
		}
		w := r.workload(t, "DaemonSet", "dnsconfigurer-nri")
		checkFlagsParse(t, buildbin.Dnsconfigurer(t), "DaemonSet "+w.name, w.spec.Containers[0].Args)
	})
}

// checkNRI: the NRI plugin DaemonSet: the runtime's socket directory and
// the state directory at their host paths (containerd bind-mounts the
// state files by their host path), the node's resolver files as the
// node-local stage reads them, root with no capability, its probes on the
// metrics listener, and this node's name.
func checkNRI(t *testing.T, o *objects) {
	w := o.workload(t, "DaemonSet", "dnsconfigurer-nri")
	checkNodeCritical(t, w)
	c := w.onlyContainer(t, "nri", "nri")
	if psc := w.spec.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("nri: pod seccompProfile not RuntimeDefault")
	}
	if sc := c.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 {
		t.Error("nri: want runAsUser 0 (the NRI socket is root's) and no added capability")
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Error("nri: no env NODE_NAME from spec.nodeName")
	}
	for name, want := range map[string]string{
		"socket":         v1alpha1.DefaultNRISocket,
		"state-dir":      v1alpha1.DefaultNRIStateDir,
		"resolv-conf":    "auto",
		"metrics-listen": "127.0.0.1:9311",
	} {
		if got, _ := flag(c.Args, name); got != want {
			t.Errorf("nri: --%s %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"config", "kubeconfig", "node-name"} {
		if v, ok := flag(c.Args, name); ok {
			t.Errorf("nri: --%s %q: in the DaemonSet the plugin takes flags, the in-cluster config and $NODE_NAME", name, v)
		}
	}
	ms := mountsOf(t, w, c)
	checkResolverMounts(t, w, ms)
	sock, _ := flag(c.Args, "socket")
	if m, ok := ms[filepath.Dir(sock)]; !ok || m.vol.HostPath == nil || m.vol.HostPath.Path != filepath.Dir(sock) {
		t.Errorf("nri: the directory of --socket %q is not a host directory mount at the same path", sock)
	}
	state, _ := flag(c.Args, "state-dir")
	if m, ok := ms[state]; !ok || m.vol.HostPath == nil || m.vol.HostPath.Path != state || m.readOnly {
		t.Errorf("nri: --state-dir %q is not a writable host directory mount at the same path (containerd binds its files by their host path)", state)
	}
	if ml, _ := flag(c.Args, "metrics-listen"); c.ReadinessProbe != nil && c.LivenessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet != nil {
		checkProbeAddr(t, "nri", w, c, ml)
	}
	// The node's search domains: the same resolver config as the
	// node-local stage's.
	nl := o.workload(t, "DaemonSet", "dnsconfigurer-node-local-dns").spec.Containers[0]
	if got, want := flagAll(c.Args, "resolv-conf"), flagAll(nl.Args, "resolv-conf"); !slices.Equal(got, want) {
		t.Errorf("nri: --resolv-conf %q, node-local's %q: want the same", got, want)
	}
}

// TestNRIApply applies overlays/nri to a real kube-apiserver, asks the
// RBAC authorizer what the plugin's ServiceAccount may do, and creates a
// pod of the plugin DaemonSet's template in its namespace (Pod Security
// privileged). Skips without kubectl or the test/testbin binaries.
func TestNRIApply(t *testing.T) {
	r, cp, _ := applyOverlay(t, nriDir)
	ctx := t.Context()
	c := cp.Client()
	if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "dnsconfigurer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const sa = "dnsconfigurer-nri"
	for _, a := range []struct {
		verb, group, resource, ns string
		allowed                   bool
	}{
		{"list", "", "pods", "", true},
		{"watch", "", "pods", "", true},
		{"get", "", "pods", "default", false},
		{"update", "", "pods", "default", false},
		{"create", "", "events", "default", true},
		{"patch", "", "events", "default", true},
		{"create", "events.k8s.io", "events", "default", false},
		{"list", "", "secrets", "", false},
		{"list", "", "nodes", "", false},
	} {
		user, groups := apiserver.ServiceAccountUser(nodeNamespace, sa)
		attrs := authorizationv1.ResourceAttributes{Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource}
		if allowed, reason := apiserver.Allowed(t, c, user, groups, attrs); allowed != a.allowed {
			t.Errorf("%s %s %s/%s in %q: allowed %v, want %v (%s)", sa, a.verb, a.group, a.resource, a.ns, allowed, a.allowed, reason)
		}
	}
	for _, w := range r.workloads() {
		ns := namespaceOf(w.name)
		if err := w.createPod(ctx, c, ns); err != nil {
			t.Errorf("%s %s: a pod of its template in namespace %s: %v", w.kind, w.name, ns, err)
		}
	}
}

// clusterSettings is the cluster-settings component's ConfigMap with the
// given settings.
func clusterSettings(dns, upstream, domain string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: dnsconfigurer-cluster-settings
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  clusterDNS: %s
  clusterDNSUpstream: %s
  clusterDomain: %s
`, dns, upstream, domain)
}
