// Package deploy tests the kustomize base in deploy/: every manifest file
// decodes strictly into its API type (unknown fields are errors), the
// objects hold the facts the components and deploy/README.md rely on, and
// `kubectl kustomize deploy` renders them into one consistent namespace.
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

const (
	deployDir = "../../deploy"
	namespace = "dnsconfigurer"

	clusterDNSIP = "10.96.0.10"
	nodeLocalIP  = "169.254.20.10"
	// nodeNamespace holds what runs on every node (Pod Security
	// privileged): the shim (or the NRI plugin) and the node-local stage.
	nodeNamespace = "dnsconfigurer-node"
	// localConfig marks the cluster settings ConfigMaps, which kustomize
	// reads and does not render.
	localConfig = "config.kubernetes.io/local-config"

	// The image every dnsconfigurer container names and renders with
	// (deploy/base/kustomization.yaml).
	renderedImage = "dnsconfigurer:latest"
)

// wantRules are the API permissions of each ServiceAccount, as
// "group/resource verb" (core group ""), and nothing else. A
// ServiceAccount missing here fails the test: add it with the rules its
// component's code needs.
var wantRules = map[string][]string{
	// pkg/kubefeed: informers (list, watch) on Services, Namespaces,
	// EndpointSlices and, with --pods verified, Pods; pkg/kubefeed
	// events.go: a Warning Event on an object it cannot serve.
	"dnsconfigurer-dns": {
		"/events create", "/events patch",
		"/namespaces list", "/namespaces watch",
		"/nodes list", "/nodes watch",
		"/pods list", "/pods watch",
		"/services list", "/services watch",
		"discovery.k8s.io/endpointslices list", "discovery.k8s.io/endpointslices watch",
	},
	// pkg/podfacts: the pod informer of its node, and Events on those pods.
	"dnsconfigurer-shim": {
		"/events create", "/events patch",
		"/pods list", "/pods watch",
	},
	// cmd/dnsconfigurer/nri.go (deploy/nri, deploy/overlays/nri): the
	// shim's pod informer of its node and its Event recorder.
	"dnsconfigurer-nri": {
		"/events create", "/events patch",
		"/pods list", "/pods watch",
	},
	// The node-local stage prefers its topology zone's cluster DNS pods:
	// its Node's zone label, the upstream Service's EndpointSlices.
	"dnsconfigurer-node-local-dns": {
		"/nodes get",
		"discovery.k8s.io/endpointslices list", "discovery.k8s.io/endpointslices watch",
	},
	// It never calls the API server.
	"dnsconfigurer-webhook": nil,
}

// kustomization holds the kustomize fields deploy/ uses.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	Components []string `json:"components,omitempty"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
		IncludeTemplates bool              `json:"includeTemplates,omitempty"`
	} `json:"labels,omitempty"`
	Replacements []struct {
		Source struct {
			Kind      string `json:"kind"`
			Name      string `json:"name"`
			FieldPath string `json:"fieldPath"`
		} `json:"source"`
		Targets []struct {
			Select     map[string]string `json:"select"`
			FieldPaths []string          `json:"fieldPaths"`
			Options    *struct {
				Delimiter string `json:"delimiter"`
				Index     int    `json:"index"`
			} `json:"options,omitempty"`
		} `json:"targets"`
	} `json:"replacements,omitempty"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
	Patches []struct {
		Target map[string]string `json:"target"`
		Patch  string            `json:"patch,omitempty"`
		Path   string            `json:"path,omitempty"`
	} `json:"patches,omitempty"`
	ConfigMapGenerator []struct {
		Name      string   `json:"name"`
		Namespace string   `json:"namespace,omitempty"`
		Behavior  string   `json:"behavior,omitempty"`
		Files     []string `json:"files"`
		Options   *struct {
			DisableNameSuffixHash bool              `json:"disableNameSuffixHash,omitempty"`
			Labels                map[string]string `json:"labels,omitempty"`
		} `json:"options,omitempty"`
	} `json:"configMapGenerator,omitempty"`
}

// objects are decoded manifests, by type.
type objects struct {
	namespaces          []corev1.Namespace
	serviceAccounts     []corev1.ServiceAccount
	configMaps          []corev1.ConfigMap
	services            []corev1.Service
	deployments         []appsv1.Deployment
	daemonSets          []appsv1.DaemonSet
	pdbs                []policyv1.PodDisruptionBudget
	clusterRoles        []rbacv1.ClusterRole
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	roles               []rbacv1.Role
	roleBindings        []rbacv1.RoleBinding
	webhooks            []admissionregistrationv1.ValidatingWebhookConfiguration
	issuers             []testkit.CertManagerIssuer
	certificates        []testkit.CertManagerCertificate
	prometheusRules     []prometheusRule // deploy/monitoring (monitoring_test.go)
	redirectPolicies    []localRedirectPolicy
	podMonitors         []podMonitor     // components/monitoring (migration_test.go)
	serviceMonitors     []serviceMonitor // components/monitoring
	shimConfigs         []v1alpha1.ShimConfiguration
	webhookConfigs      []v1alpha1.WebhookConfiguration
	// serverConfigs are the ServerConfigurations of ConfigMaps, by
	// "namespace/name" of the ConfigMap.
	serverConfigs  map[string]v1alpha1.ServerConfiguration
	kustomizations map[string]kustomization // by directory
	// settings are the cluster settings ConfigMaps (local-config).
	settings []corev1.ConfigMap
	// names are "Kind namespace/name" of the API objects, in order.
	names []string
}

// decode decodes doc strictly into a T; an error fails t, naming what.
func decode[T any](t *testing.T, what string, doc []byte) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func strict[T any](doc []byte, list *[]T) (T, error) {
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		return v, err
	}
	*list = append(*list, v)
	return v, nil
}

// localRedirectPolicy is Cilium's CiliumLocalRedirectPolicy (cilium.io/v2),
// the fields deploy/examples/cilium uses, for a strict decode without the
// CRD.
type localRedirectPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		RedirectFrontend struct {
			ServiceMatcher *struct {
				ServiceName string         `json:"serviceName"`
				Namespace   string         `json:"namespace"`
				ToPorts     []redirectPort `json:"toPorts,omitempty"`
			} `json:"serviceMatcher,omitempty"`
			AddressMatcher *struct {
				IP      string         `json:"ip"`
				ToPorts []redirectPort `json:"toPorts"`
			} `json:"addressMatcher,omitempty"`
		} `json:"redirectFrontend"`
		RedirectBackend struct {
			LocalEndpointSelector metav1.LabelSelector `json:"localEndpointSelector"`
			ToPorts               []redirectPort       `json:"toPorts"`
		} `json:"redirectBackend"`
		SkipRedirectFromBackend bool   `json:"skipRedirectFromBackend,omitempty"`
		Description             string `json:"description,omitempty"`
	} `json:"spec"`
}

type redirectPort struct {
	Port     string `json:"port"`
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol"`
}

// docHead is what names a document's object.
type docHead struct{ metav1.PartialObjectMetadata }

// key is "Kind namespace/name".
func (h docHead) key() string { return h.Kind + " " + h.Namespace + "/" + h.Name }

// add decodes one YAML document strictly by its apiVersion and kind.
func (o *objects) add(where string, doc []byte) error {
	var head docHead
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	var err error
	switch head.APIVersion + " " + head.Kind {
	case "v1 Namespace":
		_, err = strict(doc, &o.namespaces)
	case "v1 ServiceAccount":
		_, err = strict(doc, &o.serviceAccounts)
	case "v1 ConfigMap":
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		if cm.Annotations[localConfig] == "true" {
			o.settings = append(o.settings, cm)
			return nil // read by kustomize, not an API object
		}
		if cm, err = strict(doc, &o.configMaps); err == nil {
			err = o.addConfigFiles(cm)
		}
		if err == nil {
			err = o.addServerConfig(cm)
		}
	case "v1 Service":
		_, err = strict(doc, &o.services)
	case "apps/v1 Deployment":
		_, err = strict(doc, &o.deployments)
	case "apps/v1 DaemonSet":
		_, err = strict(doc, &o.daemonSets)
	case "policy/v1 PodDisruptionBudget":
		_, err = strict(doc, &o.pdbs)
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		_, err = strict(doc, &o.clusterRoles)
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		_, err = strict(doc, &o.clusterRoleBindings)
	case "rbac.authorization.k8s.io/v1 Role":
		_, err = strict(doc, &o.roles)
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		_, err = strict(doc, &o.roleBindings)
	case "admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration":
		_, err = strict(doc, &o.webhooks)
	case "cert-manager.io/v1 Issuer":
		_, err = strict(doc, &o.issuers)
	case "cert-manager.io/v1 Certificate":
		_, err = strict(doc, &o.certificates)
	case "cilium.io/v2 CiliumLocalRedirectPolicy":
		_, err = strict(doc, &o.redirectPolicies)
	case "monitoring.coreos.com/v1 PodMonitor":
		_, err = strict(doc, &o.podMonitors)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		_, err = strict(doc, &o.serviceMonitors)
	case "monitoring.coreos.com/v1 PrometheusRule":
		_, err = strict(doc, &o.prometheusRules)
	case "dnsconfigurer.io/v1alpha1 ShimConfiguration", "dnsconfigurer.io/v1alpha1 WebhookConfiguration",
		"dnsconfigurer.io/v1alpha1 " + v1alpha1.ServerKind:
		err = o.addConfig(doc)
		if err == nil {
			return nil // a config file, not an API object
		}
	default:
		return fmt.Errorf("%s: unexpected apiVersion %q kind %q", where, head.APIVersion, head.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s: %s %q: %v", where, head.Kind, head.Name, err)
	}
	o.names = append(o.names, head.key())
	return nil
}

// addConfig decodes a dnsconfigurer config file as the binary does:
// strictly, then defaults and validation.
func (o *objects) addConfig(doc []byte) error {
	var kind struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &kind); err != nil {
		return err
	}
	switch kind.Kind {
	case v1alpha1.ServerKind:
		var c v1alpha1.ServerConfiguration
		if err := yaml.UnmarshalStrict(doc, &c); err != nil {
			return err
		}
		c.SetDefaults()
		return c.Validate()
	case v1alpha1.ShimKind:
		c, err := strict(doc, &o.shimConfigs)
		if err != nil {
			return err
		}
		c.SetDefaults()
		return c.Validate()
	default:
		c, err := strict(doc, &o.webhookConfigs)
		if err != nil {
			return err
		}
		c.SetDefaults()
		return c.Validate()
	}
}

// shimEffective is cfg as the shim DaemonSet's binary runs it: its
// --cluster-dns, --cluster-domain and --node-local-dns flags override the
// file.
func (o *objects) shimEffective(t *testing.T, cfg v1alpha1.ShimConfiguration) v1alpha1.ShimConfiguration {
	t.Helper()
	args := o.workload(t, "DaemonSet", "dnsconfigurer-shim").spec.Containers[0].Args
	if v, ok := flag(args, "cluster-dns"); ok {
		cfg.ClusterDNS = strings.Split(v, ",")
	}
	if v, ok := flag(args, "cluster-domain"); ok {
		cfg.ClusterDomain = &v
	}
	if v, ok := flag(args, "node-local-dns"); ok {
		cfg.NodeLocalDNS = strings.Split(v, ",")
	}
	return cfg
}

// webhookEffective is cfg as the webhook Deployment's binary runs it: its
// --cluster-dns and --cluster-domain flags override the file.
func (o *objects) webhookEffective(t *testing.T, cfg v1alpha1.WebhookConfiguration) v1alpha1.WebhookConfiguration {
	t.Helper()
	args := o.workload(t, "Deployment", "dnsconfigurer-webhook").spec.Containers[0].Args
	if v, ok := flag(args, "cluster-dns"); ok {
		cfg.Cluster.ClusterDNS = strings.Split(v, ",")
	}
	if v, ok := flag(args, "cluster-domain"); ok {
		cfg.Cluster.ClusterDomain = &v
	}
	return cfg
}

// addServerConfig keeps the ServerConfiguration of a ConfigMap's
// config.yaml, as written (no defaults), by the ConfigMap's name.
func (o *objects) addServerConfig(cm corev1.ConfigMap) error {
	data, ok := cm.Data["config.yaml"]
	if !ok || !strings.Contains(data, "kind: "+v1alpha1.ServerKind) {
		return nil
	}
	var c v1alpha1.ServerConfiguration
	if err := yaml.UnmarshalStrict([]byte(data), &c); err != nil {
		return fmt.Errorf("data[\"config.yaml\"]: %v", err)
	}
	if o.serverConfigs == nil {
		o.serverConfigs = map[string]v1alpha1.ServerConfiguration{}
	}
	o.serverConfigs[cm.Namespace+"/"+cm.Name] = c
	return nil
}

// serveConfig is the ServerConfiguration a serve container runs with: the
// file its flag (--config, or --cluster-config with cluster true) names,
// from the ConfigMap mounted there, with defaults. The flags are not
// applied.
func (o *objects) serveConfig(t *testing.T, w workload, c corev1.Container, name string) v1alpha1.ServerConfiguration {
	t.Helper()
	path, ok := flag(c.Args, name)
	if !ok {
		t.Fatalf("%s %s: no --%s", w.kind, w.name, name)
	}
	m, ok := mountsOf(t, w, c)[filepath.Dir(path)]
	if !ok || m.vol.ConfigMap == nil || !m.readOnly {
		t.Fatalf("%s %s: --%s %s is not on a read-only ConfigMap mount: %+v", w.kind, w.name, name, path, m)
	}
	cfg, ok := o.serverConfigs[w.namespace+"/"+m.vol.ConfigMap.Name]
	if !ok || filepath.Base(path) != "config.yaml" {
		t.Fatalf("%s %s: --%s %s: no ServerConfiguration in ConfigMap %s/%s config.yaml", w.kind, w.name, name, path, w.namespace, m.vol.ConfigMap.Name)
	}
	cfg.SetDefaults()
	return cfg
}

// addConfigFiles decodes the dnsconfigurer config files a ConfigMap holds.
func (o *objects) addConfigFiles(cm corev1.ConfigMap) error {
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range cm.Data {
			if !yield(k) {
				return
			}
		}
	}) {
		data := cm.Data[key]
		if !strings.Contains(data, "dnsconfigurer.io/") {
			continue
		}
		if err := o.addConfig([]byte(data)); err != nil {
			return fmt.Errorf("data[%q]: %v", key, err)
		}
	}
	return nil
}

// splitDocs splits a YAML stream at its "---" lines and drops documents
// that hold only comments.
func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if strings.TrimRight(sc.Text(), " \t") == "---" {
			flush()
			continue
		}
		cur.Write(sc.Bytes())
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

func hasContent(doc []byte) bool {
	for line := range strings.SplitSeq(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return true
		}
	}
	return false
}

// baseDirs are the directories of deploy/ whose manifests make the base;
// the others (overlays, components, examples) are decoded strictly but
// their objects are not the base's.
var baseDirs = []string{".", "base", "webhook", "dnsserver", "nodelocal", "shim", "namespace-node"}

// loadSources decodes every YAML file under deploy/.
func loadSources(t *testing.T) *objects {
	t.Helper()
	o := &objects{kustomizations: map[string]kustomization{}}
	other := &objects{kustomizations: map[string]kustomization{}}
	var files []string
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no manifests under %s", deployDir)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(deployDir, f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "kustomization.yaml" {
			var k kustomization
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				t.Errorf("deploy/%s: %v", rel, err)
				continue
			}
			o.kustomizations[filepath.Dir(rel)] = k
			continue
		}
		docs := splitDocs(data)
		if len(docs) == 0 {
			t.Errorf("deploy/%s: no document", rel)
		}
		into := other
		if slices.Contains(baseDirs, filepath.Dir(rel)) {
			into = o
		}
		for i, doc := range docs {
			if err := into.add(fmt.Sprintf("deploy/%s document %d", rel, i+1), doc); err != nil {
				t.Error(err)
			}
		}
	}
	return o
}

// TestSources decodes every manifest file under deploy/ strictly and checks
// the facts on the objects as written.
func TestSources(t *testing.T) {
	o := loadSources(t)
	if t.Failed() {
		t.FailNow()
	}
	checkKustomizations(t, o)
	checkFacts(t, o)
}

// TestRender renders deploy/ with kubectl kustomize, decodes the output
// strictly and checks the facts and the composition.
func TestRender(t *testing.T) {
	out := render(t)
	r := &objects{}
	for i, doc := range splitDocs(out) {
		if err := r.add(fmt.Sprintf("rendered document %d", i+1), doc); err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	checkFacts(t, r)
	checkComposition(t, r, loadSources(t))
}

// render runs kubectl kustomize deploy, or skips the test without kubectl.
func render(t *testing.T) []byte {
	t.Helper()
	return renderDir(t, deployDir)
}

// renderDir runs kubectl kustomize dir, or skips the test without kubectl.
func renderDir(t *testing.T, deployDir string) []byte {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not in PATH: not rendering deploy/ (the manifests are still decoded by TestSources); " +
			"install kubectl 1.27 or newer (kustomize v5) to run this test")
	}
	out, err := exec.Command(kubectl, "kustomize", deployDir).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kubectl kustomize %s: %v\n%s", deployDir, err, stderr)
	}
	return out
}

// checkKustomizations: each directory's kustomization lists every manifest
// of the directory (no file is left out of the base by mistake), and the
// base includes every component directory.
func checkKustomizations(t *testing.T, o *objects) {
	root, ok := o.kustomizations["."]
	base, ok2 := o.kustomizations["base"]
	if !ok || !ok2 {
		t.Fatal("deploy/kustomization.yaml or deploy/base/kustomization.yaml missing")
	}
	if !slices.Contains(root.Resources, "base") || !slices.Contains(root.Components, "components/cluster-settings") {
		t.Errorf("deploy/kustomization.yaml: resources %q components %q, want base and components/cluster-settings", root.Resources, root.Components)
	}
	// A directory some kustomization lists under components is one.
	components := map[string]bool{}
	for dir, k := range o.kustomizations {
		for _, c := range k.Components {
			components[filepath.Join(dir, c)] = true
		}
	}
	for dir, k := range o.kustomizations {
		wantKind := "kustomize.config.k8s.io/v1beta1 Kustomization"
		if strings.HasPrefix(dir, "components/") || components[dir] {
			wantKind = "kustomize.config.k8s.io/v1alpha1 Component"
		}
		if got := k.APIVersion + " " + k.Kind; got != wantKind {
			t.Errorf("deploy/%s/kustomization.yaml: %s, want %s", dir, got, wantKind)
		}
		if slices.Contains(baseDirs, dir) && dir != "." && dir != "base" && !slices.Contains(base.Resources, "../"+dir) {
			t.Errorf("deploy/base/kustomization.yaml does not include ../%s", dir)
		}
		listed := slices.Clone(k.Resources)
		for _, p := range k.Patches {
			if p.Path != "" {
				listed = append(listed, p.Path)
			}
		}
		for _, g := range k.ConfigMapGenerator {
			for _, f := range g.Files {
				if _, src, ok := strings.Cut(f, "="); ok {
					f = src
				}
				listed = append(listed, f)
			}
		}
		entries, err := os.ReadDir(filepath.Join(deployDir, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() {
				// overlays/, components/ and examples/ only group kustomizations.
				sub := filepath.Join(dir, name)
				if _, ok := o.kustomizations[sub]; !ok && !slices.Contains([]string{"overlays", "components", "examples"}, sub) {
					t.Errorf("deploy/%s/%s/ has no kustomization.yaml", dir, name)
				}
				continue
			}
			if ext := filepath.Ext(name); (ext == ".yaml" || ext == ".yml") && name != "kustomization.yaml" && !slices.Contains(listed, name) {
				t.Errorf("deploy/%s/%s is not in its kustomization.yaml", dir, name)
			}
		}
	}
	// A rename here would leave the README's `kustomize edit set image
	// dnsconfigurer=...` in any kustomization built on it matching nothing
	// (TestSetImage runs it).
	for dir, k := range o.kustomizations {
		if len(k.Images) > 0 {
			t.Errorf("deploy/%s/kustomization.yaml: images %+v: no kustomization of deploy/ may rename the image", dir, k.Images)
		}
	}
}

// workload is a Deployment or DaemonSet.
type workload struct {
	kind, name string
	spec       corev1.PodSpec
	selector   *metav1.LabelSelector
	podLabels  map[string]string
	namespace  string
}

func (o *objects) workloads() []workload {
	var ws []workload
	for _, d := range o.deployments {
		ws = append(ws, workload{"Deployment", d.Name, d.Spec.Template.Spec, d.Spec.Selector, d.Spec.Template.Labels, d.Namespace})
	}
	for _, d := range o.daemonSets {
		ws = append(ws, workload{"DaemonSet", d.Name, d.Spec.Template.Spec, d.Spec.Selector, d.Spec.Template.Labels, d.Namespace})
	}
	return ws
}

// createPod creates a pod of w's template in namespace ns, for admission
// and pod validation, which run on pods only. Nothing schedules it.
func (w workload) createPod(ctx context.Context, c kubernetes.Interface, ns string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: w.name + "-", Namespace: ns, Labels: w.podLabels},
		Spec:       w.spec,
	}
	_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	return err
}

// onlyContainer returns w's one container, which runs the binary's
// command. An init container or a second container fails t.
func (w workload) onlyContainer(t *testing.T, what, command string) corev1.Container {
	t.Helper()
	if len(w.spec.Containers) != 1 || len(w.spec.InitContainers) != 0 {
		t.Fatalf("%s: %d containers and %d init containers, want 1 and 0", what, len(w.spec.Containers), len(w.spec.InitContainers))
	}
	c := w.spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != command {
		t.Errorf("%s: args %q, want %s ...", what, c.Args, command)
	}
	return c
}

func (o *objects) workload(t *testing.T, kind, name string) workload {
	t.Helper()
	for _, w := range o.workloads() {
		if w.kind == kind && w.name == name {
			return w
		}
	}
	t.Fatalf("%s %s not found", kind, name)
	return workload{}
}

// flag returns the value of --name=VALUE in args.
// flagAll returns every value of a repeated --name=value flag, in order.
func flagAll(args []string, name string) []string {
	var vs []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// flags returns the --name=value flags of args (the subcommand and bare
// switches left out) by name.
func flags(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		if name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && strings.HasPrefix(a, "--") {
			m[name] = v
		}
	}
	return m
}

func flag(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func port(c corev1.Container, name string) (corev1.ContainerPort, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return corev1.ContainerPort{}, false
}

func checkFacts(t *testing.T, o *objects) {
	t.Run("workloads", func(t *testing.T) { checkWorkloads(t, o) })
	t.Run("dns", func(t *testing.T) { checkDNS(t, o) })
	t.Run("nodelocal", func(t *testing.T) { checkNodeLocal(t, o) })
	t.Run("shim", func(t *testing.T) { checkShim(t, o) })
	t.Run("webhook", func(t *testing.T) { checkWebhook(t, o) })
	t.Run("rbac", func(t *testing.T) { checkRBAC(t, o) })
	t.Run("agreement", func(t *testing.T) { checkAgreement(t, o) })
}

// checkAgreement: the cluster DNS address and the cluster zone are the same
// in every component: the Service, both modes of serve, the shim's config
// and the webhook's.
func checkAgreement(t *testing.T, o *objects) {
	ip := o.dnsService(t).Spec.ClusterIP
	zones := map[string]string{}
	for _, w := range o.workloads() {
		for _, c := range w.spec.Containers {
			if len(c.Args) > 0 && c.Args[0] == "serve" {
				zone, _ := flag(c.Args, "cluster-domain")
				zones[w.kind+" "+w.name+" --cluster-domain"] = zone
			}
		}
	}
	if len(o.shimConfigs) == 0 || len(o.webhookConfigs) == 0 {
		t.Fatalf("%d ShimConfigurations and %d WebhookConfigurations, want both", len(o.shimConfigs), len(o.webhookConfigs))
	}
	for i, c := range o.shimConfigs {
		c = o.shimEffective(t, c)
		c.SetDefaults()
		zones[fmt.Sprintf("ShimConfiguration %d clusterDomain", i+1)] = c.Domain()
		if !slices.Contains(c.ClusterDNS, ip) {
			t.Errorf("ShimConfiguration %d: clusterDNS %q lacks the DNS Service's %s", i+1, c.ClusterDNS, ip)
		}
	}
	for i, c := range o.webhookConfigs {
		c = o.webhookEffective(t, c)
		c.SetDefaults()
		zones[fmt.Sprintf("WebhookConfiguration %d cluster.clusterDomain", i+1)] = c.Cluster.Domain()
		if !slices.Contains(c.Cluster.ClusterDNS, ip) {
			t.Errorf("WebhookConfiguration %d: cluster.clusterDNS %q lacks the DNS Service's %s", i+1, c.Cluster.ClusterDNS, ip)
		}
	}
	if len(zones) < 4 {
		t.Errorf("cluster zones found: %v, want serve twice and both configs", zones)
	}
	for where, zone := range zones {
		if zone != "cluster.local" {
			t.Errorf("%s %q; every component must name the same zone (cluster.local here)", where, zone)
		}
	}
}

// checkWorkloads: probes on a declared port, resource requests, the
// container hardening, and a PDB for every Deployment.
func checkWorkloads(t *testing.T, o *objects) {
	ws := o.workloads()
	if len(ws) != 4 {
		t.Errorf("%d workloads, want 4 (dns, node-local dns, shim or NRI plugin, webhook)", len(ws))
	}
	for _, w := range ws {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(w.podLabels)) {
			t.Errorf("%s %s: selector %v does not select its pod labels %v (%v)", w.kind, w.name, w.selector, w.podLabels, err)
		}
		if w.spec.ServiceAccountName == "" {
			t.Errorf("%s %s: no serviceAccountName", w.kind, w.name)
		}
		for _, c := range w.spec.InitContainers {
			where := fmt.Sprintf("%s %s init container %s", w.kind, w.name, c.Name)
			checkRequests(t, where, c)
			checkHardening(t, where, c)
		}
		for _, c := range w.spec.Containers {
			where := fmt.Sprintf("%s %s container %s", w.kind, w.name, c.Name)
			checkRequests(t, where, c)
			checkHardening(t, where, c)
			for kind, p := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
				if p == nil || p.HTTPGet == nil {
					t.Errorf("%s: no HTTP %s", where, kind)
					continue
				}
				if _, err := probePort(w, c, p); err != nil {
					t.Errorf("%s: %s: %v", where, kind, err)
				}
			}
			// The dnsconfigurer servers: /readyz for readiness, /healthz
			// for liveness, on --metrics-listen (a flag or metricsListen of
			// the shim's config).
			if len(c.Args) > 0 && slices.Contains([]string{"serve", "shim", "nri"}, c.Args[0]) && c.ReadinessProbe != nil && c.LivenessProbe != nil &&
				c.ReadinessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet != nil {
				if got := c.ReadinessProbe.HTTPGet.Path; got != "/readyz" {
					t.Errorf("%s: readiness path %q, want /readyz", where, got)
				}
				if got := c.LivenessProbe.HTTPGet.Path; got != "/healthz" {
					t.Errorf("%s: liveness path %q, want /healthz", where, got)
				}
				if ml, ok := flag(c.Args, "metrics-listen"); ok {
					checkProbeAddr(t, where, w, c, ml)
				}
			}
		}
	}
	for _, d := range o.deployments {
		covered := false
		for _, p := range o.pdbs {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			if err == nil && !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				covered = true
				if p.Spec.MinAvailable == nil && p.Spec.MaxUnavailable == nil {
					t.Errorf("PodDisruptionBudget %s: neither minAvailable nor maxUnavailable", p.Name)
				}
			}
		}
		if !covered {
			t.Errorf("Deployment %s: no PodDisruptionBudget selects its pods", d.Name)
		}
	}
}

// checkProbeAddr: the probes reach the metrics listener: the same port,
// and for a listener on one address the probes' host is that address.
func checkProbeAddr(t *testing.T, where string, w workload, c corev1.Container, listen string) {
	t.Helper()
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		t.Errorf("%s: metrics listen %q: %v", where, listen, err)
		return
	}
	for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if n, err := probePort(w, c, pr); err != nil || strconv.Itoa(int(n)) != p {
			t.Errorf("%s: probe port %s is %d (%v), metrics listen on %q", where, pr.HTTPGet.Port.String(), n, err, listen)
		}
		if host != "" && host != "0.0.0.0" && host != "::" && pr.HTTPGet.Host != host {
			t.Errorf("%s: probe host %q, metrics listen on %q", where, pr.HTTPGet.Host, listen)
		}
	}
}

// probePort is the port an HTTP probe reaches: a named port of the
// container, or a number, which only a host-network pod that declares no
// ports may use (node-local: declared ports of a host-network pod are host
// ports, which keep a rolling update's surge pod off the node).
func probePort(w workload, c corev1.Container, p *corev1.Probe) (int32, error) {
	if p.HTTPGet.Port.StrVal != "" {
		cp, ok := port(c, p.HTTPGet.Port.StrVal)
		if !ok {
			return 0, fmt.Errorf("port %q is not a port of the container", p.HTTPGet.Port.StrVal)
		}
		return cp.ContainerPort, nil
	}
	if !w.spec.HostNetwork || len(c.Ports) > 0 {
		return 0, fmt.Errorf("port %s: want a named port", p.HTTPGet.Port.String())
	}
	return p.HTTPGet.Port.IntVal, nil
}

func checkRequests(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("%s: no %s request", where, r)
		}
	}
}

func checkHardening(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("%s: no securityContext", where)
		return
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: privileged", where)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation not false", where)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem not true", where)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: capabilities do not drop ALL", where)
	}
}

// named returns the object of items named name; kind names it when
// there is none.
func named[T any, P interface {
	*T
	GetName() string
}](t *testing.T, kind string, items []T, name string) T {
	t.Helper()
	for _, it := range items {
		if P(&it).GetName() == name {
			return it
		}
	}
	t.Fatalf("no %s %s", kind, name)
	var zero T
	return zero
}

// service returns the Service named name.
func (o *objects) service(t *testing.T, name string) corev1.Service {
	t.Helper()
	return named(t, "Service", o.services, name)
}

// daemonSet returns the DaemonSet named name.
func (o *objects) daemonSet(t *testing.T, name string) appsv1.DaemonSet {
	t.Helper()
	return named(t, "DaemonSet", o.daemonSets, name)
}

func (o *objects) dnsService(t *testing.T) corev1.Service {
	t.Helper()
	var found []corev1.Service
	for _, s := range o.services {
		if s.Spec.ClusterIP == clusterDNSIP {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d Services with clusterIP %s, want 1", len(found), clusterDNSIP)
	}
	return found[0]
}

// checkDNS: the cluster DNS Service at 10.96.0.10 (UDP and TCP 53) in front
// of two hardened, spread replicas of `serve`.
func checkDNS(t *testing.T, o *objects) {
	svc := o.dnsService(t)
	want := map[string]corev1.Protocol{"dns": corev1.ProtocolUDP, "dns-tcp": corev1.ProtocolTCP}
	for _, p := range svc.Spec.Ports {
		if proto, ok := want[p.Name]; ok {
			if p.Port != 53 || p.Protocol != proto {
				t.Errorf("Service %s port %s: %d/%s, want 53/%s", svc.Name, p.Name, p.Port, p.Protocol, proto)
			}
			delete(want, p.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("Service %s: ports %v missing", svc.Name, want)
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "metrics" }) {
		t.Errorf("Service %s: no metrics port", svc.Name)
	}

	var dep *appsv1.Deployment
	for i, d := range o.deployments {
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			dep = &o.deployments[i]
		}
	}
	if dep == nil {
		t.Fatalf("Service %s selects no Deployment", svc.Name)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment %s: replicas %v, want 2", dep.Name, dep.Spec.Replicas)
	}
	spec := dep.Spec.Template.Spec
	if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil ||
		(len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0) {
		t.Errorf("Deployment %s: no pod anti-affinity", dep.Name)
	} else {
		for _, term := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(term.PodAffinityTerm.LabelSelector)
			if term.PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" || err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
				t.Errorf("Deployment %s: anti-affinity term %+v does not spread its own pods over hosts", dep.Name, term.PodAffinityTerm)
			}
		}
	}
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("Deployment %s: not non-root", dep.Name)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("Deployment %s: %d containers, want 1", dep.Name, len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || !slices.Equal(c.SecurityContext.Capabilities.Add, []corev1.Capability{"NET_BIND_SERVICE"}) {
		t.Errorf("Deployment %s: capabilities: want add [NET_BIND_SERVICE] only", dep.Name)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("Deployment %s: args %q, want serve ...", dep.Name, c.Args)
	}
	// The settings are in the ConfigMap; a flag would override the file.
	w := o.workload(t, "Deployment", dep.Name)
	cfg := o.serveConfig(t, w, c, "config")
	if got := slices.Collect(maps.Keys(flags(c.Args))); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"cluster-domain", "config"}) {
		t.Errorf("Deployment %s: flags %q, want --cluster-domain and --config only (the rest is the ConfigMap's)", dep.Name, got)
	}
	if len(cfg.Listen) == 0 || !strings.HasSuffix(cfg.Listen[0], ":53") {
		t.Errorf("Deployment %s: listen %q, want port 53", dep.Name, cfg.Listen)
	}
	if cfg.Mode != v1alpha1.ModeCluster {
		t.Errorf("Deployment %s: mode %q; the cluster DNS runs in the default mode", dep.Name, cfg.Mode)
	}
	// The Service's named target ports are ports of the container.
	for _, p := range svc.Spec.Ports {
		cp, ok := port(c, p.TargetPort.StrVal)
		if !ok || cp.Protocol != p.Protocol {
			t.Errorf("Service %s port %s: targetPort %q is no %s port of Deployment %s", svc.Name, p.Name, p.TargetPort.String(), p.Protocol, dep.Name)
		}
	}
	// pods: verified is what the pods rule of the ClusterRole is for.
	if cfg.Pods != v1alpha1.PodsVerified {
		t.Errorf("Deployment %s: pods %q: the ServiceAccount may watch pods, which only pods: verified needs", dep.Name, cfg.Pods)
	}
	if _, port, _ := net.SplitHostPort(cfg.MetricsListen); port != "9153" {
		t.Errorf("Deployment %s: metricsListen %q, want port 9153 (the probes' and the Service's)", dep.Name, cfg.MetricsListen)
	}
}

// checkNodeLocal: the node-local stage in transparent mode on the
// link-local address and the cluster DNS Service address, set up by the
// binary, forwarding cluster names to a second Service of the cluster DNS
// pods, updated by surge, its metrics scrapable.
func checkNodeLocal(t *testing.T, o *objects) {
	w := o.workload(t, "DaemonSet", "dnsconfigurer-node-local-dns")
	if !w.spec.HostNetwork {
		t.Error("node-local: not hostNetwork")
	}
	checkNodeCritical(t, w)
	// One container and no init container: the binary sets the node up.
	c := w.onlyContainer(t, "node-local", "serve")
	clusterIP := o.dnsService(t).Spec.ClusterIP
	up := o.service(t, "dnsconfigurer-dns-upstream")
	for name, want := range map[string]string{
		"mode":             "node-local",
		"cluster-upstream": up.Spec.ClusterIP,
		"metrics-listen":   "0.0.0.0:9353",
	} {
		if got, _ := flag(c.Args, name); got != want {
			t.Errorf("node-local: --%s %q, want %q", name, got, want)
		}
	}
	// Not node-cache's interface name: during a take-over neither deletes
	// the other's.
	if got, _ := flag(c.Args, "interface-name"); got == "" || got == v1alpha1.DefaultNodeLocalInterface {
		t.Errorf("node-local: --interface-name %q, want one of its own (node-cache's is %s)", got, v1alpha1.DefaultNodeLocalInterface)
	}
	// The cluster DNS's own ServerConfiguration, a copy of its ConfigMap.
	// Sources (kustomizations read) hold a placeholder; the rendered copy
	// is the cluster DNS's (components/cluster-settings).
	o.serveConfig(t, w, c, "cluster-config")
	if len(o.kustomizations) == 0 {
		checkConfigCopy(t, o)
	}
	for _, f := range []string{"--setup-interface", "--setup-notrack", "--reuse-port"} {
		if !slices.Contains(c.Args, f) {
			t.Errorf("node-local: args %q lack %s", c.Args, f)
		}
	}
	if got := flagAll(c.Args, "local-ip"); !slices.Equal(got, []string{clusterIP, nodeLocalIP}) {
		t.Errorf("node-local: --local-ip %q, want the cluster DNS address and the link-local one", got)
	}
	if l, ok := flag(c.Args, "listen"); ok {
		t.Errorf("node-local: --listen %q besides --local-ip", l)
	}
	// The upstream Service: a fixed address (node-local is told it), not
	// the one node-local takes over, selecting the cluster DNS pods.
	if up.Spec.ClusterIP == "" || up.Spec.ClusterIP == clusterIP {
		t.Errorf("Service %s: clusterIP %q: want a fixed address other than the cluster DNS's", up.Name, up.Spec.ClusterIP)
	}
	dns := o.workload(t, "Deployment", "dnsconfigurer-dns")
	if sel := labels.SelectorFromSet(up.Spec.Selector); len(up.Spec.Selector) == 0 || !sel.Matches(labels.Set(dns.podLabels)) {
		t.Errorf("Service %s: selector %v does not select the cluster DNS pods %v", up.Name, up.Spec.Selector, dns.podLabels)
	}
	tcp := false
	for _, p := range up.Spec.Ports {
		if p.Protocol == corev1.ProtocolTCP && p.Port == 53 && p.TargetPort.StrVal == "dns-tcp" {
			tcp = true
		}
	}
	if !tcp {
		t.Errorf("Service %s: no TCP port 53 to the pods' dns-tcp: %+v", up.Name, up.Spec.Ports)
	}
	// Surge: the new pod serves (SO_REUSEPORT) before the old one stops;
	// a host port would keep it from scheduling.
	ds := o.daemonSet(t, w.name)
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxSurge == nil || ru.MaxSurge.String() != "1" || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "0" {
		t.Errorf("node-local: rollingUpdate %+v, want maxSurge 1 and maxUnavailable 0", ru)
	}
	if len(c.Ports) > 0 {
		t.Errorf("node-local: ports %+v: host ports block the surge pod", c.Ports)
	}
	if a := w.spec.TerminationGracePeriodSeconds; a != nil && *a < 5 {
		t.Errorf("node-local: terminationGracePeriodSeconds %d: too short for the teardown", *a)
	}
	ann := ds.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "9353" {
		t.Errorf("node-local: scrape annotations %v, want prometheus.io/scrape true and port 9353", ann)
	}
	if sc := c.SecurityContext; sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_BIND_SERVICE"}) {
		t.Error("node-local: capabilities: want add [NET_ADMIN, NET_BIND_SERVICE] only")
	}
	// Its token reads its Node and the upstream EndpointSlices (checkRBAC).
	if a := w.spec.AutomountServiceAccountToken; a != nil && !*a {
		t.Error("node-local: automountServiceAccountToken false: it needs its token for its node's topology zone")
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Error("node-local: no env NODE_NAME from spec.nodeName")
	}
	ms := mountsOf(t, w, c)
	// The lock the instances of a node share: a host directory.
	lock, ok := flag(c.Args, "lock-file")
	if !ok {
		lock = v1alpha1.DefaultNodeLocalLockFile
	}
	if m, ok := ms[filepath.Dir(lock)]; !ok || m.vol.HostPath == nil || m.vol.HostPath.Path != filepath.Dir(lock) || m.readOnly {
		t.Errorf("node-local: the lock %s is not on a writable hostPath mount of %s: %+v", lock, filepath.Dir(lock), m)
	}
	// The node's search domains end the autopath search list: the same
	// resolver config as the shim's.
	checkResolverMounts(t, w, ms)
	rc, _ := flag(c.Args, "resolv-conf")
	// Autopath pods: node-local first, the cluster DNS as the fallback.
	for _, sc := range o.shimConfigs {
		sc = o.shimEffective(t, sc)
		if want := []string{nodeLocalIP, clusterIP}; !slices.Equal(sc.NodeLocalDNS, want) {
			t.Errorf("ShimConfiguration nodeLocalDNS %q, want %q", sc.NodeLocalDNS, want)
		}
		sc.SetDefaults()
		if sc.ResolvConf == nil || *sc.ResolvConf != rc {
			t.Errorf("node-local: --resolv-conf %q, the shim's resolvConf %v: want the same", rc, sc.ResolvConf)
		}
	}
}

func checkNodeCritical(t *testing.T, w workload) {
	t.Helper()
	if w.spec.PriorityClassName != "system-node-critical" {
		t.Errorf("%s %s: priorityClassName %q, want system-node-critical", w.kind, w.name, w.spec.PriorityClassName)
	}
	if !slices.ContainsFunc(w.spec.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Key == "" && tl.Operator == corev1.TolerationOpExists && tl.Effect == ""
	}) {
		t.Errorf("%s %s: does not tolerate every taint", w.kind, w.name)
	}
	if dp := w.spec.DNSPolicy; dp != corev1.DNSDefault && dp != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("%s %s: dnsPolicy %q, want Default or ClusterFirstWithHostNet", w.kind, w.name, dp)
	}
}

// mount is a volume mounted into a container.
type mount struct {
	vol      corev1.Volume
	readOnly bool
}

// mountsOf returns the mounts of container c by container path.
func mountsOf(t *testing.T, w workload, c corev1.Container) map[string]mount {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range w.spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]mount{}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Errorf("%s %s: mount %s of unknown volume %s", w.kind, w.name, m.MountPath, m.Name)
		}
		mounts[m.MountPath] = mount{v, m.ReadOnly}
	}
	return mounts
}

// checkResolverMounts: the node's resolver files (resolvConf auto) are
// mounted read-only at their own paths.
func checkResolverMounts(t *testing.T, w workload, mounts map[string]mount) {
	t.Helper()
	for _, path := range []string{"/etc/resolv.conf", "/run/systemd/resolve"} {
		if m, ok := mounts[path]; !ok || m.vol.HostPath == nil || m.vol.HostPath.Path != path || !m.readOnly {
			t.Errorf("%s %s: host %s not mounted read-only at the same path", w.kind, w.name, path)
		}
	}
}

// checkShim: the shim DaemonSet and its ShimConfiguration agree on the
// sockets, the host files and the metrics address.
func checkShim(t *testing.T, o *objects) {
	w := o.workload(t, "DaemonSet", "dnsconfigurer-shim")
	if !w.spec.HostNetwork {
		t.Error("shim: not hostNetwork")
	}
	checkNodeCritical(t, w)
	for _, d := range o.daemonSets {
		if d.Name == w.name && d.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
			t.Errorf("shim: updateStrategy %q, want OnDelete (a shim kubelet depends on cannot be replaced by that kubelet)", d.Spec.UpdateStrategy.Type)
		}
	}
	if len(w.spec.Containers) != 1 {
		t.Fatalf("shim: %d containers, want 1", len(w.spec.Containers))
	}
	c := w.spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "shim" {
		t.Errorf("shim: args %q, want shim ...", c.Args)
	}
	if c.Resources.Limits.Memory() != nil && !c.Resources.Limits.Memory().IsZero() {
		t.Error("shim: a memory limit: an OOM kill would cut kubelet off from containerd")
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Error("shim: no env NODE_NAME from spec.nodeName")
	}

	// Mounts: container path → (volume, read-only).
	volumes := map[string]corev1.Volume{}
	for _, v := range w.spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := mountsOf(t, w, c)
	checkResolverMounts(t, w, mounts)

	var cfgs []v1alpha1.ShimConfiguration
	for _, v := range w.spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		for _, cm := range o.configMaps {
			if cm.Name == v.ConfigMap.Name {
				var cfg v1alpha1.ShimConfiguration
				for _, it := range v.ConfigMap.Items {
					if err := yaml.UnmarshalStrict([]byte(cm.Data[it.Key]), &cfg); err != nil {
						t.Errorf("ConfigMap %s %s: %v", cm.Name, it.Key, err)
					}
				}
				cfgs = append(cfgs, cfg)
			}
		}
	}
	if len(cfgs) == 0 {
		// The sources: the ConfigMap is generated from shim.yaml.
		cfgs = o.shimConfigs
	}
	if len(cfgs) != 1 {
		t.Fatalf("%d ShimConfigurations, want 1", len(cfgs))
	}
	cfg := o.shimEffective(t, cfgs[0])
	cfg.SetDefaults()
	if cf, ok := flag(c.Args, "config"); !ok || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return filepath.Dir(cf) == m.MountPath && volumes[m.Name].ConfigMap != nil
	}) {
		t.Errorf("shim: --config %q is not in a ConfigMap mount", cf)
	}
	// The shim replaces its socket (writable directory); containerd
	// replaces its own on restart (a directory mount follows it).
	if m, ok := mounts[filepath.Dir(cfg.Listen)]; !ok || m.vol.HostPath == nil || m.vol.HostPath.Path != filepath.Dir(cfg.Listen) || m.readOnly {
		t.Errorf("shim: the directory of listen %q is not a writable host directory mount at the same path", cfg.Listen)
	}
	rt := strings.TrimPrefix(cfg.RuntimeEndpoint, "unix://")
	if m, ok := mounts[filepath.Dir(rt)]; !ok || m.vol.HostPath == nil || m.vol.HostPath.Path != filepath.Dir(rt) {
		t.Errorf("shim: the directory of runtimeEndpoint %q is not a host directory mount at the same path", cfg.RuntimeEndpoint)
	}
	if rt != "/run/containerd/containerd.sock" || cfg.Listen != "/run/dnsconfigurer/cri.sock" {
		t.Errorf("shim config: listen %q runtimeEndpoint %q: deploy/README.md documents /run/dnsconfigurer/cri.sock and containerd's /run/containerd/containerd.sock", cfg.Listen, cfg.RuntimeEndpoint)
	}
	if cfg.Kubeconfig != "" || cfg.NodeName != "" {
		t.Errorf("shim config: kubeconfig %q nodeName %q: in the DaemonSet the shim uses the in-cluster config and $NODE_NAME", cfg.Kubeconfig, cfg.NodeName)
	}
	if !slices.Contains(cfg.ClusterDNS, o.dnsService(t).Spec.ClusterIP) {
		t.Errorf("shim config: clusterDNS %q lacks the DNS Service's %s", cfg.ClusterDNS, o.dnsService(t).Spec.ClusterIP)
	}
	if cfg.MetricsListen == "" {
		t.Error("shim config: no metricsListen: the probes have nothing to reach")
	} else if c.ReadinessProbe != nil && c.LivenessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet != nil {
		checkProbeAddr(t, "shim", w, c, cfg.MetricsListen)
	}
}

// checkWebhook: the ValidatingWebhookConfiguration.
func checkWebhook(t *testing.T, o *objects) {
	if len(o.webhooks) != 1 {
		t.Fatalf("%d ValidatingWebhookConfigurations, want 1", len(o.webhooks))
	}
	for _, wh := range o.webhooks[0].Webhooks {
		if wh.SideEffects == nil || *wh.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("webhook %s: sideEffects %v, want None", wh.Name, wh.SideEffects)
		}
		if !slices.Equal(wh.AdmissionReviewVersions, []string{"v1"}) {
			t.Errorf("webhook %s: admissionReviewVersions %q, want [v1]", wh.Name, wh.AdmissionReviewVersions)
		}
		sel, err := metav1.LabelSelectorAsSelector(wh.NamespaceSelector)
		if err != nil || wh.NamespaceSelector == nil {
			t.Errorf("webhook %s: namespaceSelector %v: %v", wh.Name, wh.NamespaceSelector, err)
			continue
		}
		ns := func(name string) labels.Set { return labels.Set{"kubernetes.io/metadata.name": name} }
		if sel.Matches(ns("kube-system")) {
			t.Errorf("webhook %s: namespaceSelector includes kube-system", wh.Name)
		}
		if sel.Matches(ns(namespace)) {
			t.Errorf("webhook %s: namespaceSelector includes its own namespace %s", wh.Name, namespace)
		}
		if !sel.Matches(ns("default")) {
			t.Errorf("webhook %s: namespaceSelector excludes the default namespace", wh.Name)
		}
		if wh.TimeoutSeconds == nil || *wh.TimeoutSeconds > 10 {
			t.Errorf("webhook %s: timeoutSeconds %v, want 10 or less", wh.Name, wh.TimeoutSeconds)
		}
	}
}

// checkRBAC: each ServiceAccount gets exactly the permissions of
// wantRules, spelt without wildcards.
func checkRBAC(t *testing.T, o *objects) {
	roles := map[string][]rbacv1.PolicyRule{}
	for _, r := range o.clusterRoles {
		roles["ClusterRole/"+r.Name] = r.Rules
		if r.AggregationRule != nil {
			t.Errorf("ClusterRole %s: aggregationRule", r.Name)
		}
	}
	for _, r := range o.roles {
		roles["Role/"+r.Namespace+"/"+r.Name] = r.Rules
	}
	got := map[string][]string{}
	bound := map[string]bool{}
	bind := func(kind, name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, ns string) {
		key := ref.Kind + "/" + ref.Name
		if ref.Kind == "Role" {
			key = "Role/" + ns + "/" + ref.Name
		}
		rules, ok := roles[key]
		if !ok {
			t.Errorf("%s %s: roleRef %s not found", kind, name, key)
		}
		bound[key] = true
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind {
				t.Errorf("%s %s: subject %s %s: only ServiceAccounts are bound", kind, name, s.Kind, s.Name)
				continue
			}
			for _, r := range rules {
				got[s.Name] = append(got[s.Name], expand(t, key, r)...)
			}
		}
	}
	for _, b := range o.clusterRoleBindings {
		bind("ClusterRoleBinding", b.Name, b.RoleRef, b.Subjects, "")
	}
	for _, b := range o.roleBindings {
		bind("RoleBinding", b.Name, b.RoleRef, b.Subjects, b.Namespace)
	}
	for key := range roles {
		if !bound[key] {
			t.Errorf("%s is bound to no ServiceAccount", key)
		}
	}
	for _, sa := range o.serviceAccounts {
		want, ok := wantRules[sa.Name]
		if !ok {
			t.Errorf("ServiceAccount %s: not in wantRules; add the permissions its component needs", sa.Name)
			continue
		}
		g := slices.Compact(slices.Sorted(slices.Values(got[sa.Name])))
		if !slices.Equal(g, want) {
			t.Errorf("ServiceAccount %s: permissions %q, want exactly %q", sa.Name, g, want)
		}
		if len(want) == 0 && (sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken) {
			t.Errorf("ServiceAccount %s: no permissions but automountServiceAccountToken not false", sa.Name)
		}
	}
	for name := range got {
		if !slices.ContainsFunc(o.serviceAccounts, func(sa corev1.ServiceAccount) bool { return sa.Name == name }) {
			t.Errorf("ServiceAccount %s is bound but not defined", name)
		}
	}
	for _, w := range o.workloads() {
		if _, ok := wantRules[w.spec.ServiceAccountName]; !ok {
			t.Errorf("%s %s: serviceAccountName %q is not one of the ServiceAccounts", w.kind, w.name, w.spec.ServiceAccountName)
		}
	}
}

// expand spells a rule as "group/resource verb" entries and rejects
// wildcards, resource names and non-resource URLs.
func expand(t *testing.T, role string, r rbacv1.PolicyRule) []string {
	t.Helper()
	if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
		t.Errorf("%s: rule %v: nonResourceURLs or resourceNames", role, r)
	}
	var out []string
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if g == "*" || res == "*" || v == "*" || strings.Contains(res, "*") {
					t.Errorf("%s: rule %v: wildcard", role, r)
				}
				out = append(out, g+"/"+res+" "+v)
			}
		}
	}
	return out
}

// namespaceOf is the namespace of a namespaced object of the base (or of
// overlays/nri): the node DaemonSets and what is theirs in nodeNamespace,
// the rest in namespace.
func namespaceOf(name string) string {
	if strings.HasPrefix(name, "dnsconfigurer-shim") || strings.HasPrefix(name, "dnsconfigurer-nri") ||
		strings.HasPrefix(name, "dnsconfigurer-node-local-dns") || name == "dnsconfigurer-cluster-dns" {
		return nodeNamespace
	}
	return namespace
}

// checkComposition: what kustomize made of the sources. One namespace
// holds every namespaced object and every bound ServiceAccount; every
// object of the sources is rendered; every container runs the one image;
// every referenced ConfigMap and ServiceAccount exists.
func checkComposition(t *testing.T, r, src *objects) {
	// Pod Security: restricted where the workloads meet it, privileged
	// only for the two node DaemonSets.
	levels := map[string]string{}
	for _, ns := range r.namespaces {
		levels[ns.Name] = ns.Labels["pod-security.kubernetes.io/enforce"]
	}
	if want := map[string]string{namespace: "restricted", nodeNamespace: "privileged"}; !maps.Equal(levels, want) {
		t.Errorf("rendered Namespaces and their enforced levels %v, want %v", levels, want)
	}
	for _, n := range r.names {
		kind, nsName, _ := strings.Cut(n, " ")
		ns, name, _ := strings.Cut(nsName, "/")
		cluster := kind == "Namespace" || strings.HasPrefix(kind, "Cluster") || kind == "ValidatingWebhookConfiguration"
		want := ""
		if !cluster {
			want = namespaceOf(name)
		}
		if ns != want {
			t.Errorf("rendered %s: want namespace %q", n, want)
		}
	}
	for _, b := range r.clusterRoleBindings {
		for _, s := range b.Subjects {
			if want := namespaceOf(s.Name); s.Namespace != want {
				t.Errorf("rendered ClusterRoleBinding %s: subject %s in namespace %q, want %s", b.Name, s.Name, s.Namespace, want)
			}
		}
	}
	// Every source object is rendered (in whatever namespace it was
	// written), plus the generated ConfigMap.
	rendered := map[string]bool{}
	for _, n := range r.names {
		kind, nsName, _ := strings.Cut(n, " ")
		_, name, _ := strings.Cut(nsName, "/")
		rendered[kind+" "+name] = true
	}
	for _, n := range src.names {
		kind, nsName, _ := strings.Cut(n, " ")
		_, name, _ := strings.Cut(nsName, "/")
		if !rendered[kind+" "+name] {
			t.Errorf("%s of deploy/ is not rendered", n)
		}
	}
	if len(r.names) != len(src.names)+1 {
		t.Errorf("rendered %d objects, want the %d of the sources plus the shim's ConfigMap:\n%s", len(r.names), len(src.names), strings.Join(r.names, "\n"))
	}
	if len(r.shimConfigs) != 1 || len(r.webhookConfigs) != 1 {
		t.Errorf("rendered ConfigMaps hold %d ShimConfigurations and %d WebhookConfigurations, want 1 each", len(r.shimConfigs), len(r.webhookConfigs))
	}

	configMaps := map[string]bool{}
	for _, cm := range r.configMaps {
		configMaps[cm.Name] = true
	}
	for _, w := range r.workloads() {
		for _, c := range slices.Concat(w.spec.InitContainers, w.spec.Containers) {
			if c.Image != renderedImage {
				t.Errorf("%s %s container %s: image %q, want %s", w.kind, w.name, c.Name, c.Image, renderedImage)
			}
			if c.ImagePullPolicy == corev1.PullAlways {
				t.Errorf("%s %s container %s: imagePullPolicy Always", w.kind, w.name, c.Name)
			}
		}
		for _, v := range w.spec.Volumes {
			if v.ConfigMap != nil && !configMaps[v.ConfigMap.Name] {
				t.Errorf("%s %s: volume %s: ConfigMap %q not rendered", w.kind, w.name, v.Name, v.ConfigMap.Name)
			}
		}
		if !slices.ContainsFunc(r.serviceAccounts, func(sa corev1.ServiceAccount) bool { return sa.Name == w.spec.ServiceAccountName }) {
			t.Errorf("%s %s: ServiceAccount %q not rendered", w.kind, w.name, w.spec.ServiceAccountName)
		}
	}
}
