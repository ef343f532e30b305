package shim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

const rbacFile = "../../../deploy/shim/rbac.yaml"

// TestRBACManifest checks deploy/shim/rbac.yaml: exactly the rules the
// shim's client-go use needs (pkg/podfacts lookup.go: an informer on pods, list
// and watch; events.go: core/v1 Events through an EventRecorder, create and
// patch), bound to its ServiceAccount. TestShimCommand shows the shim works
// with this role.
func TestRBACManifest(t *testing.T) {
	r := apiserver.LoadRBAC(t, rbacFile)
	if r.Account.Name != "dnsconfigurer-shim" || r.Account.Namespace != "dnsconfigurer-node" {
		t.Errorf("ServiceAccount %s/%s", r.Account.Namespace, r.Account.Name)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	if !reflect.DeepEqual(r.Role.Rules, want) {
		t.Errorf("ClusterRole rules = %+v\nwant %+v", r.Role.Rules, want)
	}
	if r.Role.AggregationRule != nil {
		t.Errorf("ClusterRole has an aggregation rule")
	}
	r.CheckBinding(t)
}

// TestRBACMinimal shows each verb of deploy/shim/rbac.yaml's ClusterRole is
// used: an in-process shim runs as a user bound to the role minus one verb,
// its requests needing that verb are refused, and what the verb serves
// breaks. TestShimCommand shows the whole role is enough.
//
// client-go lists pods with a watch (sendInitialEvents) where the API server
// supports it, as this one does; "list" is for servers that do not (the
// WatchList feature off), which a control plane of the test's own shows.
func TestRBACMinimal(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	for _, tc := range []struct {
		resource, verb string
		// request is the refused request: its method, and whether it is a
		// watch.
		method string
		watch  bool
		// apiServerArgs, when set, ask for a control plane of the test's own.
		apiServerArgs []string
		check         func(t *testing.T, s *shim, client kubernetes.Interface, ns string)
	}{
		{"pods", "list", http.MethodGet, false, []string{"--feature-gates=WatchList=false"}, func(t *testing.T, s *shim, _ kubernetes.Interface, _ string) {
			testkit.Holds(t, absenceWait, func() error {
				if s.informer.HasSynced() {
					return errors.New("the pod informer synced")
				}
				return nil
			})
		}},
		{"pods", "watch", http.MethodGet, true, nil, func(t *testing.T, s *shim, client kubernetes.Interface, ns string) {
			// The informer syncs from a list but never watches: it lists
			// again and again, with a backoff.
			testkit.WaitFor(t, waitBound, func() error {
				if n := s.forbidden(http.MethodGet, "pods", true); n < 2 {
					return fmt.Errorf("%d forbidden watches, want the informer to keep retrying", n)
				}
				return nil
			})
		}},
		{"events", "create", http.MethodPost, false, nil, func(t *testing.T, s *shim, client kubernetes.Interface, ns string) {
			pod := createPod(t, client, ns, overLimitPod("big"))
			if err := runSandbox(s.client, kubeletSandbox(t, newEngine(t), pod)); err != nil {
				t.Fatalf("RunPodSandbox: %v", err)
			}
			noEvents(t, client, pod, absenceWait, func(e corev1.Event) bool { return true })
		}},
		{"events", "patch", http.MethodPatch, false, nil, func(t *testing.T, s *shim, client kubernetes.Interface, ns string) {
			pod := createPod(t, client, ns, overLimitPod("big"))
			req := kubeletSandbox(t, newEngine(t), pod)
			for attempt := range 2 {
				req.Config.Metadata.Attempt = uint32(attempt)
				if err := runSandbox(s.client, req); err != nil {
					t.Fatalf("RunPodSandbox, attempt %d: %v", attempt, err)
				}
				if attempt == 0 {
					checkTrimEvents(t, client, pod, 1, waitBound)
				}
			}
			// Counted again without patch?
			noEvents(t, client, pod, absenceWait, func(e corev1.Event) bool { return e.Count != 1 })
		}},
	} {
		t.Run("without "+tc.resource+" "+tc.verb, func(t *testing.T) {
			cp := cp
			if tc.apiServerArgs != nil {
				cp = apiserver.StartT(t, apiserver.WithAPIServerArgs(tc.apiServerArgs...))
			}
			ns := cp.Namespace(t)
			checkGoroutines(t)
			user := "shim-" + ns
			bindRoleWithout(t, cp.Client(), apiserver.LoadRBAC(t, rbacFile).Role, tc.resource, tc.verb, ns, user)
			s := startShim(t, cp.ConfigAs(user), shimOptions{lookupTimeout: time.Second})
			client := newClient(t, cp.Config())
			tc.check(t, s, client, ns)
			testkit.WaitFor(t, waitBound, func() error {
				if s.forbidden(tc.method, tc.resource, tc.watch) == 0 {
					return fmt.Errorf("no forbidden %s of %s (watch %v); requests:\n%s", tc.method, tc.resource, tc.watch, strings.Join(s.requests.Summary(), "\n"))
				}
				return nil
			})
			for _, r := range s.requests.All() {
				if r.Status == http.StatusForbidden && (r.Method != tc.method || !onResource(r.Path, tc.resource) || strings.Contains(r.Query, "watch=true") != tc.watch) {
					t.Errorf("forbidden request of another verb: %v", r)
				}
			}
		})
	}
}

// bindRoleWithout creates a copy of role named name, without verb on
// resource, and binds it to user; both go when the test ends.
func bindRoleWithout(t *testing.T, admin kubernetes.Interface, role *rbacv1.ClusterRole, resource, verb, name, user string) {
	t.Helper()
	role = role.DeepCopy()
	role.Name = name
	for i, rule := range role.Rules {
		if slices.Contains(rule.Resources, resource) {
			role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	ctx := context.Background()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create cluster role: %v", err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create cluster role binding: %v", err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
}

// forbidden counts the refused (403) requests of the shim with method on
// resource, a watch or not.
func (s *shim) forbidden(method, resource string, watch bool) int {
	n := 0
	for _, r := range s.requests.All() {
		if r.Status == http.StatusForbidden && r.Method == method && onResource(r.Path, resource) &&
			strings.Contains(r.Query, "watch=true") == watch {
			n++
		}
	}
	return n
}

// onResource reports whether an API path is of resource: the collection or
// one object.
func onResource(path, resource string) bool {
	return strings.HasSuffix(path, "/"+resource) || strings.Contains(path, "/"+resource+"/")
}

// absenceWait is how long a test waits to see that something does not
// happen: Events and the first sync take well under a second here.
const absenceWait = 3 * time.Second

// noEvents lists the pod's Events for d and fails t at the first that
// bad reports.
func noEvents(t *testing.T, client kubernetes.Interface, pod *corev1.Pod, d time.Duration, bad func(corev1.Event) bool) {
	t.Helper()
	testkit.Holds(t, d, func() error {
		evs, err := podEvents(client, pod.Namespace, string(pod.UID))
		if err != nil {
			return fmt.Errorf("list events: %v", err)
		}
		for _, e := range evs {
			if bad(e) {
				return fmt.Errorf("event of pod %s/%s: %s", pod.Namespace, pod.Name, summarize(evs))
			}
		}
		return nil
	})
}
