package dnsserver_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// rbacManifest is the DNS server's RBAC, as deployed.
const rbacManifest = "../../../deploy/dnsserver/rbac.yaml"

// groupResource is an API group and resource, as in RBAC rules.
type groupResource struct{ group, resource string }

func (g groupResource) String() string {
	if g.group == "" {
		return g.resource
	}
	return g.resource + "." + g.group
}

// feedResources are what the feed (pkg/kubefeed/cluster.go, with
// --pods verified) lists and watches, and the path of their requests.
var feedResources = map[groupResource]string{
	{"", "services"}:                       "/api/v1/services",
	{"", "namespaces"}:                     "/api/v1/namespaces",
	{"", "pods"}:                           "/api/v1/pods",
	{"", "nodes"}:                          "/api/v1/nodes",
	{"discovery.k8s.io", "endpointslices"}: "/apis/discovery.k8s.io/v1/endpointslices",
}

// eventsResource is what the server writes: Events on the objects it
// skips (pkg/kubefeed/events.go), created and patched.
var eventsResource = groupResource{"", "events"}

// sortedResources returns the keys of feedResources in a stable order.
func sortedResources() []groupResource {
	keys := make([]groupResource, 0, len(feedResources))
	for k := range feedResources {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b groupResource) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// TestRBACManifest checks deploy/dnsserver/rbac.yaml without an API server:
// it decodes strictly, the binding ties the account to the role, and the
// role grants list and watch on what the feed reads, create and patch on
// Events, and nothing else.
func TestRBACManifest(t *testing.T) {
	o := apiserver.LoadRBAC(t, rbacManifest)
	if o.Account.Namespace != "dnsconfigurer" {
		t.Errorf("ServiceAccount namespace %q, want dnsconfigurer, the namespace of deploy/", o.Account.Namespace)
	}
	o.CheckBinding(t)
	granted := map[groupResource][]string{}
	for i, r := range o.Role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %d: resourceNames or nonResourceURLs", i)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := groupResource{g, res}
				granted[key] = append(granted[key], r.Verbs...)
			}
		}
	}
	for key, verbs := range granted {
		want := []string{"list", "watch"}
		if key == eventsResource {
			want = []string{"create", "patch"}
		} else if _, ok := feedResources[key]; !ok {
			t.Errorf("grants %s, which the server does not use", key)
		}
		slices.Sort(verbs)
		if !slices.Equal(slices.Compact(verbs), want) {
			t.Errorf("%s: verbs %v, want %v", key, verbs, want)
		}
	}
	if _, ok := granted[eventsResource]; !ok {
		t.Errorf("does not grant %s, which the server posts", eventsResource)
	}
	for key := range feedResources {
		if _, ok := granted[key]; !ok {
			t.Errorf("does not grant %s, which the feed reads", key)
		}
	}

	// The decoder is strict: a misplaced field fails.
	bad := "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: x\n  namespaces: y\n"
	if _, err := apiserver.DecodeStrict(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "namespaces") {
		t.Errorf("strict decode of a misspelt field: %v", err)
	}
}

// TestRBAC runs the server with the token of deploy/dnsserver's
// ServiceAccount, bound to exactly its ClusterRole: it syncs, answers and
// posts the Event on an object it skips without a single forbidden request.
// Without the binding, or with the role missing any one of its read rules,
// it never syncs: SERVFAIL and /readyz 503. Without the events rule it
// serves as well and only its Event is refused.
func TestRBAC(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	o := apiserver.LoadRBAC(t, rbacManifest)
	admin := cp.Client()
	o.Apply(t, admin)
	ctx := t.Context()

	t.Run("bound", func(t *testing.T) {
		ns := cp.Namespace(t)
		cfg, err := cp.ServiceAccountConfig(ctx, o.Account.Namespace, o.Account.Name)
		if err != nil {
			t.Fatal(err)
		}
		checkGoroutines(t)
		client := newClient(t, cp.Config())
		srv := startServer(t, cfg)
		srv.waitSynced(t)
		s := createService(t, client, ns, "web", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}})
		waitAnswer(t, srv.addr, "web."+ns+".svc."+zone, dns.TypeA, "NOERROR A "+s.Spec.ClusterIP)
		if srv.readyz() != http.StatusOK {
			t.Errorf("/readyz %d after sync", srv.readyz())
		}
		// A new binding reaches the RBAC authorizer's cache a moment after
		// it is written, so a 403 may precede the sync; none may follow it.
		forbidden := func(r apiserver.Request) bool { return r.Status == http.StatusForbidden }
		if n := srv.requests.Count(forbidden); n > 0 {
			t.Logf("%d forbidden requests before the binding took effect", n)
		}
		for _, path := range feedResources {
			ok := func(r apiserver.Request) bool { return r.Path == path && r.Status == http.StatusOK }
			if srv.requests.Count(ok) == 0 {
				t.Errorf("no successful request to %s: %v", path, srv.requests.Summary())
			}
		}
		skipAndWaitEvent(t, client, srv, ns, http.StatusCreated)
	})

	t.Run("without events", func(t *testing.T) {
		ns := cp.Namespace(t)
		cfg := boundWithout(t, cp, o, ns, eventsResource)
		checkGoroutines(t)
		client := newClient(t, cp.Config())
		srv := startServer(t, cfg)
		srv.waitSynced(t)
		s := createService(t, client, ns, "web", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}})
		waitAnswer(t, srv.addr, "web."+ns+".svc."+zone, dns.TypeA, "NOERROR A "+s.Spec.ClusterIP)
		skipAndWaitEvent(t, client, srv, ns, http.StatusForbidden)
	})

	t.Run("unbound", func(t *testing.T) {
		// The same account name in another namespace: authenticated, no
		// binding.
		ns := cp.Namespace(t)
		cfg, err := cp.ServiceAccountConfig(ctx, ns, o.Account.Name)
		if err != nil {
			t.Fatal(err)
		}
		checkGoroutines(t)
		srv := startServer(t, cfg)
		// Every informer is refused, then refused again on its retry.
		for _, path := range feedResources {
			waitRefusedAgain(t, srv, path)
		}
		assertUnready(t, srv)
	})

	for _, gr := range sortedResources() {
		t.Run("without "+gr.String(), func(t *testing.T) {
			ns := cp.Namespace(t)
			cfg := boundWithout(t, cp, o, ns, gr)
			checkGoroutines(t)
			srv := startServer(t, cfg)
			missing := feedResources[gr]
			// The other informers list, the one without its rule is refused
			// and refused again on its retry.
			for _, path := range feedResources {
				if path == missing {
					continue
				}
				waitRequests(t, srv.requests, 1, "listing "+path, func(r apiserver.Request) bool { return r.Path == path && r.Status == http.StatusOK })
			}
			waitRefusedAgain(t, srv, missing)
			assertUnready(t, srv)
		})
	}
}

// boundWithout binds the deployed role, less the resource gr, to the
// ServiceAccount of deploy/dnsserver in namespace ns, and returns its
// credentials.
func boundWithout(t *testing.T, cp *apiserver.ControlPlane, o apiserver.RBAC, ns string, gr groupResource) *rest.Config {
	t.Helper()
	ctx := t.Context()
	admin := cp.Client()
	role := o.Role.DeepCopy()
	role.Name = ns + "-without"
	role.Rules = nil
	for _, r := range o.Role.Rules {
		r = *r.DeepCopy()
		if slices.Contains(r.APIGroups, gr.group) {
			r.Resources = slices.DeleteFunc(r.Resources, func(res string) bool { return res == gr.resource })
		}
		if len(r.Resources) > 0 {
			role.Rules = append(role.Rules, r)
		}
	}
	binding := o.Binding.DeepCopy()
	binding.Name = role.Name
	binding.RoleRef.Name = role.Name
	binding.Subjects[0].Namespace = ns
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	cfg, err := cp.ServiceAccountConfig(ctx, ns, o.Account.Name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// skipAndWaitEvent creates in ns a Service the server skips (an
// ExternalName with a 64-byte label) and waits for the server's request
// posting its Event to get status.
func skipAndWaitEvent(t *testing.T, client kubernetes.Interface, srv *server, ns string, status int) {
	t.Helper()
	createService(t, client, ns, "ext", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: strings.Repeat("a", 64) + ".example.com"})
	// The control plane outlives the test: leave nothing other servers skip.
	t.Cleanup(func() {
		_ = client.CoreV1().Services(ns).Delete(context.Background(), "ext", metav1.DeleteOptions{})
	})
	path := "/api/v1/namespaces/" + ns + "/events"
	waitRequests(t, srv.requests, 1, fmt.Sprintf("posting the Event with status %d", status), func(r apiserver.Request) bool {
		return r.Method == http.MethodPost && r.Path == path && r.Status == status
	})
}

// waitRefusedAgain waits until a list or watch of path was forbidden and
// then forbidden again on a retry. An informer's attempt to sync is a
// streaming watch (client-go's WatchListClient, on by default) and, when
// that fails, a list: two requests; the third is the retry.
func waitRefusedAgain(t *testing.T, srv *server, path string) {
	t.Helper()
	waitRequests(t, srv.requests, 3, "forbidden on "+path, func(r apiserver.Request) bool {
		return r.Path == path && r.Status == http.StatusForbidden
	})
}

// assertUnready checks that a server that has not synced says so: /readyz
// 503 and SERVFAIL for names in the zone, never NXDOMAIN.
func assertUnready(t *testing.T, srv *server) {
	t.Helper()
	if srv.handler.Synced() {
		t.Fatal("synced")
	}
	if code := srv.readyz(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d, want 503", code)
	}
	mustAnswer(t, srv.addr, "kubernetes.default.svc."+zone, dns.TypeA, "SERVFAIL")
	mustAnswer(t, srv.addr, "nothing.default.svc."+zone, dns.TypeA, "SERVFAIL")
}
