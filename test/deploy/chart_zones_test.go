package deploy

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// zoneLabel is the chart's pod label of a zones entry.
const zoneLabel = "dnsconfigurer.io/topology-zone"

// renderChartObjects renders the chart with sets (helm flags) and decodes it
// strictly, the helm test Pod left out.
func renderChartObjects(t *testing.T, sets ...string) *objects {
	t.Helper()
	out := helmTemplate(t, helmBin(t), append([]string{"--skip-tests", "--set", "webhook.certManager.enabled=true"}, sets...)...)
	o := &objects{}
	for i, doc := range splitDocs(out) {
		if err := o.add(fmt.Sprintf("chart document %d", i+1), doc); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// TestChartTopologySpread: without zones the one Deployment keeps its name
// and spreads over topology zones, then nodes, both ScheduleAnyway (a
// cluster without zone labels still schedules), with one budget.
func TestChartTopologySpread(t *testing.T) {
	o := renderChartObjects(t)
	dep := named(t, "Deployment", o.deployments, "dnsconfigurer-dns")
	type spread struct {
		key  string
		skew int32
		when corev1.UnsatisfiableConstraintAction
	}
	var got []spread
	for _, c := range dep.Spec.Template.Spec.TopologySpreadConstraints {
		got = append(got, spread{c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable})
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
			t.Errorf("constraint %s: selector %v does not select the Deployment's pods", c.TopologyKey, c.LabelSelector)
		}
		if !slices.Equal(c.MatchLabelKeys, []string{"pod-template-hash"}) {
			t.Errorf("constraint %s: matchLabelKeys %q, want [pod-template-hash]", c.TopologyKey, c.MatchLabelKeys)
		}
	}
	want := []spread{
		{"topology.kubernetes.io/zone", 1, corev1.ScheduleAnyway},
		{"kubernetes.io/hostname", 1, corev1.ScheduleAnyway},
	}
	if !slices.Equal(got, want) {
		t.Errorf("topologySpreadConstraints %+v, want %+v", got, want)
	}
	if _, ok := dep.Spec.Template.Labels[zoneLabel]; ok {
		t.Errorf("pods labelled %s without zones", zoneLabel)
	}
	var pdbs []string
	for _, p := range o.pdbs {
		if sel, _ := metav1.LabelSelectorAsSelector(p.Spec.Selector); sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
			pdbs = append(pdbs, p.Name)
			if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget %s: minAvailable %v, want 1", p.Name, p.Spec.MinAvailable)
			}
		}
	}
	if !slices.Equal(pdbs, []string{"dnsconfigurer-dns"}) {
		t.Errorf("budgets of the DNS pods %q, want [dnsconfigurer-dns]", pdbs)
	}
}

// TestChartZones: zones renders one Deployment per topology zone on that
// zone's nodes and one budget per zone (each pod under exactly one, as
// eviction requires), all behind the same Services, in both placements.
func TestChartZones(t *testing.T) {
	for _, tc := range []struct {
		name, placement string
		sets            []string
		// want: zone name to Deployment name and replicas.
		want map[string]struct {
			name     string
			replicas int32
		}
	}{
		{"names", "side-by-side", []string{"--set", "zones={zone-a,zone-b}"}, map[string]struct {
			name     string
			replicas int32
		}{"zone-a": {"dnsconfigurer-dns-zone-a", 2}, "zone-b": {"dnsconfigurer-dns-zone-b", 2}}},
		{"objects, replace-coredns", "replace-coredns", []string{"--set-json", `zones=[{"name":"eu-west-1a","replicas":3},"EU_West.1b"]`}, map[string]struct {
			name     string
			replicas int32
		}{"eu-west-1a": {"dnsconfigurer-dns-eu-west-1a", 3}, "EU_West.1b": {"dnsconfigurer-dns-eu-west-1b", 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := renderChartObjects(t, append([]string{"--set", "placement=" + tc.placement}, tc.sets...)...)
			ns := "dnsconfigurer"
			svcs := []string{"dnsconfigurer-dns", "dnsconfigurer-dns-upstream"}
			if tc.placement == "replace-coredns" {
				ns, svcs = "kube-system", []string{"kube-dns", "dnsconfigurer-dns-upstream"}
			}
			var deps []appsv1.Deployment
			for _, d := range o.deployments {
				if strings.HasPrefix(d.Name, "dnsconfigurer-dns") {
					deps = append(deps, d)
				}
			}
			if len(deps) != len(tc.want) {
				t.Fatalf("%d cluster DNS Deployments, want %d (one per zone, none named dnsconfigurer-dns)", len(deps), len(tc.want))
			}
			for _, d := range deps {
				zone := d.Spec.Template.Labels[zoneLabel]
				w, ok := tc.want[zone]
				if !ok || d.Name != w.name || d.Namespace != ns {
					t.Errorf("Deployment %s/%s: pods of zone %q, want one of %v in %s", d.Namespace, d.Name, zone, tc.want, ns)
					continue
				}
				if d.Spec.Replicas == nil || *d.Spec.Replicas != w.replicas {
					t.Errorf("Deployment %s: replicas %v, want %d", d.Name, d.Spec.Replicas, w.replicas)
				}
				if got := d.Spec.Template.Spec.NodeSelector["topology.kubernetes.io/zone"]; got != zone {
					t.Errorf("Deployment %s: nodeSelector zone %q, want %q", d.Name, got, zone)
				}
				if d.Spec.Selector.MatchLabels[zoneLabel] != zone {
					t.Errorf("Deployment %s: selector %v lacks its zone", d.Name, d.Spec.Selector.MatchLabels)
				}
				pods := labels.Set(d.Spec.Template.Labels)
				for _, name := range svcs {
					if !labels.SelectorFromSet(o.service(t, name).Spec.Selector).Matches(pods) {
						t.Errorf("Service %s does not select the pods of %s", name, d.Name)
					}
				}
				var under []policyv1.PodDisruptionBudget
				for _, p := range o.pdbs {
					if sel, _ := metav1.LabelSelectorAsSelector(p.Spec.Selector); p.Namespace == ns && sel.Matches(pods) {
						under = append(under, p)
					}
				}
				if len(under) != 1 || under[0].Name != w.name || under[0].Spec.MinAvailable == nil || under[0].Spec.MinAvailable.IntValue() != 1 {
					t.Errorf("Deployment %s: budgets %+v, want exactly %s with minAvailable 1", d.Name, under, w.name)
				}
			}
		})
	}
}

// TestChartZonesRefused: what zones cannot be combined with fails the
// render with a message naming the way out.
func TestChartZonesRefused(t *testing.T) {
	helm := helmBin(t)
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"autoscaler", []string{"--set", "zones={a,b}", "--set", "autoscaler.enabled=true"}, "zones and autoscaler.enabled"},
		{"hpa", []string{"--set", "zones={a,b}", "--set", "hpa.enabled=true"}, "zones and hpa.enabled"},
		{"one suffix twice", []string{"--set", "zones={zone-a,Zone.A}"}, `both name objects dnsconfigurer-dns-zone-a`},
		{"budget selector", []string{"--set", "zones={a}", "--set", "podDisruptionBudget.selector.matchLabels.x=y"}, "podDisruptionBudget.selector"},
		{"not a label value", []string{"--set", "zones={-a}"}, "at '/zones/0'"},
		{"replicas 0", []string{"--set-json", `zones=[{"name":"a","replicas":0}]`}, "at '/zones/0'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmTemplateErr(t, helm, tc.sets...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template %q: %v, want an error with %q", tc.sets, err, tc.want)
			}
		})
	}
}

// TestChartTopologyRBAC: the node-local stage may get Nodes and list and
// watch EndpointSlices, the cluster DNS list and watch Nodes with its pods;
// rbac.create false renders neither role.
func TestChartTopologyRBAC(t *testing.T) {
	has := func(rules []rbacv1.PolicyRule, group, resource string, verbs ...string) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) &&
				!slices.ContainsFunc(verbs, func(v string) bool { return !slices.Contains(r.Verbs, v) })
		})
	}
	for _, placement := range []string{"side-by-side", "replace-coredns"} {
		t.Run(placement, func(t *testing.T) {
			o := renderChartObjects(t, "--set", "placement="+placement)
			nl := named(t, "ClusterRole", o.clusterRoles, "dnsconfigurer-node-local-dns")
			if !has(nl.Rules, "", "nodes", "get") || !has(nl.Rules, "discovery.k8s.io", "endpointslices", "list", "watch") {
				t.Errorf("ClusterRole %s: rules %+v, want get nodes and list, watch endpointslices", nl.Name, nl.Rules)
			}
			b := named(t, "ClusterRoleBinding", o.clusterRoleBindings, "dnsconfigurer-node-local-dns")
			if len(b.Subjects) != 1 || b.Subjects[0].Name != "dnsconfigurer-node-local-dns" || b.Subjects[0].Namespace != nodeNamespace {
				t.Errorf("ClusterRoleBinding %s: subjects %+v", b.Name, b.Subjects)
			}
			// Nodes with the pods: pods verified, not replace-coredns's insecure.
			dns := named(t, "ClusterRole", o.clusterRoles, "dnsconfigurer-dns")
			if want := placement != "replace-coredns"; has(dns.Rules, "", "nodes", "list", "watch") != want {
				t.Errorf("ClusterRole %s: rules %+v, want list, watch nodes %t", dns.Name, dns.Rules, want)
			}
		})
	}
	o := renderChartObjects(t, "--set", "rbac.create=false")
	if len(o.clusterRoles) != 0 || len(o.clusterRoleBindings) != 0 {
		t.Errorf("rbac.create=false: %d ClusterRoles, %d bindings", len(o.clusterRoles), len(o.clusterRoleBindings))
	}
}

// TestChartZonesApply applies the zones render to a real kube-apiserver
// (its schema validation and admission) and creates a pod from each zone's
// template. Skips without kubectl or the test/testbin binaries.
func TestChartZonesApply(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not in PATH")
	}
	out := helmTemplate(t, helmBin(t), "--skip-tests", "--set", "webhook.certManager.enabled=true", "--set", "image.tag=latest",
		"--set-json", `zones=["zone-a",{"name":"zone-b","replicas":3}]`)
	r, cp, b := applyRendered(t, "chart zones", out)
	if bytes.Contains(b, []byte("Warning")) {
		t.Errorf("kubectl apply warned:\n%s", b)
	}
	ctx := t.Context()
	c := cp.Client()
	if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "dnsconfigurer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pdbs, err := c.PolicyV1().PodDisruptionBudgets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pdbs.Items {
		names = append(names, p.Name)
	}
	if want := []string{"dnsconfigurer-dns-zone-a", "dnsconfigurer-dns-zone-b", "dnsconfigurer-webhook"}; !slices.Equal(names, want) {
		t.Errorf("PodDisruptionBudgets in %s: %q, want %q", namespace, names, want)
	}
	n := 0
	for _, w := range r.workloads() {
		if !strings.HasPrefix(w.name, "dnsconfigurer-dns-zone-") {
			continue
		}
		n++
		if err := w.createPod(ctx, c, namespace); err != nil {
			t.Errorf("%s %s: a pod of its template: %v", w.kind, w.name, err)
		}
	}
	if n != 2 {
		t.Errorf("%d zone Deployments applied, want 2", n)
	}
}
