// Package webhook_test runs dnsconfigurer's admission webhook behind a real
// kube-apiserver (test/apiserver): the webhook is registered by URL with a
// caBundle, pods are created through the API, and the tests assert what a
// client sees: the denial as a StatusError with one cause per violation, and
// the trims as Warning headers. They skip when the kube-apiserver and etcd
// binaries are absent (see test/testbin/build.sh).
package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/webhook"
	"github.com/dnsconfigurer/dnsconfigurer/test/admission"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

var controlPlane *apiserver.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(apiserver.RunTests(m, &controlPlane))
}

const webhookName = admission.Webhook

func ptr[T any](v T) *T { return &v }

// fqdnTooLong gives the pod an FQDN of 69 characters in namespace
// "default"; test namespaces are longer, which only adds to it.
func fqdnTooLong(p *corev1.Pod) {
	p.Spec.Hostname = "a-rather-long-hostname"
	p.Spec.Subdomain = "a-long-subdomain"
	p.Spec.SetHostnameAsFQDN = ptr(true)
}

func TestAdmissionThroughAPIServer(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	other := cp.Namespace(t)

	eng, err := policy.New(testkit.Node())
	if err != nil {
		t.Fatal(err)
	}
	url, caBundle := admission.Serve(t, &webhook.Reviewer{Default: webhook.Pool{Engine: eng,
		Host: policy.Host{Nameservers: []string{"10.0.0.2"}, Searches: []string{"corp.example"}}}})
	admission.Register(t, cp.Client(), ns, url, caBundle)

	client, got := admission.WarnedClient(t, cp.Config())
	create := func(t *testing.T, namespace string, p *corev1.Pod) (*corev1.Pod, []string, error) {
		t.Helper()
		got.Take()
		created, err := client.CoreV1().Pods(namespace).Create(t.Context(), p, metav1.CreateOptions{})
		return created, got.Take(), err
	}
	dnsWarnings := func(ws []string) []string {
		var out []string
		for _, w := range ws {
			if strings.HasPrefix(w, webhook.WarningPrefix) {
				out = append(out, w)
			}
		}
		return out
	}

	t.Run("denied with one cause per violation", func(t *testing.T) {
		cases := []struct {
			name   string
			pod    *corev1.Pod
			fields []string
			text   string
		}{
			{"fqdn too long", admission.Pod("web-0", fqdnTooLong), []string{"spec.setHostnameAsFQDN"},
				`admission webhook "` + webhookName + `" denied the request: Pod "web-0" is invalid: spec.setHostnameAsFQDN: Invalid value: true: the pod's FQDN "a-rather-long-hostname.a-long-subdomain.` + ns + `.svc.cluster.local" is`},
			{"generateName", admission.Pod("", fqdnTooLong, func(p *corev1.Pod) { p.GenerateName = "web-" }), []string{"spec.setHostnameAsFQDN"},
				"shorten spec.hostname (or the pod name), spec.subdomain or the namespace by"},
			{"autopath on Default", admission.Pod("web-1", func(p *corev1.Pod) {
				p.Annotations = map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath)}
				p.Spec.DNSPolicy = corev1.DNSDefault
			}), []string{"metadata.annotations[dnsconfigurer.io/dns-policy]"}, `Invalid value: "ClusterFirstWithAutopath"`},
			{"unknown autopath value", admission.Pod("web-2", func(p *corev1.Pod) {
				p.Annotations = map[string]string{policy.AnnotationDNSPolicy: "Autopath"}
			}), []string{"metadata.annotations[dnsconfigurer.io/dns-policy]"}, `Unsupported value: "Autopath"`},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, _, err := create(t, ns, tc.pod)
				t.Logf("client sees: %v", err)
				var se *apierrors.StatusError
				if !errors.As(err, &se) {
					t.Fatalf("create: %v, want a StatusError from the webhook", err)
				}
				if !apierrors.IsInvalid(err) {
					t.Errorf("reason %q code %d, want Invalid 422", se.ErrStatus.Reason, se.ErrStatus.Code)
				}
				if !strings.Contains(err.Error(), tc.text) {
					t.Errorf("error %q, want it to contain %q", err.Error(), tc.text)
				}
				d := se.ErrStatus.Details
				if d == nil || d.Kind != "Pod" {
					t.Fatalf("details %+v", d)
				}
				var fields []string
				for _, c := range d.Causes {
					fields = append(fields, c.Field)
				}
				if strings.Join(fields, ",") != strings.Join(tc.fields, ",") {
					t.Errorf("cause fields %q, want %q", fields, tc.fields)
				}
			})
		}
	})

	t.Run("allowed with a warning", func(t *testing.T) {
		p := admission.Pod("web-3", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}}
		})
		created, ws, err := create(t, ns, p)
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if created.Name != "web-3" {
			t.Errorf("created %q", created.Name)
		}
		t.Logf("client sees warnings: %q", ws)
		ws = dnsWarnings(ws)
		want := `dnsconfigurer: spec.dnsConfig.nameservers: Invalid value: ["10.96.0.10","1.1.1.1","8.8.8.8","9.9.9.9"]: after merging with the node's DNS the pod has 4 nameservers and the node keeps only the first 3, dropping ["9.9.9.9"]`
		if len(ws) != 1 || !strings.HasPrefix(ws[0], want) {
			t.Errorf("warnings %q, want one starting %q", ws, want)
		}
	})

	t.Run("allowed", func(t *testing.T) {
		p := admission.Pod("web-4", func(p *corev1.Pod) {
			p.Spec.Hostname = "web-4"
			p.Spec.Subdomain = "web"
			p.Spec.SetHostnameAsFQDN = ptr(true)
		})
		if _, ws, err := create(t, ns, p); err != nil || len(dnsWarnings(ws)) != 0 {
			t.Errorf("create: %v, warnings %q", err, ws)
		}
	})

	t.Run("API server warnings not repeated", func(t *testing.T) {
		_, ws, err := create(t, ns, admission.Pod("web.5"))
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if len(ws) != 1 || !strings.HasPrefix(ws[0], "metadata.name: this is used in the Pod's hostname") {
			t.Errorf("warnings %q, want the API server's one about the dotted name, once", ws)
		}
	})

	t.Run("kubectl", func(t *testing.T) {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			t.Skip("kubectl not installed")
		}
		run := func(manifest string) (string, error) { return kubectlCreate(t, kubectl, cp, ns, manifest) }
		out, err := run(`apiVersion: v1
kind: Pod
metadata: {name: kubectl-0}
spec:
  hostname: a-rather-long-hostname
  subdomain: a-long-subdomain
  setHostnameAsFQDN: true
  containers: [{name: app, image: registry.example/app:1.0}]
`)
		t.Logf("kubectl create, denied:\n%s", out)
		if err == nil || !strings.Contains(out, `The Pod "kubectl-0" is invalid: spec.setHostnameAsFQDN: Invalid value: true: the pod's FQDN "a-rather-long-hostname.a-long-subdomain.`+ns) {
			t.Errorf("kubectl create: %v, output:\n%s", err, out)
		}
		out, err = run(`apiVersion: v1
kind: Pod
metadata: {name: kubectl-1}
spec:
  dnsConfig: {nameservers: [1.1.1.1, 8.8.8.8, 9.9.9.9]}
  containers: [{name: app, image: registry.example/app:1.0}]
`)
		t.Logf("kubectl create, warned:\n%s", out)
		if err != nil || !strings.Contains(out, `Warning: dnsconfigurer: spec.dnsConfig.nameservers: Invalid value: ["10.96.0.10","1.1.1.1","8.8.8.8","9.9.9.9"]: after merging`) ||
			!strings.Contains(out, "pod/kubectl-1 created") {
			t.Errorf("kubectl create: %v, output:\n%s", err, out)
		}
	})

	t.Run("namespace not selected", func(t *testing.T) {
		if _, ws, err := create(t, other, admission.Pod("web-0", fqdnTooLong)); err != nil || len(dnsWarnings(ws)) != 0 {
			t.Errorf("create in %s: %v, warnings %q", other, err, ws)
		}
	})
}

// TestTrimsDenied: with trims denied, what kubelet would trim is refused
// like a hard failure.
func TestTrimsDenied(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	eng, err := policy.New(testkit.Node())
	if err != nil {
		t.Fatal(err)
	}
	url, caBundle := admission.Serve(t, &webhook.Reviewer{DenyTrims: true, Default: webhook.Pool{Engine: eng,
		Host: policy.Host{Nameservers: []string{"10.0.0.2"}, Searches: []string{"corp.example"}}}})
	admission.Register(t, cp.Client(), ns, url, caBundle)
	searches := make([]string, 29)
	for i := range searches {
		searches[i] = fmt.Sprintf("team-%02d.corp.example", i)
	}
	p := admission.Pod("web-0", func(p *corev1.Pod) { p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: searches} })
	_, err = cp.Client().CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	var se *apierrors.StatusError
	if !errors.As(err, &se) || !apierrors.IsInvalid(err) || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) != 1 ||
		se.ErrStatus.Details.Causes[0].Field != "spec.dnsConfig.searches" ||
		!strings.Contains(err.Error(), "the search list has 33 entries and the node keeps 32") {
		t.Fatalf("create: %v, want a denial on spec.dnsConfig.searches", err)
	}
	t.Logf("client sees: %v", err)

	// Two trims, two causes: kubectl lists them one per line.
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := kubectlCreate(t, kubectl, cp, ns, `apiVersion: v1
kind: Pod
metadata: {name: kubectl-0}
spec:
  dnsConfig:
    nameservers: [1.1.1.1, 8.8.8.8, 9.9.9.9]
    searches: [`+strings.Join(searches, ", ")+`]
  containers: [{name: app, image: registry.example/app:1.0}]
`)
	t.Logf("kubectl create, denied twice:\n%s", out)
	if err == nil || !strings.Contains(out, `The Pod "kubectl-0" is invalid: `+"\n"+`* spec.dnsConfig.nameservers: Invalid value: ["10.96.0.10","1.1.1.1","8.8.8.8","9.9.9.9"]: after merging`) ||
		!strings.Contains(out, "\n* spec.dnsConfig.searches: Invalid value: [") {
		t.Errorf("kubectl create: %v, output:\n%s", err, out)
	}
}

// kubectlCreate runs kubectl create -f - in ns and returns its combined
// output.
func kubectlCreate(t *testing.T, kubectl string, cp *apiserver.ControlPlane, ns, manifest string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", cp.Kubeconfig(), "-n", ns, "create", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDeployManifestsAccepted creates the Kubernetes objects of
// deploy/webhook with a server-side dry run (the Namespace for real), so
// that the API server's own validation checks them. The cert-manager
// objects need its CRDs and are left out.
func TestDeployManifestsAccepted(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	c := cp.Client()
	files, err := filepath.Glob("../../../deploy/webhook/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("manifests: %v %q", err, files)
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	var objs []runtime.Object
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			if strings.Contains(doc, "apiVersion: cert-manager.io/") {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, obj)
		}
	}
	// The Namespace first, for real: dry-run objects in it need it.
	for _, o := range objs {
		if n, ok := o.(*corev1.Namespace); ok {
			if _, err := c.CoreV1().Namespaces().Create(t.Context(), n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("namespace %s: %v", n.Name, err)
			}
		}
	}
	ctx := t.Context()
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, dry)
		case *corev1.ConfigMap:
			_, err = c.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, dry)
		case *corev1.Service:
			_, err = c.CoreV1().Services(o.Namespace).Create(ctx, o, dry)
		case *appsv1.Deployment:
			_, err = c.AppsV1().Deployments(o.Namespace).Create(ctx, o, dry)
		case *policyv1.PodDisruptionBudget:
			_, err = c.PolicyV1().PodDisruptionBudgets(o.Namespace).Create(ctx, o, dry)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			_, err = c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, o, dry)
		default:
			t.Fatalf("unexpected object %T", o)
		}
		if err != nil {
			t.Errorf("dry-run create %T: %v", o, err)
		}
	}
}

// TestDeployWebhookConfiguration registers deploy/webhook's
// ValidatingWebhookConfiguration as it is, but for the client config (a URL
// instead of the in-cluster Service), and checks which namespaces it covers.
func TestDeployWebhookConfiguration(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	c := cp.Client()
	vwc, reg, url, caBundle := deployedWebhook(t)
	vwc.Name += "-deploy-test"
	vwc.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete: %v", err)
		}
	})
	own := "dnsconfigurer"
	ns := cp.Namespace(t)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	admission.WaitCalled(t, vwc.Webhooks[0].Name, func() error { return admission.DryRunPod(t, c, ns, admission.DeniedPod("probe")) })
	for _, skipped := range []string{"kube-system", own, own + "-node"} {
		if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: skipped}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		// Other admission (dnsconfigurer enforces Pod Security
		// restricted) may refuse the probe; the webhook must not.
		if _, err := c.CoreV1().Pods(skipped).Create(t.Context(), admission.Pod("probe", fqdnTooLong), dry); err != nil && strings.Contains(err.Error(), vwc.Webhooks[0].Name) {
			t.Errorf("pod in %s: %v; the webhook must not be called there", skipped, err)
		}
	}
	// matchConditions: only pods with a DNS-relevant field cost a call.
	for _, tc := range []struct {
		name  string
		mod   func(*corev1.Pod)
		calls float64
	}{
		{"plain ClusterFirst pod", func(*corev1.Pod) {}, 0},
		{"labels and annotations of no interest", func(p *corev1.Pod) {
			p.Labels, p.Annotations = map[string]string{"app": "x"}, map[string]string{"example.com/a": "b"}
		}, 0},
		{"dnsPolicy Default", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }, 1},
		{"dnsConfig", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}}
		}, 1},
		{"hostname", func(p *corev1.Pod) { p.Spec.Hostname = "web-0" }, 1},
		{"subdomain", func(p *corev1.Pod) { p.Spec.Subdomain = "web" }, 1},
		{"setHostnameAsFQDN", func(p *corev1.Pod) { p.Spec.SetHostnameAsFQDN = ptr(false) }, 1},
		{"hostNetwork", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, 1},
		{"the autopath annotation", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"dnsconfigurer.io/dns-policy": "ClusterFirstWithAutopath"}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reviews(t, reg)
			p := admission.Pod("probe")
			tc.mod(p)
			if _, err := c.CoreV1().Pods(ns).Create(t.Context(), p, dry); err != nil {
				t.Fatal(err)
			}
			if got := reviews(t, reg) - before; got != tc.calls {
				t.Errorf("%v webhook calls, want %v", got, tc.calls)
			}
		})
	}
}

// deployedWebhook reads deploy/webhook's ValidatingWebhookConfiguration and
// serves a webhook for it (cluster DNS 10.96.0.10, node nameserver
// 10.0.0.2) with its metrics on reg; the caller points the configuration's
// client config at url.
func deployedWebhook(t *testing.T) (vwc *admissionregistrationv1.ValidatingWebhookConfiguration, reg *prometheus.Registry, url string, caBundle []byte) {
	t.Helper()
	data, err := os.ReadFile("../../../deploy/webhook/validatingwebhookconfiguration.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	vwc = obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
	eng, err := policy.New(testkit.Node())
	if err != nil {
		t.Fatal(err)
	}
	reg = prometheus.NewRegistry()
	url, caBundle = admission.Serve(t, &webhook.Reviewer{Default: webhook.Pool{Engine: eng, Host: policy.Host{Nameservers: []string{"10.0.0.2"}}}}, webhook.WithRegistry(reg))
	return vwc, reg, url, caBundle
}

// reviews is the webhook's count of admission reviews (counted before
// the reply leaves).
func reviews(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	return testkit.Gather(t, reg).Sum("dnsconfigurer_webhook_reviews_total")
}
