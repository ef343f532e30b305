package webhook

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

const deployDir = "../../deploy/webhook"

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
	} `json:"labels"`
	Images []struct {
		Name   string `json:"name"`
		NewTag string `json:"newTag"`
	} `json:"images"`
}

// manifests holds the documents of deploy/webhook by "apiVersion kind".
type manifests map[string][]manifestDoc

type manifestDoc struct {
	where string // file and document number
	data  []byte
}

// The kinds deploy/webhook holds.
const (
	kindNamespace      = "v1 Namespace"
	kindServiceAccount = "v1 ServiceAccount"
	kindConfigMap      = "v1 ConfigMap"
	kindService        = "v1 Service"
	kindDeployment     = "apps/v1 Deployment"
	kindPDB            = "policy/v1 PodDisruptionBudget"
	kindWebhook        = "admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration"
	kindIssuer         = "cert-manager.io/v1 Issuer"
	kindCertificate    = "cert-manager.io/v1 Certificate"
)

// decoders checks the documents of each kind.
var decoders = map[string]func(t *testing.T, m manifests, kind string){
	kindNamespace:      check[corev1.Namespace],
	kindServiceAccount: check[corev1.ServiceAccount],
	kindConfigMap:      check[corev1.ConfigMap],
	kindService:        check[corev1.Service],
	kindDeployment:     check[appsv1.Deployment],
	kindPDB:            check[policyv1.PodDisruptionBudget],
	kindWebhook:        check[admissionregistrationv1.ValidatingWebhookConfiguration],
	kindIssuer:         check[testkit.CertManagerIssuer],
	kindCertificate:    check[testkit.CertManagerCertificate],
}

// check decodes every document of kind strictly into a T.
func check[T any](t *testing.T, m manifests, kind string) { all[T](t, m, kind) }

// all decodes every document of kind strictly into a T.
func all[T any](t *testing.T, m manifests, kind string) []T {
	t.Helper()
	var list []T
	for _, d := range m[kind] {
		var v T
		if err := yaml.UnmarshalStrict(d.data, &v); err != nil {
			t.Fatalf("%s: %v", d.where, err)
		}
		list = append(list, v)
	}
	return list
}

// one is the one document of kind.
func one[T any](t *testing.T, m manifests, kind string) *T {
	t.Helper()
	list := all[T](t, m, kind)
	if len(list) != 1 {
		t.Fatalf("%d of %s, want 1", len(list), kind)
	}
	return &list[0]
}

func loadManifests(t *testing.T) (manifests, kustomization) {
	t.Helper()
	var k kustomization
	data, err := os.ReadFile(filepath.Join(deployDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: apiVersion %q kind %q", k.APIVersion, k.Kind)
	}
	files, err := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	got := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization resources %q, want every manifest of the directory %q", got, want)
	}

	m := manifests{}
	for _, name := range k.Resources {
		data, err := os.ReadFile(filepath.Join(deployDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			d := manifestDoc{where: fmt.Sprintf("%s document %d", name, i+1), data: doc}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s: %v", d.where, err)
			}
			kind := head.APIVersion + " " + head.Kind
			if _, ok := decoders[kind]; !ok {
				t.Fatalf("%s: unexpected apiVersion %q kind %q", d.where, head.APIVersion, head.Kind)
			}
			m[kind] = append(m[kind], d)
		}
	}
	for kind, check := range decoders {
		check(t, m, kind)
	}
	return m, k
}

// TestDeployManifests decodes deploy/webhook strictly and checks that its
// objects fit together and with the webhook: names, ports, labels, files and
// the config file.
func TestDeployManifests(t *testing.T) {
	m, _ := loadManifests(t)
	ns := one[corev1.Namespace](t, m, kindNamespace).Name
	vwc := one[admissionregistrationv1.ValidatingWebhookConfiguration](t, m, kindWebhook)
	svc := one[corev1.Service](t, m, kindService)
	dep := one[appsv1.Deployment](t, m, kindDeployment)
	cm := one[corev1.ConfigMap](t, m, kindConfigMap)
	sa := one[corev1.ServiceAccount](t, m, kindServiceAccount)
	pdb := one[policyv1.PodDisruptionBudget](t, m, kindPDB)
	for _, o := range []struct{ kind, ns string }{{"Service", svc.Namespace}, {"Deployment", dep.Namespace},
		{"ConfigMap", cm.Namespace}, {"ServiceAccount", sa.Namespace}, {"PodDisruptionBudget", pdb.Namespace}} {
		if o.ns != ns {
			t.Errorf("%s in namespace %q, want %q", o.kind, o.ns, ns)
		}
	}

	// The webhook registration: bare pods on CREATE; the pod templates of
	// workloads on CREATE and UPDATE, one entry per template path.
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	createUpdate := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	type rule struct {
		group     string
		resources []string
		ops       []admissionregistrationv1.OperationType
	}
	want := map[string][]rule{
		"pods.dns.dnsconfigurer.io": {{"", []string{"pods"}, create}},
		"workloads.dns.dnsconfigurer.io": {{"apps", []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, createUpdate},
			{"batch", []string{"jobs"}, createUpdate}, {"", []string{"replicationcontrollers"}, createUpdate}},
		"cronjobs.dns.dnsconfigurer.io":     {{"batch", []string{"cronjobs"}, createUpdate}},
		"podtemplates.dns.dnsconfigurer.io": {{"", []string{"podtemplates"}, createUpdate}},
	}
	if len(vwc.Webhooks) != len(want) {
		t.Fatalf("%d webhooks, want %d", len(vwc.Webhooks), len(want))
	}
	var ref *admissionregistrationv1.ServiceReference
	for _, wh := range vwc.Webhooks {
		rules, ok := want[wh.Name]
		if !ok {
			t.Fatalf("webhook %q not expected", wh.Name)
		}
		if !slices.Equal(wh.AdmissionReviewVersions, []string{"v1"}) {
			t.Errorf("%s: admissionReviewVersions %q, want [v1]", wh.Name, wh.AdmissionReviewVersions)
		}
		if wh.SideEffects == nil || *wh.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects %v, want None", wh.Name, wh.SideEffects)
		}
		if wh.FailurePolicy == nil {
			t.Errorf("%s: failurePolicy not set", wh.Name)
		}
		if wh.TimeoutSeconds == nil || *wh.TimeoutSeconds < 1 || *wh.TimeoutSeconds > 30 {
			t.Errorf("%s: timeoutSeconds %v, want 1..30", wh.Name, wh.TimeoutSeconds)
		}
		if len(wh.MatchConditions) != 1 {
			t.Errorf("%s: %d matchConditions, want 1", wh.Name, len(wh.MatchConditions))
		}
		if len(wh.Rules) != len(rules) {
			t.Fatalf("%s: %d rules, want %d", wh.Name, len(wh.Rules), len(rules))
		}
		for i, r := range wh.Rules {
			w := rules[i]
			if !slices.Equal(r.APIGroups, []string{w.group}) || !slices.Equal(r.APIVersions, []string{"v1"}) ||
				!slices.Equal(r.Resources, w.resources) || !slices.Equal(r.Operations, w.ops) {
				t.Errorf("%s: rule %+v, want %+v", wh.Name, r, w)
			}
		}
		sel, err := metav1LabelSelector(wh)
		if err != nil {
			t.Fatalf("%s: namespaceSelector: %v", wh.Name, err)
		}
		for name, want := range map[string]bool{"kube-system": false, ns: false, "default": true, "team-a": true} {
			if got := sel.Matches(labels.Set{"kubernetes.io/metadata.name": name}); got != want {
				t.Errorf("%s: namespaceSelector matches namespace %q: %v, want %v", wh.Name, name, got, want)
			}
		}
		ref = wh.ClientConfig.Service
		if ref == nil || wh.ClientConfig.URL != nil {
			t.Fatalf("%s: clientConfig %+v, want a service reference", wh.Name, wh.ClientConfig)
		}
		if ref.Name != svc.Name || ref.Namespace != svc.Namespace || ref.Path == nil || *ref.Path != PathValidate {
			t.Errorf("%s: clientConfig.service %+v, want %s/%s path %s", wh.Name, ref, svc.Namespace, svc.Name, PathValidate)
		}
	}
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != port {
		t.Fatalf("service ports %+v, want one port %d", svc.Spec.Ports, port)
	}

	// The Service and the PodDisruptionBudget select the Deployment's pods.
	tmpl := dep.Spec.Template
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("service selector %v does not select the pod template %v", svc.Spec.Selector, tmpl.Labels)
	}
	if ps, err := labelSelector(pdb.Spec.Selector); err != nil || !ps.Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("PodDisruptionBudget selector does not select the pod template (%v)", err)
	}
	if ds, err := labelSelector(dep.Spec.Selector); err != nil || !ds.Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("Deployment selector does not select its template (%v)", err)
	}
	if tmpl.Spec.ServiceAccountName != sa.Name {
		t.Errorf("serviceAccountName %q, want %q", tmpl.Spec.ServiceAccountName, sa.Name)
	}

	// The container.
	if len(tmpl.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(tmpl.Spec.Containers))
	}
	c := tmpl.Spec.Containers[0]
	var containerPort int32
	for _, p := range c.Ports {
		if p.Name == svc.Spec.Ports[0].TargetPort.StrVal {
			containerPort = p.ContainerPort
		}
	}
	if containerPort == 0 {
		t.Errorf("service targetPort %v is not a container port name", svc.Spec.Ports[0].TargetPort)
	}
	for name, probe := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != PathHealthz || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("%s %+v, want HTTPS GET %s", name, probe, PathHealthz)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v, want cpu and memory requests and a memory limit", c.Resources)
	}
	psc, csc := tmpl.Spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v, want runAsNonRoot with a non-zero runAsUser", psc)
	}
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || csc.ReadOnlyRootFilesystem == nil ||
		!*csc.ReadOnlyRootFilesystem || csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v, want no privilege escalation, a read-only root and no capabilities", csc)
	}

	// Volumes: the config from the ConfigMap, the TLS pair from the
	// certificate's Secret.
	mounts := map[string]string{} // volume -> mount path
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm.MountPath
	}
	var configMount, tlsMount, tlsSecret string
	for _, v := range tmpl.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			if v.ConfigMap.Name != cm.Name {
				t.Errorf("volume %q uses ConfigMap %q, want %q", v.Name, v.ConfigMap.Name, cm.Name)
			}
			configMount = mounts[v.Name]
		case v.Secret != nil:
			tlsMount, tlsSecret = mounts[v.Name], v.Secret.SecretName
		}
	}
	var configFile string
	for _, a := range c.Args {
		if f, ok := strings.CutPrefix(a, "--config="); ok {
			configFile = f
		}
	}
	if len(c.Args) == 0 || c.Args[0] != "webhook" || configFile == "" {
		t.Fatalf("args %q, want webhook --config=FILE", c.Args)
	}
	key, ok := strings.CutPrefix(configFile, configMount+"/")
	if configMount == "" || !ok {
		t.Fatalf("--config=%s is not in the ConfigMap mount %q", configFile, configMount)
	}
	raw, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap has no key %q", key)
	}

	// The config file is a valid WebhookConfiguration matching the rest.
	var cfg v1alpha1.WebhookConfiguration
	if err := yaml.UnmarshalStrict([]byte(raw), &cfg); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	if err := cfg.CheckKind(v1alpha1.WebhookKind); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	if path.Dir(cfg.TLSCertFile) != tlsMount || path.Dir(cfg.TLSPrivateKeyFile) != tlsMount {
		t.Errorf("config TLS files %s, %s are not in the Secret mount %q", cfg.TLSCertFile, cfg.TLSPrivateKeyFile, tlsMount)
	}
	if _, p, ok := strings.Cut(cfg.Listen, ":"); !ok || p != strconv.Itoa(int(containerPort)) {
		t.Errorf("config listen %q, want port %d", cfg.Listen, containerPort)
	}

	// cert-manager: the serving certificate goes to the mounted Secret, is
	// valid for the Service, and is the one the caBundle comes from.
	certificates := all[testkit.CertManagerCertificate](t, m, kindCertificate)
	var serving *testkit.CertManagerCertificate
	for i := range certificates {
		if certificates[i].Spec.SecretName == tlsSecret {
			serving = &certificates[i]
		}
	}
	if serving == nil {
		t.Fatalf("no Certificate writes the Secret %q", tlsSecret)
	}
	if want := svc.Name + "." + svc.Namespace + ".svc"; !slices.Contains(serving.Spec.DNSNames, want) {
		t.Errorf("certificate dnsNames %q lack %q", serving.Spec.DNSNames, want)
	}
	if got, want := vwc.Annotations["cert-manager.io/inject-ca-from"], serving.Metadata.Namespace+"/"+serving.Metadata.Name; got != want {
		t.Errorf("inject-ca-from %q, want %q", got, want)
	}
	issuers := map[string]testkit.CertManagerIssuer{}
	for _, is := range all[testkit.CertManagerIssuer](t, m, kindIssuer) {
		issuers[is.Metadata.Name] = is
	}
	for _, cert := range certificates {
		is, ok := issuers[cert.Spec.IssuerRef.Name]
		if !ok || cert.Spec.IssuerRef.Kind != "Issuer" || is.Metadata.Namespace != cert.Metadata.Namespace {
			t.Errorf("certificate %s: issuer %+v is not an Issuer of the manifests", cert.Metadata.Name, cert.Spec.IssuerRef)
		}
		if cert.Metadata.Namespace != ns {
			t.Errorf("certificate %s in namespace %q", cert.Metadata.Name, cert.Metadata.Namespace)
		}
	}
}

func metav1LabelSelector(wh admissionregistrationv1.ValidatingWebhook) (labels.Selector, error) {
	if wh.NamespaceSelector == nil {
		return labels.Everything(), nil
	}
	return labelSelector(wh.NamespaceSelector)
}

func labelSelector(sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil {
		return nil, fmt.Errorf("no selector")
	}
	return metav1.LabelSelectorAsSelector(sel)
}

// TestDeployKustomize builds deploy/webhook with kubectl's kustomize, when
// kubectl is installed, and checks that every manifest comes out.
func TestDeployKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := exec.CommandContext(t.Context(), kubectl, "kustomize", deployDir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	m, _ := loadManifests(t)
	want := 0
	for _, docs := range m {
		want += len(docs)
	}
	if got := bytes.Count(append([]byte("\n"), out...), []byte("\nkind: ")); got != want {
		t.Errorf("kustomize emitted %d objects, want %d:\n%s", got, want, out)
	}
}

// TestDefaultsMatchConfig: the server's defaults, for callers of New that
// set no option, are the config file's (api/v1alpha1 owns them).
func TestDefaultsMatchConfig(t *testing.T) {
	var cfg v1alpha1.WebhookConfiguration
	cfg.SetDefaults()
	read, write := cfg.Timeouts()
	cases := []struct {
		name         string
		server, file any
	}{
		{"maxRequestBytes", int64(DefaultMaxRequestBytes), cfg.MaxRequestBytes},
		{"readTimeout", DefaultReadTimeout, read},
		{"writeTimeout", DefaultWriteTimeout, write},
		{"bodyProgressTimeout", DefaultBodyProgressTimeout, cfg.BodyProgress()},
	}
	for _, tc := range cases {
		if tc.server != tc.file {
			t.Errorf("%s: server default %v, config default %v", tc.name, tc.server, tc.file)
		}
	}
}
