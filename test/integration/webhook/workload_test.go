package webhook_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/test/admission"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// template is a pod template with spec mod applied.
func template(mod func(*corev1.PodSpec)) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}},
			RestartPolicy: corev1.RestartPolicyAlways}}
	if mod != nil {
		mod(&t.Spec)
	}
	return t
}

// longFQDN asks for a hostname FQDN longer than 64 characters, which the
// API server admits and kubelet fails the pod for: the webhook denies it.
func longFQDN(s *corev1.PodSpec) {
	s.Hostname, s.Subdomain, s.SetHostnameAsFQDN = "a-rather-long-hostname", "a-long-subdomain", ptr(true)
}

// trimmed has the cluster DNS and three nameservers of its own: kubelet
// trims it to three, a warning.
func trimmed(s *corev1.PodSpec) {
	s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}}
}

// workloadCreators create each workload kind with a template: a dry run
// unless real, through client c in ns.
func workloadCreators(c kubernetes.Interface, ns string) map[string]func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, real bool) error {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	opts := func(real bool) metav1.CreateOptions {
		if real {
			return metav1.CreateOptions{}
		}
		return metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	job := func(tmpl corev1.PodTemplateSpec) batchv1.JobSpec {
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		return batchv1.JobSpec{Template: tmpl}
	}
	return map[string]func(*testing.T, string, corev1.PodTemplateSpec, bool) error{
		"Deployment": func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, real bool) error {
			_, err := c.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{ObjectMeta: meta(name),
				Spec: appsv1.DeploymentSpec{Selector: sel, Template: tmpl}}, opts(real))
			return err
		},
		"ReplicaSet": func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, real bool) error {
			_, err := c.AppsV1().ReplicaSets(ns).Create(t.Context(), &appsv1.ReplicaSet{ObjectMeta: meta(name),
				Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl}}, opts(real))
			return err
		},
		"StatefulSet": func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, real bool) error {
			_, err := c.AppsV1().StatefulSets(ns).Create(t.Context(), &appsv1.StatefulSet{ObjectMeta: meta(name),
				Spec: appsv1.StatefulSetSpec{Selector: sel, Template: tmpl, ServiceName: "web"}}, opts(real))
			return err
		},
		"DaemonSet": func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, real bool) error {
			_, err := c.AppsV1().DaemonSets(ns).Create(t.Context(), &appsv1.DaemonSet{ObjectMeta: meta(name),
				Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}, opts(real))
			return err
		},
		"Job": func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, real bool) error {
			_, err := c.BatchV1().Jobs(ns).Create(t.Context(), &batchv1.Job{ObjectMeta: meta(name), Spec: job(tmpl)}, opts(real))
			return err
		},
		"CronJob": func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, real bool) error {
			_, err := c.BatchV1().CronJobs(ns).Create(t.Context(), &batchv1.CronJob{ObjectMeta: meta(name),
				Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: job(tmpl)}}}, opts(real))
			return err
		},
		"PodTemplate": func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, real bool) error {
			_, err := c.CoreV1().PodTemplates(ns).Create(t.Context(), &corev1.PodTemplate{ObjectMeta: meta(name), Template: tmpl}, opts(real))
			return err
		},
		"ReplicationController": func(t *testing.T, name string, tmpl corev1.PodTemplateSpec, real bool) error {
			_, err := c.CoreV1().ReplicationControllers(ns).Create(t.Context(), &corev1.ReplicationController{ObjectMeta: meta(name),
				Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "web"}, Template: &tmpl}}, opts(real))
			return err
		},
	}
}

// TestWorkloadsThroughAPIServer registers deploy/webhook's
// ValidatingWebhookConfiguration as it is (a URL for the client config)
// and creates each workload kind through a real API server: a bad template
// is refused on its full field path, a good one passes, a plain one costs
// no webhook call, one kubelet would trim gets a warning, an update that
// keeps a bad template (made before the webhook) is allowed with a
// warning, and kubectl shows the refusal.
func TestWorkloadsThroughAPIServer(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	admin := cp.Client()
	// A Deployment with a bad template, made before the webhook is there.
	legacy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template(func(s *corev1.PodSpec) {
				s.Hostname = strings.Repeat("h", 40)
				s.Subdomain = strings.Repeat("s", 30)
				s.SetHostnameAsFQDN = ptr(true)
			})}}
	if _, err := admin.AppsV1().Deployments(ns).Create(t.Context(), legacy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	vwc, reg, url, caBundle := deployedWebhook(t)
	vwc.Name += "-workloads-test"
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
		// Only this test's namespace: other tests run beside it.
		vwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{ns}}}}
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		_ = admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(t.Context(), vwc.Name, metav1.DeleteOptions{})
	})

	client, got := admission.WarnedClient(t, cp.Config())
	creators := workloadCreators(client, ns)
	// Wait until the API server calls the webhook for every entry.
	for _, kind := range []string{"Deployment", "CronJob", "PodTemplate"} {
		admission.WaitCalled(t, "dns.dnsconfigurer.io", func() error { return creators[kind](t, "probe", template(longFQDN), false) })
	}

	paths := map[string]string{"CronJob": "spec.jobTemplate.spec.template.spec", "PodTemplate": "template.spec"}
	for kind, create := range creators {
		t.Run(kind, func(t *testing.T) {
			path := paths[kind]
			if path == "" {
				path = "spec.template.spec"
			}
			err := create(t, "bad", template(longFQDN), false)
			if err == nil || !strings.Contains(err.Error(), `"bad" is invalid: `+path+".setHostnameAsFQDN") {
				t.Errorf("bad template: %v", err)
			}
			if err := create(t, "good", template(func(s *corev1.PodSpec) {
				s.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}}
			}), false); err != nil {
				t.Errorf("good template: %v", err)
			}
			before := reviews(t, reg)
			if err := create(t, "plain", template(nil), false); err != nil {
				t.Errorf("plain template: %v", err)
			}
			if n := reviews(t, reg) - before; n != 0 {
				t.Errorf("plain template: %v webhook calls, want 0", n)
			}
			got.Take()
			if err := create(t, "trimmed", template(trimmed), false); err != nil {
				t.Errorf("trimmed template: %v", err)
			}
			if ws := strings.Join(got.Take(), "\n"); !strings.Contains(ws, "dnsconfigurer: "+path+".dnsConfig.nameservers") {
				t.Errorf("trimmed template: warnings %q", ws)
			}
		})
	}

	t.Run("update keeping a bad template", func(t *testing.T) {
		d, err := client.AppsV1().Deployments(ns).Get(t.Context(), "legacy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = ptr(int32(3))
		got.Take()
		d, err = client.AppsV1().Deployments(ns).Update(t.Context(), d, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("scaling a Deployment with an old bad template: %v", err)
		}
		if ws := strings.Join(got.Take(), "\n"); !strings.Contains(ws, "the DNS fields of spec.template are unchanged by this update") ||
			!strings.Contains(ws, "spec.template.spec.setHostnameAsFQDN") {
			t.Errorf("warnings %q", ws)
		}
		d.Spec.Template.Spec.Hostname = strings.Repeat("h", 41) // still bad, and changed
		if _, err := client.AppsV1().Deployments(ns).Update(t.Context(), d, metav1.UpdateOptions{}); err == nil ||
			!strings.Contains(err.Error(), "spec.template.spec.setHostnameAsFQDN") {
			t.Errorf("changing the bad template: %v, want a denial", err)
		}
		d.Spec.Template.Spec.SetHostnameAsFQDN = nil // fixed
		if _, err := client.AppsV1().Deployments(ns).Update(t.Context(), d, metav1.UpdateOptions{}); err != nil {
			t.Errorf("fixing the template: %v", err)
		}
	})

	t.Run("kubectl apply", func(t *testing.T) {
		kubectl := filepath.Join(os.Getenv("DNSCONFIGURER_TESTBIN"), "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			if kubectl, err = exec.LookPath("kubectl"); err != nil {
				t.Skip("no kubectl: set DNSCONFIGURER_TESTBIN (test/testbin/build.sh)")
			}
		}
		spec := `    metadata: {labels: {app: web}}
    spec:
      hostname: a-rather-long-hostname
      subdomain: a-long-subdomain
      setHostnameAsFQDN: true
      restartPolicy: RESTART
      containers: [{name: app, image: registry.example/app:1.0}]
`
		indent := func(s string, by int) string {
			pad := strings.Repeat(" ", by)
			return pad + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+pad) + "\n"
		}
		always := strings.ReplaceAll(spec, "RESTART", "Always")
		never := strings.ReplaceAll(spec, "RESTART", "Never")
		sel := "  selector: {matchLabels: {app: web}}\n"
		for _, tc := range []struct{ kind, manifest, path string }{
			{"Deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: kubectl-web}\nspec:\n" + sel + "  template:\n" + always, "spec.template.spec"},
			{"ReplicaSet", "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: kubectl-web}\nspec:\n" + sel + "  template:\n" + always, "spec.template.spec"},
			{"StatefulSet", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: kubectl-web}\nspec:\n  serviceName: web\n" + sel + "  template:\n" + always, "spec.template.spec"},
			{"DaemonSet", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: kubectl-web}\nspec:\n" + sel + "  template:\n" + always, "spec.template.spec"},
			{"Job", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: kubectl-web}\nspec:\n  template:\n" + never, "spec.template.spec"},
			{"CronJob", "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: kubectl-web}\nspec:\n  schedule: \"*/5 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n" + indent(never, 4), "spec.jobTemplate.spec.template.spec"},
			{"PodTemplate", "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: kubectl-web}\ntemplate:\n" + strings.ReplaceAll(always, "\n  ", "\n")[2:], "template.spec"},
			{"ReplicationController", "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: kubectl-web}\nspec:\n  selector: {app: web}\n  template:\n" + always, "spec.template.spec"},
		} {
			cmd := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", cp.Kubeconfig(), "-n", ns, "apply", "-f", "-")
			cmd.Stdin = strings.NewReader(tc.manifest)
			out, err := cmd.CombinedOutput()
			want := `The ` + tc.kind + ` "kubectl-web" is invalid: ` + tc.path + `.setHostnameAsFQDN: Invalid value: true: the pod's FQDN`
			if tc.kind == "Deployment" {
				t.Logf("kubectl apply, denied:\n%s", out)
			}
			if err == nil || !strings.Contains(string(out), want) {
				t.Errorf("kubectl apply %s: %v, output:\n%s\nmanifest:\n%s", tc.kind, err, out, tc.manifest)
			}
		}
	})
}
