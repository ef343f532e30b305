package dnsserver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// rbacManifest is the DNS server's RBAC, as deployed.
const rbacManifest = "../../../deploy/dnsserver/rbac.yaml"

// rbacObjects are the objects of rbacManifest.
type rbacObjects struct {
	sa      *corev1.ServiceAccount
	role    *rbacv1.ClusterRole
	binding *rbacv1.ClusterRoleBinding
}

// decodeStrict decodes every document of a YAML stream into the typed
// objects of client-go's scheme, failing on unknown and duplicate fields.
func decodeStrict(r io.Reader) ([]runtime.Object, error) {
	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []runtime.Object
	for i := 1; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := codec.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, obj)
	}
}

// loadRBAC reads rbacManifest: exactly a ServiceAccount, a ClusterRole and
// a ClusterRoleBinding.
func loadRBAC(t *testing.T) rbacObjects {
	t.Helper()
	f, err := os.Open(rbacManifest)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := decodeStrict(f)
	if err != nil {
		t.Fatalf("%s: %v", rbacManifest, err)
	}
	var o rbacObjects
	for _, obj := range objs {
		switch v := obj.(type) {
		case *corev1.ServiceAccount:
			if o.sa != nil {
				t.Fatalf("%s: two ServiceAccounts", rbacManifest)
			}
			o.sa = v
		case *rbacv1.ClusterRole:
			if o.role != nil {
				t.Fatalf("%s: two ClusterRoles", rbacManifest)
			}
			o.role = v
		case *rbacv1.ClusterRoleBinding:
			if o.binding != nil {
				t.Fatalf("%s: two ClusterRoleBindings", rbacManifest)
			}
			o.binding = v
		default:
			t.Fatalf("%s: unexpected %T", rbacManifest, obj)
		}
	}
	if o.sa == nil || o.role == nil || o.binding == nil {
		t.Fatalf("%s: want a ServiceAccount, a ClusterRole and a ClusterRoleBinding, got %d objects", rbacManifest, len(objs))
	}
	return o
}

// groupResource is an API group and resource, as in RBAC rules.
type groupResource struct{ group, resource string }

func (g groupResource) String() string {
	if g.group == "" {
		return g.resource
	}
	return g.resource + "." + g.group
}

// feedResources are what the feed (pkg/clusterdns/feed/cluster.go, with
// --pods verified) lists and watches, and the path of their requests.
var feedResources = map[groupResource]string{
	{"", "services"}:                       "/api/v1/services",
	{"", "namespaces"}:                     "/api/v1/namespaces",
	{"", "pods"}:                           "/api/v1/pods",
	{"discovery.k8s.io", "endpointslices"}: "/apis/discovery.k8s.io/v1/endpointslices",
}

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
// role grants list and watch on what the feed reads and nothing else.
func TestRBACManifest(t *testing.T) {
	o := loadRBAC(t)
	if o.sa.Namespace != "dnsconfigurer" {
		t.Errorf("ServiceAccount namespace %q, want dnsconfigurer, the namespace of deploy/", o.sa.Namespace)
	}
	want := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: o.role.Name}
	if o.binding.RoleRef != want {
		t.Errorf("roleRef %+v, want %+v", o.binding.RoleRef, want)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: o.sa.Name, Namespace: o.sa.Namespace}}
	if !slices.Equal(o.binding.Subjects, wantSubjects) {
		t.Errorf("subjects %+v, want %+v", o.binding.Subjects, wantSubjects)
	}
	granted := map[groupResource][]string{}
	for i, r := range o.role.Rules {
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
		if _, ok := feedResources[key]; !ok {
			t.Errorf("grants %s, which the feed does not read", key)
		}
		slices.Sort(verbs)
		if !slices.Equal(slices.Compact(verbs), []string{"list", "watch"}) {
			t.Errorf("%s: verbs %v, want [list watch]", key, verbs)
		}
	}
	for key := range feedResources {
		if _, ok := granted[key]; !ok {
			t.Errorf("does not grant %s, which the feed reads", key)
		}
	}

	// The decoder is strict: a misplaced field fails.
	bad := "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: x\n  namespaces: y\n"
	if _, err := decodeStrict(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "namespaces") {
		t.Errorf("strict decode of a misspelt field: %v", err)
	}
}

// applyRBAC creates the manifest's objects (and the account's namespace)
// through the API, or updates them when they exist.
func applyRBAC(t *testing.T, client kubernetes.Interface, o rbacObjects) {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.sa.Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ServiceAccounts(o.sa.Namespace).Create(ctx, o.sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	roles := client.RbacV1().ClusterRoles()
	if _, err := roles.Create(ctx, o.role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, err := roles.Get(ctx, o.role.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old.Rules = o.role.Rules
		if _, err := roles.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	bindings := client.RbacV1().ClusterRoleBindings()
	if _, err := bindings.Create(ctx, o.binding, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, err := bindings.Get(ctx, o.binding.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old.Subjects = o.binding.Subjects
		if _, err := bindings.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

// TestRBAC runs the server with the token of deploy/dnsserver's
// ServiceAccount, bound to exactly its ClusterRole: it syncs and answers
// without a single forbidden request. Without the binding, or with the role
// missing any one of its rules, it never syncs: SERVFAIL and /readyz 503.
func TestRBAC(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	o := loadRBAC(t)
	admin := cp.Client()
	applyRBAC(t, admin, o)
	ctx := t.Context()

	t.Run("bound", func(t *testing.T) {
		ns := cp.Namespace(t)
		cfg, err := cp.ServiceAccountConfig(ctx, o.sa.Namespace, o.sa.Name)
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
	})

	t.Run("unbound", func(t *testing.T) {
		// The same account name in another namespace: authenticated, no
		// binding.
		ns := cp.Namespace(t)
		cfg, err := cp.ServiceAccountConfig(ctx, ns, o.sa.Name)
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
			role := o.role.DeepCopy()
			role.Name = ns + "-without"
			role.Rules = nil
			for _, r := range o.role.Rules {
				r = *r.DeepCopy()
				if slices.Contains(r.APIGroups, gr.group) {
					r.Resources = slices.DeleteFunc(r.Resources, func(res string) bool { return res == gr.resource })
				}
				if len(r.Resources) > 0 {
					role.Rules = append(role.Rules, r)
				}
			}
			binding := o.binding.DeepCopy()
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
			cfg, err := cp.ServiceAccountConfig(ctx, ns, o.sa.Name)
			if err != nil {
				t.Fatal(err)
			}
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
