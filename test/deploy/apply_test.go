package deploy

import (
	"bytes"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestApply applies the rendered base to a real kube-apiserver (its
// validation and admission, with the cert-manager objects left out: there
// are no CRDs) and asks the RBAC authorizer what each ServiceAccount may
// do. Skips without kubectl or without the test/testbin binaries.
func TestApply(t *testing.T) {
	r, cp, b := applyOverlay(t, ".")
	if bytes.Contains(b, []byte("Warning")) {
		t.Errorf("kubectl apply warned:\n%s", b)
	}

	ctx := t.Context()
	c := cp.Client()
	svc, err := c.CoreV1().Services(namespace).Get(ctx, "dnsconfigurer-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != clusterDNSIP {
		t.Errorf("Service dnsconfigurer-dns: clusterIP %q, want %s", svc.Spec.ClusterIP, clusterDNSIP)
	}

	type access struct {
		sa, verb, group, resource, ns string
		allowed                       bool
	}
	for _, a := range []access{
		{"dnsconfigurer-dns", "list", "", "services", "", true},
		{"dnsconfigurer-dns", "watch", "", "namespaces", "", true},
		{"dnsconfigurer-dns", "watch", "discovery.k8s.io", "endpointslices", "", true},
		{"dnsconfigurer-dns", "list", "", "pods", "", true},
		{"dnsconfigurer-dns", "get", "", "services", "default", false},
		{"dnsconfigurer-dns", "list", "", "secrets", "", false},
		{"dnsconfigurer-dns", "create", "", "events", "default", true},
		{"dnsconfigurer-dns", "patch", "", "events", "default", true},
		{"dnsconfigurer-dns", "create", "events.k8s.io", "events", "default", false},
		{"dnsconfigurer-shim", "list", "", "pods", "", true},
		{"dnsconfigurer-shim", "watch", "", "pods", "", true},
		{"dnsconfigurer-shim", "create", "", "events", "default", true},
		{"dnsconfigurer-shim", "patch", "", "events", "default", true},
		{"dnsconfigurer-shim", "get", "", "pods", "default", false},
		{"dnsconfigurer-shim", "update", "", "pods", "default", false},
		{"dnsconfigurer-shim", "list", "", "secrets", "", false},
		{"dnsconfigurer-shim", "create", "events.k8s.io", "events", "default", false},
		{"dnsconfigurer-webhook", "list", "", "pods", "", false},
		{"dnsconfigurer-dns", "watch", "", "nodes", "", true},
		{"dnsconfigurer-dns", "get", "", "nodes", "", false},
		{"dnsconfigurer-node-local-dns", "list", "", "services", "", false},
		{"dnsconfigurer-node-local-dns", "get", "", "nodes", "", true},
		{"dnsconfigurer-node-local-dns", "list", "", "nodes", "", false},
		{"dnsconfigurer-node-local-dns", "watch", "discovery.k8s.io", "endpointslices", namespace, true},
		{"dnsconfigurer-node-local-dns", "get", "discovery.k8s.io", "endpointslices", namespace, false},
		{"dnsconfigurer-node-local-dns", "list", "", "secrets", "", false},
	} {
		user, groups := apiserver.ServiceAccountUser(namespaceOf(a.sa), a.sa)
		attrs := authorizationv1.ResourceAttributes{Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource}
		if allowed, reason := apiserver.Allowed(t, c, user, groups, attrs); allowed != a.allowed {
			t.Errorf("%s %s %s/%s in %q: allowed %v, want %v (%s)", a.sa, a.verb, a.group, a.resource, a.ns, allowed, a.allowed, reason)
		}
	}

	// Pods: admission (Priority, PodSecurity) and pod validation run only
	// on pods, so create one from each template. Nothing schedules or runs
	// them (no scheduler, no kubelet). Each goes into its workload's
	// namespace as rendered: the Deployments' into dnsconfigurer, which
	// enforces PodSecurity restricted, the DaemonSets' into
	// dnsconfigurer-node (privileged). The webhook configuration goes
	// first: its Service has no endpoints here.
	if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "dnsconfigurer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range r.workloads() {
		ns := namespaceOf(w.name)
		if err := w.createPod(ctx, c, ns); err != nil {
			t.Errorf("%s %s: a pod of its template in namespace %s: %v", w.kind, w.name, ns, err)
		}
	}
}
