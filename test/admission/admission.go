// Package admission runs dnsconfigurer's admission webhook in-process for
// the tests behind a real kube-apiserver (test/apiserver), registers it and
// waits until the API server calls it.
package admission

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/webhook"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// Webhook is the webhook's name in the configuration Register writes.
const Webhook = "pods.dns.dnsconfigurer.io"

// registerWait bounds the wait for the API server to call a new webhook
// (it reads configurations from a watch).
const registerWait = 30 * time.Second

// Serve runs the webhook for r on 127.0.0.1 with a certificate from a CA
// made here, until t ends, and returns its /validate URL and the CA bundle.
func Serve(t *testing.T, r *webhook.Reviewer, opts ...webhook.Option) (url string, caBundle []byte) {
	t.Helper()
	cert, err := apiserver.NewServingCert("dnsconfigurer-webhook", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, cert.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, cert.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := webhook.New(r, certFile, keyFile, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook Serve: %v", err)
		}
	})
	return "https://" + ln.Addr().String() + webhook.PathValidate, cert.CA
}

// Register adds a ValidatingWebhookConfiguration that sends the pod
// CREATEs of namespace ns to url, removed when t ends, and waits until the
// API server calls it.
func Register(t *testing.T, client kubernetes.Interface, ns, url string, caBundle []byte) {
	t.Helper()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	scope := admissionregistrationv1.NamespacedScope
	timeout := int32(5)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "dnsconfigurer-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    Webhook,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{ns}}}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"pods"}, Scope: &scope},
			}},
		}},
	}
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ValidatingWebhookConfiguration: %v", err)
	}
	t.Cleanup(func() {
		err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
		if err != nil {
			t.Errorf("delete ValidatingWebhookConfiguration: %v", err)
		}
	})
	WaitCalled(t, Webhook, func() error { return DryRunPod(t, client, ns, DeniedPod("probe")) })
}

// WaitCalled waits until create (a dry-run create the webhook denies)
// fails with an error naming the webhook name: the API server picks new
// configurations up from a watch.
func WaitCalled(t *testing.T, name string, create func() error) {
	t.Helper()
	testkit.WaitFor(t, registerWait, func() error {
		if err := create(); err == nil || !strings.Contains(err.Error(), name) {
			return fmt.Errorf("the API server does not call the webhook %s yet: last dry-run create: %v", name, err)
		}
		return nil
	})
}

// DryRunPod creates pod in ns with dry run (the webhook has no side
// effects).
func DryRunPod(t *testing.T, client kubernetes.Interface, ns string, pod *corev1.Pod) error {
	_, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// Pod is the pod the admission tests send: one container, changed by
// each mod.
func Pod(name string, mod ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}}},
	}
	for _, m := range mod {
		m(p)
	}
	return p
}

// DeniedPod is a pod the webhook denies: its hostname as FQDN is 69
// characters in namespace "default" (longer in a test namespace), over
// the kernel's 64.
func DeniedPod(name string) *corev1.Pod {
	yes := true
	return Pod(name, func(p *corev1.Pod) {
		p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "a-rather-long-hostname", "a-long-subdomain", &yes
	})
}

// Warnings collects the Warning headers of a client's responses.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

var _ rest.WarningHandler = (*Warnings)(nil)

func (w *Warnings) HandleWarningHeader(_ int, _, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// WarnedClient is a client of cfg whose responses' Warning headers are
// collected in the Warnings it returns.
func WarnedClient(t *testing.T, cfg *rest.Config) (kubernetes.Interface, *Warnings) {
	t.Helper()
	w := &Warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = w
	return apiserver.NewClient(t, cfg), w
}

// Take returns the warnings collected since the last Take.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}
