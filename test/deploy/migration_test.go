package deploy

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
)

// rollbackSets are the kustomizations deploy/README.md tells to
// `kubectl delete -k`, each with whether the set may hold the cluster DNS
// server. An overlay may: the README deletes it only once CoreDNS answers
// again (replace-coredns) or while CoreDNS never stopped (side-by-side).
// An agent's set may not: rolling the agent back must leave the only
// cluster DNS running.
var rollbackSets = map[string]bool{
	"deploy/overlays/side-by-side":    true,
	"deploy/overlays/replace-coredns": true,
	"deploy/nri":                      false,
	"deploy/shim":                     false,
}

// clusterOwned are objects of the cluster (kubeadm's CoreDNS add-on) that
// no set a rollback deletes may hold: kubectl has no keep-on-delete, so
// they must not be in the set at all.
var clusterOwned = []string{
	"Service kube-system/kube-dns",
	"Deployment kube-system/coredns",
	"ConfigMap kube-system/coredns",
	"ServiceAccount kube-system/coredns",
}

// clusterDNS are the objects of dnsconfigurer's cluster DNS server, in
// either placement.
var clusterDNS = regexp.MustCompile(`^(Deployment|Service) (dnsconfigurer|kube-system)/dnsconfigurer-dns(-upstream)?$`)

// deleteK finds the `kubectl delete -k DIR` commands of a document.
var deleteK = regexp.MustCompile("kubectl delete -k (deploy/[A-Za-z0-9_./-]+[A-Za-z0-9_-])")

// TestRollbackDocumented: the sets deploy/README.md deletes are exactly
// rollbackSets, so that TestRollbackSets checks every one of them.
func TestRollbackDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, m := range deleteK.FindAllStringSubmatch(string(b), -1) {
		found[m[1]] = true
	}
	for dir := range found {
		if _, ok := rollbackSets[dir]; !ok {
			t.Errorf("deploy/README.md: kubectl delete -k %s is not in rollbackSets: add it there, so that its set is checked", dir)
		}
	}
	for dir := range rollbackSets {
		if !found[dir] {
			t.Errorf("rollbackSets: %s is not deleted in deploy/README.md", dir)
		}
	}
}

// TestRollbackSets renders every set deploy/README.md deletes with the
// real kustomize and checks that none holds kube-system/kube-dns or
// CoreDNS, and that an agent's set does not hold the cluster DNS.
func TestRollbackSets(t *testing.T) {
	kustomize := kustomizeBin(t)
	for dir, mayHoldDNS := range rollbackSets {
		t.Run(dir, func(t *testing.T) {
			names := renderedNames(t, kustomize, filepath.Join(deployDir, strings.TrimPrefix(dir, "deploy/")))
			checkNoClusterOwned(t, "kubectl delete -k "+dir, names)
			if mayHoldDNS {
				return
			}
			for _, n := range names {
				if clusterDNS.MatchString(n) || strings.HasPrefix(n, "Namespace ") {
					t.Errorf("kubectl delete -k %s deletes %s: rolling the agent back would take the cluster DNS (or the namespace of the node-local stage) with it", dir, n)
				}
			}
		})
	}
}

// TestCompositions renders every combination of deploy/components (agent ×
// placement × canary) as a kustomization of one's own would compose them,
// with the real kustomize: each renders, holds nothing of the cluster's
// (its `kubectl delete -k` is a rollback too), runs one agent and the
// cluster DNS, and with the canary component the node DaemonSets, and only
// they, select the canary label.
func TestCompositions(t *testing.T) {
	kustomize := kustomizeBin(t)
	for _, agent := range []string{"shim", "nri"} {
		for _, placement := range []string{"side-by-side", "replace-coredns"} {
			for _, canary := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/canary=%t", agent, placement, canary)
				t.Run(name, func(t *testing.T) {
					comps := []string{"components/" + placement, "components/agent-" + agent, "components/cluster-settings"}
					if canary {
						comps = append(comps, "components/canary")
					}
					r := kustomizeObjects(t, kustomize, composition(t, comps...))
					checkNoClusterOwned(t, name, r.names)
					checkConfigCopy(t, r)
					dnsNS := map[string]string{"side-by-side": namespace, "replace-coredns": "kube-system"}[placement]
					if !slices.Contains(r.names, "Deployment "+dnsNS+"/dnsconfigurer-dns") {
						t.Errorf("no Deployment %s/dnsconfigurer-dns in %q", dnsNS, r.names)
					}
					var agents []string
					for _, d := range r.daemonSets {
						if d.Name == "dnsconfigurer-shim" || d.Name == "dnsconfigurer-nri" {
							agents = append(agents, d.Name)
						}
					}
					if want := []string{"dnsconfigurer-" + agent}; !slices.Equal(agents, want) {
						t.Errorf("agent DaemonSets %q, want %q", agents, want)
					}
					for _, w := range r.workloads() {
						_, got := w.spec.NodeSelector[canaryLabel]
						want := canary && w.kind == "DaemonSet"
						if got != want || got && w.spec.NodeSelector[canaryLabel] != "true" {
							t.Errorf("%s %s: nodeSelector %v; want %s=true %t", w.kind, w.name, w.spec.NodeSelector, canaryLabel, want)
						}
					}
				})
			}
		}
	}
}

// TestTakeOverExample: deploy/examples/take-over-nodelocaldns renders the
// node-local stage on kubelet's clusterDNS and the link-local address, on
// canary nodes only, and its Corefile settings (dns-config, a component
// before cluster-settings) reach the node-local stage's copy.
func TestTakeOverExample(t *testing.T) {
	r := kustomizeObjects(t, kustomizeBin(t), filepath.Join(deployDir, "examples/take-over-nodelocaldns"))
	checkNoClusterOwned(t, "examples/take-over-nodelocaldns", r.names)
	cfg := checkConfigCopy(t, r)
	if cfg.Pods != "insecure" {
		t.Errorf("the cluster DNS runs pods %q, want dns-config/cm.yaml's insecure", cfg.Pods)
	}
	nl := r.workload(t, "DaemonSet", "dnsconfigurer-node-local-dns")
	if got := flagAll(nl.spec.Containers[0].Args, "local-ip"); !slices.Equal(got, []string{clusterDNSIP, nodeLocalIP}) {
		t.Errorf("node-local --local-ip %q, want kubelet's clusterDNS and the link-local address", got)
	}
	if nl.spec.NodeSelector[canaryLabel] != "true" {
		t.Errorf("node-local nodeSelector %v: not on canary nodes only", nl.spec.NodeSelector)
	}
}

// checkConfigCopy: the node-local stage's --cluster-config is the cluster
// DNS's ServerConfiguration. It returns that configuration.
func checkConfigCopy(t *testing.T, r *objects) v1alpha1.ServerConfiguration {
	t.Helper()
	dns := r.workload(t, "Deployment", "dnsconfigurer-dns")
	nl := r.workload(t, "DaemonSet", "dnsconfigurer-node-local-dns")
	dnsCfg := r.serveConfig(t, dns, dns.spec.Containers[0], "config")
	if nlCfg := r.serveConfig(t, nl, nl.spec.Containers[0], "cluster-config"); !reflect.DeepEqual(nlCfg, dnsCfg) {
		t.Errorf("node-local --cluster-config %+v, the cluster DNS runs %+v: want the same", nlCfg, dnsCfg)
	}
	return dnsCfg
}

// composition writes a kustomization of deploy/'s webhook, namespace-node
// and nodelocal with the components comps, as an overlay composes them,
// and the comparison's cluster settings; it returns its directory.
func composition(t *testing.T, comps ...string) string {
	t.Helper()
	return tempKustomization(t, []string{"webhook", "namespace-node", "nodelocal"}, comps,
		map[string]string{"cluster-settings.yaml": clusterSettings(cmpDNS, cmpUpstream, cmpDomain)})
}

// kustomizeObjects builds dir with kustomize and decodes the objects
// strictly.
func kustomizeObjects(t *testing.T, kustomize, dir string) *objects {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), kustomize, "build", dir).Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, stderrOf(err))
	}
	r := &objects{}
	for i, doc := range splitDocs(out) {
		if err := r.add(fmt.Sprintf("%s: document %d", dir, i+1), doc); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// canaryLabel is the node label of components/canary.
const canaryLabel = "dnsconfigurer.io/canary"

// checkNoClusterOwned fails for every object of clusterOwned in names.
func checkNoClusterOwned(t *testing.T, what string, names []string) {
	t.Helper()
	for _, n := range names {
		if slices.Contains(clusterOwned, n) {
			t.Errorf("%s holds %s, which belongs to the cluster: its kubectl delete -k would delete it", what, n)
		}
	}
}

// renderedNames builds dir with kustomize and returns "Kind ns/name" of
// every object, whatever its kind.
func renderedNames(t *testing.T, kustomize, dir string) []string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), kustomize, "build", dir).Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, stderrOf(err))
	}
	objs, err := manifest.Parse(dir, out, manifest.DefaultLimits.MaxObjects)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Kind+" "+o.Namespace+"/"+o.Name)
	}
	if len(names) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	return names
}

// TestCiliumExample: deploy/examples/cilium's CiliumLocalRedirectPolicy
// redirects the kube-dns Service to pods with the node-local stage's
// labels, on the DNS ports of both protocols, in the Service's namespace.
func TestCiliumExample(t *testing.T) {
	o := &objects{}
	b, err := os.ReadFile(filepath.Join(deployDir, "examples/cilium/localredirectpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.add("examples/cilium/localredirectpolicy.yaml", b); err != nil {
		t.Fatal(err)
	}
	p := o.redirectPolicies[0]
	sm := p.Spec.RedirectFrontend.ServiceMatcher
	if sm == nil || sm.ServiceName != "kube-dns" || sm.Namespace != "kube-system" || p.Namespace != sm.Namespace {
		t.Errorf("redirectFrontend %+v in namespace %q: want the Service kube-system/kube-dns, from its namespace", sm, p.Namespace)
	}
	nl := loadSources(t).workload(t, "DaemonSet", "dnsconfigurer-node-local-dns")
	if !maps.Equal(p.Spec.RedirectBackend.LocalEndpointSelector.MatchLabels, nl.selector.MatchLabels) {
		t.Errorf("localEndpointSelector %v, want the node-local DaemonSet's selector %v", p.Spec.RedirectBackend.LocalEndpointSelector.MatchLabels, nl.selector.MatchLabels)
	}
	var ports []string
	for _, tp := range p.Spec.RedirectBackend.ToPorts {
		ports = append(ports, tp.Name+" "+tp.Port+"/"+tp.Protocol)
	}
	if want := []string{"dns 53/UDP", "dns-tcp 53/TCP"}; !slices.Equal(ports, want) {
		t.Errorf("redirectBackend toPorts %q, want %q", ports, want)
	}
}

// podMonitor and serviceMonitor are the Prometheus Operator's kinds
// (monitoring.coreos.com/v1), the fields components/monitoring uses, for a
// strict decode without the CRDs (kubectl cannot check them either).
type podMonitor struct {
	monitorHead `json:",inline"`
	Spec        struct {
		monitorSelector     `json:",inline"`
		PodMetricsEndpoints []struct {
			Port       string              `json:"port,omitempty"`
			TargetPort *intstr.IntOrString `json:"targetPort,omitempty"`
			Path       string              `json:"path"`
			Interval   string              `json:"interval,omitempty"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type serviceMonitor struct {
	monitorHead `json:",inline"`
	Spec        struct {
		monitorSelector `json:",inline"`
		Endpoints       []struct {
			Port      string `json:"port"`
			Path      string `json:"path"`
			Scheme    string `json:"scheme,omitempty"`
			Interval  string `json:"interval,omitempty"`
			TLSConfig *struct {
				ServerName string `json:"serverName,omitempty"`
				CA         struct {
					Secret *corev1.SecretKeySelector `json:"secret,omitempty"`
				} `json:"ca"`
			} `json:"tlsConfig,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// monitorHead and monitorSelector are what both monitor kinds share.
type monitorHead struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
}

type monitorSelector struct {
	NamespaceSelector *namespaceSelector   `json:"namespaceSelector,omitempty"`
	Selector          metav1.LabelSelector `json:"selector"`
}

type namespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

// TestMonitoringComponent renders components/monitoring over each
// placement and checks that every monitor selects its workload, in the
// workload's namespace, on the port its metrics are served on: the cluster
// DNS's container port, node-local's --metrics-listen port, the webhook
// Service's HTTPS port with the CA of its certificate's Secret.
func TestMonitoringComponent(t *testing.T) {
	kustomize := kustomizeBin(t)
	for _, placement := range []string{"side-by-side", "replace-coredns"} {
		t.Run(placement, func(t *testing.T) {
			r := kustomizeObjects(t, kustomize, composition(t,
				"components/"+placement, "components/agent-shim", "components/cluster-settings", "components/monitoring"))
			if len(r.podMonitors) != 2 || len(r.serviceMonitors) != 1 {
				t.Fatalf("%d PodMonitors and %d ServiceMonitors, want 2 and 1", len(r.podMonitors), len(r.serviceMonitors))
			}
			for _, pm := range r.podMonitors {
				checkPodMonitor(t, r, pm)
			}
			checkWebhookMonitor(t, r, r.serviceMonitors[0])
		})
	}
}

// checkPodMonitor: pm selects exactly one workload's pods, in a namespace
// it watches, on the port that workload serves /metrics on.
func checkPodMonitor(t *testing.T, r *objects, pm podMonitor) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		t.Fatalf("PodMonitor %s: %v", pm.Name, err)
	}
	var hit []workload
	for _, w := range r.workloads() {
		if sel.Matches(labels.Set(w.podLabels)) {
			hit = append(hit, w)
		}
	}
	if len(hit) != 1 || len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("PodMonitor %s: selects %d workloads with %d endpoints, want 1 and 1", pm.Name, len(hit), len(pm.Spec.PodMetricsEndpoints))
	}
	w, ep := hit[0], pm.Spec.PodMetricsEndpoints[0]
	ns := []string{pm.Namespace}
	if pm.Spec.NamespaceSelector != nil {
		ns = pm.Spec.NamespaceSelector.MatchNames
	}
	if !slices.Contains(ns, w.namespace) {
		t.Errorf("PodMonitor %s: watches namespaces %q, the pods are in %s", pm.Name, ns, w.namespace)
	}
	c := w.spec.Containers[0]
	var scraped string
	if ep.Port != "" {
		cp, ok := port(c, ep.Port)
		if !ok {
			t.Fatalf("PodMonitor %s: port %q is no container port of %s", pm.Name, ep.Port, w.name)
		}
		scraped = fmt.Sprint(cp.ContainerPort)
	} else if ep.TargetPort != nil {
		scraped = ep.TargetPort.String()
	}
	listen, ok := flag(c.Args, "metrics-listen")
	if !ok && w.kind == "Deployment" {
		listen = r.serveConfig(t, w, c, "config").MetricsListen
	}
	if scraped == "" || !strings.HasSuffix(listen, ":"+scraped) {
		t.Errorf("PodMonitor %s: scrapes port %q, %s serves metrics on %q", pm.Name, scraped, w.name, listen)
	}
	if ep.Path != "/metrics" {
		t.Errorf("PodMonitor %s: path %q, want /metrics", pm.Name, ep.Path)
	}
}

// checkWebhookMonitor: sm selects the webhook's Service, scrapes its HTTPS
// port and checks the serving certificate with the CA of its Secret.
func checkWebhookMonitor(t *testing.T, r *objects, sm serviceMonitor) {
	t.Helper()
	svc := r.service(t, "dnsconfigurer-webhook")
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(svc.Labels)) || sm.Namespace != svc.Namespace {
		t.Errorf("ServiceMonitor %s in %s: selector %v does not select Service %s/%s (labels %v)", sm.Name, sm.Namespace, sm.Spec.Selector, svc.Namespace, svc.Name, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor %s: %d endpoints, want 1", sm.Name, len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) || ep.Scheme != "https" || ep.Path != "/metrics" {
		t.Errorf("ServiceMonitor %s: endpoint %s %s %s, want https /metrics on a port of Service %s", sm.Name, ep.Scheme, ep.Port, ep.Path, svc.Name)
	}
	host := svc.Name + "." + svc.Namespace + ".svc"
	var secret string
	for _, c := range r.certificates {
		if slices.Contains(c.Spec.DNSNames, host) {
			secret = c.Spec.SecretName
		}
	}
	if tc := ep.TLSConfig; tc == nil || tc.CA.Secret == nil || tc.CA.Secret.Name != secret || tc.CA.Secret.Key != "ca.crt" ||
		tc.ServerName != host || secret == "" {
		t.Errorf("ServiceMonitor %s: tlsConfig %+v, want the CA of Secret %q and server name %s", sm.Name, ep.TLSConfig, secret, host)
	}
}
