package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// nodeCredsDir is the component that runs the node agent with its node's
// kubelet credentials instead of a ServiceAccount.
const nodeCredsDir = "components/node-credentials"

// kubeadm's kubelet credentials on the host: kubelet.conf, whose user's
// client-certificate and client-key are both kubeletClientPEM, a symlink
// kubelet moves on rotation (kubernetes v1.34.4
// cmd/kubeadm/app/cmd/phases/init/kubeletfinalize.go and
// pkg/kubelet/certificate/bootstrap/bootstrap.go).
const (
	kubeletKubeconfig = "/etc/kubernetes/kubelet.conf"
	kubeletClientPEM  = "/var/lib/kubelet/pki/kubelet-client-current.pem"
)

// nodeCredsCase is an entry point rendered with and without the component.
type nodeCredsCase struct {
	name, agent string
	// plain renders the entry point; with renders it with the component.
	plain, with func(t *testing.T) []byte
}

func nodeCredsCases() []nodeCredsCase {
	settingsFile := func(t *testing.T) map[string]string {
		b, err := os.ReadFile(filepath.Join(deployDir, "cluster-settings.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{"cluster-settings.yaml": string(b)}
	}
	return []nodeCredsCase{
		{
			name: "deploy", agent: "dnsconfigurer-shim",
			plain: func(t *testing.T) []byte { return renderDir(t, deployDir) },
			with: func(t *testing.T) []byte {
				// deploy/kustomization.yaml with the component.
				return renderDir(t, tempKustomization(t, []string{"base"},
					[]string{"components/cluster-settings", nodeCredsDir}, settingsFile(t)))
			},
		},
		{
			name: nriDir, agent: "dnsconfigurer-nri",
			plain: func(t *testing.T) []byte { return renderDir(t, filepath.Join(deployDir, nriDir)) },
			with: func(t *testing.T) []byte {
				return renderDir(t, tempKustomization(t, []string{nriDir}, []string{nodeCredsDir}, nil))
			},
		},
	}
}

// TestNodeCredentialsComponent renders components/node-credentials over
// deploy/ (the shim) and over overlays/nri (the NRI plugin) and compares
// each with the entry point alone: the agent's DaemonSet gains exactly
// --kubeconfig=kubelet.conf, read-only host mounts of kubelet.conf and of
// the directory of its client certificate, and no ServiceAccount token;
// the agent's ServiceAccount is kept (the DaemonSet names it) with
// automountServiceAccountToken false; its ClusterRole and
// ClusterRoleBinding are gone, so nothing grants it anything; every other
// object is rendered byte for byte as without the component. The
// workloads still pass the hardening checks and the binary parses the
// agent's flags.
func TestNodeCredentialsComponent(t *testing.T) {
	for _, tc := range nodeCredsCases() {
		t.Run(tc.name, func(t *testing.T) {
			plain, with := tc.plain(t), tc.with(t)
			before, after := docsByName(t, plain), docsByName(t, with)
			var removed []string
			for name, doc := range before {
				got, ok := after[name]
				switch {
				case !ok:
					removed = append(removed, name)
				case name == "DaemonSet "+nodeNamespace+"/"+tc.agent:
					checkNodeCredsDaemonSet(t, doc, got)
				case name == "ServiceAccount "+nodeNamespace+"/"+tc.agent:
					checkNodeCredsAccount(t, doc, got)
				case string(got) != string(doc):
					t.Errorf("%s: changed by the component:\n%s\nwas:\n%s", name, got, doc)
				}
			}
			for name := range after {
				if _, ok := before[name]; !ok {
					t.Errorf("%s: added by the component", name)
				}
			}
			slices.Sort(removed)
			if want := []string{"ClusterRole /" + tc.agent, "ClusterRoleBinding /" + tc.agent}; !slices.Equal(removed, want) {
				t.Errorf("removed %q, want %q", removed, want)
			}

			r := &objects{}
			for i, doc := range splitDocs(with) {
				if err := r.add(fmt.Sprintf("%s with %s: rendered document %d", tc.name, nodeCredsDir, i+1), doc); err != nil {
					t.Fatal(err)
				}
			}
			for _, b := range r.clusterRoleBindings {
				for _, s := range b.Subjects {
					if s.Name == tc.agent {
						t.Errorf("ClusterRoleBinding %s still binds %s", b.Name, tc.agent)
					}
				}
			}
			for _, b := range r.roleBindings {
				for _, s := range b.Subjects {
					if s.Name == tc.agent {
						t.Errorf("RoleBinding %s/%s binds %s", b.Namespace, b.Name, tc.agent)
					}
				}
			}
			checkWorkloads(t, r)
			if tc.agent == "dnsconfigurer-shim" {
				checkShim(t, r)
			}
			if !testing.Short() {
				w := r.workload(t, "DaemonSet", tc.agent)
				checkFlagsParse(t, buildbin.Dnsconfigurer(t), "DaemonSet "+w.name, w.spec.Containers[0].Args)
			}
		})
	}
}

// docsByName maps the documents of a render by "Kind namespace/name".
func docsByName(t *testing.T, out []byte) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, doc := range splitDocs(out) {
		var head docHead
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		key := head.key()
		if _, dup := m[key]; dup {
			t.Fatalf("rendered %s twice", key)
		}
		m[key] = doc
	}
	return m
}

// checkNodeCredsDaemonSet: the agent's DaemonSet with the component is the
// one without plus the kubeconfig flag, the two read-only host mounts and
// automountServiceAccountToken false, and nothing else.
func checkNodeCredsDaemonSet(t *testing.T, plainDoc, withDoc []byte) {
	t.Helper()
	plain := decode[appsv1.DaemonSet](t, "the DaemonSet without the component", plainDoc)
	with := decode[appsv1.DaemonSet](t, "the DaemonSet with the component", withDoc)
	spec := &with.Spec.Template.Spec
	where := "DaemonSet " + with.Name
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken not false", where)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", where, len(spec.Containers))
	}
	c := spec.Containers[0]
	if got := flagAll(c.Args, "kubeconfig"); !slices.Equal(got, []string{kubeletKubeconfig}) {
		t.Errorf("%s: --kubeconfig %q, want %s", where, got, kubeletKubeconfig)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Errorf("%s: no env NODE_NAME from spec.nodeName (the name in kubelet's credential)", where)
	}
	w := workload{kind: "DaemonSet", name: with.Name, spec: *spec}
	ms := mountsOf(t, w, c)
	for path, typ := range map[string]corev1.HostPathType{
		kubeletKubeconfig:              corev1.HostPathFile,
		filepath.Dir(kubeletClientPEM): corev1.HostPathDirectory,
	} {
		m, ok := ms[path]
		if !ok || m.vol.HostPath == nil || m.vol.HostPath.Path != path || !m.readOnly {
			t.Errorf("%s: host %s not mounted read-only at the same path", where, path)
			continue
		}
		if m.vol.HostPath.Type == nil || *m.vol.HostPath.Type != typ {
			t.Errorf("%s: host path %s: type %v, want %s", where, path, m.vol.HostPath.Type, typ)
		}
	}

	// Take the additions away: what is left is the DaemonSet without the
	// component.
	added := []string{"kubelet-kubeconfig", "kubelet-pki"}
	spec.AutomountServiceAccountToken = nil
	spec.Containers[0].Args = slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool { return strings.HasPrefix(a, "--kubeconfig=") })
	spec.Containers[0].VolumeMounts = slices.DeleteFunc(slices.Clone(c.VolumeMounts), func(m corev1.VolumeMount) bool { return slices.Contains(added, m.Name) })
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return slices.Contains(added, v.Name) })
	if !reflect.DeepEqual(with, plain) {
		gotB, _ := yaml.Marshal(with)
		t.Errorf("%s: changes beyond the kubeconfig flag, its mounts and the token; without them:\n%s\nwant:\n%s", where, gotB, plainDoc)
	}
}

// checkNodeCredsAccount: the agent's ServiceAccount with the component is
// the one without plus automountServiceAccountToken false.
func checkNodeCredsAccount(t *testing.T, plainDoc, withDoc []byte) {
	t.Helper()
	plain := decode[corev1.ServiceAccount](t, "the ServiceAccount without the component", plainDoc)
	with := decode[corev1.ServiceAccount](t, "the ServiceAccount with the component", withDoc)
	if with.AutomountServiceAccountToken == nil || *with.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s: automountServiceAccountToken not false", with.Name)
	}
	with.AutomountServiceAccountToken = plain.AutomountServiceAccountToken
	if !reflect.DeepEqual(with, plain) {
		t.Errorf("ServiceAccount %s: changed beyond automountServiceAccountToken:\n%s", with.Name, withDoc)
	}
}

// TestNodeCredentialsApply applies deploy/ with components/node-credentials
// to a real kube-apiserver (authorization Node,RBAC, as kubeadm's): the
// shim's ServiceAccount may do nothing any more, a pod of the shim
// DaemonSet's template is admitted, and the identity the shim now runs as,
// system:node:<node> in system:nodes, may list and watch pods only with
// its own spec.nodeName (test/integration/shim TestNodeCredentials runs
// the shim with it). Skips without kubectl or the test/testbin binaries.
func TestNodeCredentialsApply(t *testing.T) {
	tc := nodeCredsCases()[0]
	r, cp, _ := applyRendered(t, tc.name+" with "+nodeCredsDir, tc.with(t))
	ctx := t.Context()
	c := cp.Client()
	if err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "dnsconfigurer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const node = "node-a"
	saUser, saGroups := apiserver.ServiceAccountUser(nodeNamespace, tc.agent)
	for _, a := range []struct {
		user     string
		groups   []string
		verb     string
		resource string
		ns       string
		selector string
		allowed  bool
	}{
		{saUser, saGroups, "list", "pods", "", "", false},
		{saUser, saGroups, "watch", "pods", "", "spec.nodeName=" + node, false},
		{saUser, saGroups, "create", "events", "default", "", false},
		{"system:node:" + node, []string{"system:nodes"}, "list", "pods", "", "", false},
		{"system:node:" + node, []string{"system:nodes"}, "list", "pods", "", "spec.nodeName=node-b", false},
		{"system:node:" + node, []string{"system:nodes"}, "list", "pods", "", "spec.nodeName=" + node, true},
		{"system:node:" + node, []string{"system:nodes"}, "watch", "pods", "", "spec.nodeName=" + node, true},
		{"system:node:" + node, []string{"system:nodes"}, "create", "events", "default", "", true},
		{"system:node:" + node, []string{"system:nodes"}, "patch", "events", "default", "", true},
		{"system:node:" + node, []string{"system:nodes"}, "list", "secrets", "", "", false},
	} {
		attrs := authorizationv1.ResourceAttributes{Namespace: a.ns, Verb: a.verb, Resource: a.resource}
		if a.selector != "" {
			attrs.FieldSelector = &authorizationv1.FieldSelectorAttributes{RawSelector: a.selector}
		}
		if allowed, reason := apiserver.Allowed(t, c, a.user, a.groups, attrs); allowed != a.allowed {
			t.Errorf("%s %s %s in %q (fieldSelector %q): allowed %v, want %v (%s)", a.user, a.verb, a.resource, a.ns, a.selector, allowed, a.allowed, reason)
		}
	}
	if err := r.workload(t, "DaemonSet", tc.agent).createPod(ctx, c, nodeNamespace); err != nil {
		t.Errorf("a pod of the %s template: %v", tc.agent, err)
	}
}
