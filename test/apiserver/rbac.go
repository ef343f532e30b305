package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// RBAC is a component's RBAC manifest in deploy/: one ServiceAccount, one
// ClusterRole and one ClusterRoleBinding.
type RBAC struct {
	Account *corev1.ServiceAccount
	Role    *rbacv1.ClusterRole
	Binding *rbacv1.ClusterRoleBinding
}

// LoadRBAC decodes the manifest at path strictly. Any other set of
// objects fails t.
func LoadRBAC(t testing.TB, path string) RBAC {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := DecodeStrict(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var r RBAC
	for _, obj := range objs {
		switch v := obj.(type) {
		case *corev1.ServiceAccount:
			if r.Account != nil {
				t.Fatalf("%s: two ServiceAccounts", path)
			}
			r.Account = v
		case *rbacv1.ClusterRole:
			if r.Role != nil {
				t.Fatalf("%s: two ClusterRoles", path)
			}
			r.Role = v
		case *rbacv1.ClusterRoleBinding:
			if r.Binding != nil {
				t.Fatalf("%s: two ClusterRoleBindings", path)
			}
			r.Binding = v
		default:
			t.Fatalf("%s: unexpected %T", path, obj)
		}
	}
	if r.Account == nil || r.Role == nil || r.Binding == nil {
		t.Fatalf("%s: want a ServiceAccount, a ClusterRole and a ClusterRoleBinding, got %d objects", path, len(objs))
	}
	return r
}

// DecodeStrict decodes every document of a YAML stream into the typed
// objects of client-go's scheme. An unknown or misplaced field is an
// error.
func DecodeStrict(r io.Reader) ([]runtime.Object, error) {
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

// CheckBinding fails t unless the binding ties the account to the role.
func (r RBAC) CheckBinding(t testing.TB) {
	t.Helper()
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Role.Name}
	if r.Binding.RoleRef != wantRef {
		t.Errorf("binding roleRef %+v, want %+v", r.Binding.RoleRef, wantRef)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: r.Account.Name, Namespace: r.Account.Namespace}}
	if len(r.Binding.Subjects) != 1 || r.Binding.Subjects[0] != wantSubjects[0] {
		t.Errorf("binding subjects %+v, want %+v", r.Binding.Subjects, wantSubjects)
	}
}

// Apply creates the objects and the account's namespace through client.
// Objects left by an earlier run get the manifest's rules and subjects.
func (r RBAC) Apply(t testing.TB, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Account.Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace: %v", err)
	}
	if _, err := client.CoreV1().ServiceAccounts(r.Account.Namespace).Create(ctx, r.Account, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service account: %v", err)
	}
	createOrUpdate(t, ctx, client.RbacV1().ClusterRoles(), r.Role, r.Role.Name, "cluster role",
		func(old *rbacv1.ClusterRole) { old.Rules = r.Role.Rules })
	createOrUpdate(t, ctx, client.RbacV1().ClusterRoleBindings(), r.Binding, r.Binding.Name, "cluster role binding",
		func(old *rbacv1.ClusterRoleBinding) { old.Subjects = r.Binding.Subjects })
}

// createOrUpdate creates obj (named name, a what) through c; when it is
// there already, it updates the one there with set.
func createOrUpdate[T any](t testing.TB, ctx context.Context, c interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
}, obj T, name, what string, set func(old T)) {
	t.Helper()
	_, err := c.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %s: %v", what, err)
	}
	if err == nil {
		return
	}
	old, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set(old)
	if _, err := c.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ServiceAccountUser is the user and groups a pod running as the service
// account namespace/name authenticates as.
func ServiceAccountUser(namespace, name string) (user string, groups []string) {
	return "system:serviceaccount:" + namespace + ":" + name, []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace}
}

// Allowed asks the API server, by a SubjectAccessReview, whether user in
// groups (and system:authenticated) may do what attrs say. It returns the
// answer and its reason.
func Allowed(t testing.TB, client kubernetes.Interface, user string, groups []string, attrs authorizationv1.ResourceAttributes) (bool, string) {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: append(slices.Clone(groups), "system:authenticated"), ResourceAttributes: &attrs,
	}}
	got, err := client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed, got.Status.Reason
}
