package shim_test

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const rbacFile = "../../../deploy/shim/rbac.yaml"

// shimRBAC is deploy/shim/rbac.yaml, decoded.
type shimRBAC struct {
	account *corev1.ServiceAccount
	role    *rbacv1.ClusterRole
	binding *rbacv1.ClusterRoleBinding
}

// loadRBAC decodes deploy/shim/rbac.yaml strictly (an unknown or misplaced
// field is an error) into the k8s.io/api types, one object of each kind.
func loadRBAC(t *testing.T) shimRBAC {
	t.Helper()
	data, err := os.ReadFile(rbacFile)
	if err != nil {
		t.Fatal(err)
	}
	var r shimRBAC
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s document %d: %v", rbacFile, i, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ServiceAccount":
			if r.account != nil {
				t.Fatalf("%s: two ServiceAccounts", rbacFile)
			}
			r.account = &corev1.ServiceAccount{}
			obj = r.account
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			if r.role != nil {
				t.Fatalf("%s: two ClusterRoles", rbacFile)
			}
			r.role = &rbacv1.ClusterRole{}
			obj = r.role
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			if r.binding != nil {
				t.Fatalf("%s: two ClusterRoleBindings", rbacFile)
			}
			r.binding = &rbacv1.ClusterRoleBinding{}
			obj = r.binding
		default:
			t.Fatalf("%s document %d: unexpected %s %s", rbacFile, i, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", rbacFile, i, tm.Kind, err)
		}
	}
	if r.account == nil || r.role == nil || r.binding == nil {
		t.Fatalf("%s: want a ServiceAccount, a ClusterRole and a ClusterRoleBinding", rbacFile)
	}
	return r
}

// TestRBACManifest checks deploy/shim/rbac.yaml: exactly the rules the
// shim's client-go use needs (pkg/cri lookup.go: an informer on pods, list
// and watch; events.go: core/v1 Events through an EventRecorder, create and
// patch), bound to its ServiceAccount. TestShimCommand shows the shim works
// with this role.
func TestRBACManifest(t *testing.T) {
	r := loadRBAC(t)
	if r.account.Name != "dnsconfigurer-shim" || r.account.Namespace != "dnsconfigurer-system" {
		t.Errorf("ServiceAccount %s/%s", r.account.Namespace, r.account.Name)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	if !reflect.DeepEqual(r.role.Rules, want) {
		t.Errorf("ClusterRole rules = %+v\nwant %+v", r.role.Rules, want)
	}
	if r.role.AggregationRule != nil {
		t.Errorf("ClusterRole has an aggregation rule")
	}
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.role.Name}
	if r.binding.RoleRef != wantRef {
		t.Errorf("binding roleRef = %+v, want %+v", r.binding.RoleRef, wantRef)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: r.account.Name, Namespace: r.account.Namespace}}
	if !reflect.DeepEqual(r.binding.Subjects, wantSubjects) {
		t.Errorf("binding subjects = %+v, want %+v", r.binding.Subjects, wantSubjects)
	}
}
