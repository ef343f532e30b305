package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// whServingCert writes a serving certificate for 127.0.0.1 and its key,
// from a CA of the test's own, into dir and returns their paths and a
// pool trusting the CA.
func whServingCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	ca := testkit.NewCA(t)
	certPEM, keyPEM, _ := ca.Serving(t, "webhook test")
	certFile = writeFile(t, filepath.Join(dir, "tls.crt"), string(certPEM))
	keyFile = writeFile(t, filepath.Join(dir, "tls.key"), string(keyPEM))
	return certFile, keyFile, ca.Pool()
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWebhookUsage(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := whServingCert(t, dir)
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "apiVersion: dnsconfigurer.io/v1alpha1\nkind: WebhookConfiguration\ntrim: deny\n")
	wrongKind := writeFile(t, filepath.Join(dir, "kind.yaml"), "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\n")
	resolv := writeFile(t, filepath.Join(dir, "resolv.yaml"), "apiVersion: dnsconfigurer.io/v1alpha1\nkind: WebhookConfiguration\ncluster: {resolvConf: /etc/resolv.conf}\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no tls", []string{"webhook"}, "--tls-cert-file and --tls-private-key-file (or tlsCertFile and tlsPrivateKeyFile) are required"},
		{"argument", []string{"webhook", "extra"}, `webhook: unexpected argument "extra"`},
		{"unknown flag", []string{"webhook", "--nope"}, "flag provided but not defined: -nope"},
		{"unknown field", []string{"webhook", "--config", bad}, `unknown field "trim"`},
		{"wrong kind", []string{"webhook", "--config", wrongKind}, `kind: "ShimConfiguration", want "WebhookConfiguration"`},
		{"resolvConf", []string{"webhook", "--config", resolv, "--tls-cert-file", cert, "--tls-private-key-file", key}, "cluster.resolvConf: not used by the webhook"},
		{"bad trims flag", []string{"webhook", "--trims", "maybe", "--tls-cert-file", cert, "--tls-private-key-file", key}, `trims: "maybe" must be "warn" or "deny"`},
		{"bad workloads flag", []string{"webhook", "--workloads", "off", "--tls-cert-file", cert, "--tls-private-key-file", key}, `workloads: "off" must be "check" or "skip"`},
		{"bad cluster dns flag", []string{"webhook", "--cluster-dns", "10.96.0.10,nope", "--tls-cert-file", cert, "--tls-private-key-file", key}, `cluster.clusterDNS[1]: "nope" is not an IP address`},
		{"missing config", []string{"webhook", "--config", filepath.Join(dir, "nope.yaml")}, "--config: open"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tc.args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and stderr containing %q", code, stdout, stderr, exitUsage, tc.want)
			}
		})
	}
	// A key that does not match the certificate fails at start.
	_, otherKey, _ := whServingCert(t, t.TempDir())
	code, _, stderr := run(t, "", "webhook", "--listen", "127.0.0.1:0", "--tls-cert-file", cert, "--tls-private-key-file", otherKey)
	if code != exitFail || !strings.Contains(stderr, "private key does not match public key") {
		t.Errorf("mismatched pair: exit %d, stderr %q", code, stderr)
	}
}

// TestWebhookFlagsOverrideConfig: a flag set on the command line replaces
// the file's field; the others keep the file's values.
func TestWebhookFlagsOverrideConfig(t *testing.T) {
	dir := t.TempDir()
	cfgFile := writeFile(t, filepath.Join(dir, "config.yaml"), `apiVersion: dnsconfigurer.io/v1alpha1
kind: WebhookConfiguration
listen: ":9443"
tlsCertFile: /file/tls.crt
tlsPrivateKeyFile: /file/tls.key
trims: deny
workloads: skip
cluster:
  clusterDNS: [10.0.0.10]
  clusterDomain: file.example
`)
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	var f webhookFlags
	f.register(fs)
	if err := fs.Parse([]string{"--config", cfgFile, "--cluster-domain", "flag.example", "--tls-cert-file", "/flag/tls.crt"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.webhookConfig(fs)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.Domain() != "flag.example" || cfg.TLSCertFile != "/flag/tls.crt" {
		t.Errorf("flags not applied: %+v", cfg)
	}
	if cfg.Listen != ":9443" || cfg.TLSPrivateKeyFile != "/file/tls.key" || cfg.Trims != "deny" || cfg.Workloads != "skip" || strings.Join(cfg.Cluster.ClusterDNS, ",") != "10.0.0.10" {
		t.Errorf("file values lost: %+v", cfg)
	}

	// An empty --cluster-domain is none, as kubelet's, not the default.
	fs = flag.NewFlagSet("webhook", flag.ContinueOnError)
	f = webhookFlags{}
	f.register(fs)
	if err := fs.Parse([]string{"--config", cfgFile, "--cluster-domain", ""}); err != nil {
		t.Fatal(err)
	}
	if cfg, err = f.webhookConfig(fs); err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.Domain() != "" {
		t.Errorf("--cluster-domain \"\": clusterDomain %q, want none", cfg.Cluster.Domain())
	}
}

// TestWebhookServes runs the subcommand with a config file, sends it
// reviews over HTTPS and stops it through its context.
func TestWebhookServes(t *testing.T) {
	dir := t.TempDir()
	cert, key, pool := whServingCert(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	searches := make([]string, 30)
	for i := range searches {
		searches[i] = "s" + strings.Repeat("x", i%5) + string(rune('a'+i)) + ".example."
	}
	b, _ := json.Marshal(searches)
	cfgFile := writeFile(t, filepath.Join(dir, "config.yaml"), `apiVersion: dnsconfigurer.io/v1alpha1
kind: WebhookConfiguration
tlsCertFile: `+cert+`
tlsPrivateKeyFile: `+key+`
cluster:
  clusterDNS: [10.96.0.10]
nodeResolver:
  nameservers: [10.0.0.2]
  searches: [corp.example.]
nodePools:
- name: legacy
  nodeSelector: {pool: legacy}
  nodeResolver:
    searches: `+string(b)+`
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	webhook := goRun(ctx, "webhook", "--config", cfgFile, "--listen", addr, "--cluster-domain", "k8s.example", "--log-format", "text")
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	testkit.WaitFor(t, 10*time.Second, func() error {
		select {
		case <-webhook.exited:
			t.Fatalf("webhook exited %d: %s", webhook.code, webhook.log.String())
		default:
		}
		resp, err := client.Get("https://" + addr + "/healthz")
		if err != nil {
			return fmt.Errorf("webhook not serving: %w", err)
		}
		resp.Body.Close()
		return nil
	})

	review := func(p *corev1.Pod) *admissionv1.AdmissionResponse {
		t.Helper()
		raw, _ := json.Marshal(p)
		body, _ := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: admissionv1.Create,
				Namespace: "default", Object: runtime.RawExtension{Raw: raw}},
		})
		resp, err := client.Post("https://"+addr+"/validate", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
			t.Fatalf("decode: %v", err)
		}
		return out.Response
	}
	yes := true
	fqdn := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}, Spec: corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst,
		Hostname: "a-long-enough-hostname", Subdomain: "and-a-long-subdomain", SetHostnameAsFQDN: &yes}}
	// 22+1+20+1+7+1+3+1+11 = 67 characters with --cluster-domain k8s.example.
	if r := review(fqdn); r.Allowed || !strings.Contains(r.Result.Message, `"a-long-enough-hostname.and-a-long-subdomain.default.svc.k8s.example" is 67 characters`) {
		t.Errorf("fqdn pod: %+v", r)
	}
	legacy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Spec: corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst,
		NodeSelector: map[string]string{"pool": "legacy"}}}
	if r := review(legacy); !r.Allowed || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "the search list has 33 entries") {
		t.Errorf("legacy pool pod: %+v", r)
	}
	legacy.Spec.NodeSelector = nil
	if r := review(legacy); !r.Allowed || len(r.Warnings) != 0 {
		t.Errorf("pod outside the pools: %+v", r)
	}
	// /metrics is served.
	m, err := testkit.Scrape(client, "https://"+addr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if m[`dnsconfigurer_webhook_reviews_total{outcome="denied"}`] != 1 {
		t.Errorf("/metrics lacks the denial: %v", m)
	}
	wantBuildInfo(t, "webhook", m)
	// --log-format text replaces the JSON default.
	if !strings.Contains(webhook.log.String(), "level=INFO msg=starting listen="+addr) {
		t.Errorf("webhook log is not text:\n%s", webhook.log.String())
	}

	cancel()
	if code := webhook.wait(t, 15*time.Second); code != exitOK {
		t.Errorf("exit %d after cancel: %s", code, webhook.log.String())
	}
}
