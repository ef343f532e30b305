package shim_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// TestNodeCredentials shows, against a real kube-apiserver set up as
// kubeadm's (--authorization-mode=Node,RBAC, the NodeRestriction admission
// plugin, client certificates), what deploy/components/node-credentials
// gives the shim: a kubelet client certificate of node-a, laid out as
// kubeadm's kubelet.conf and kubelet-client-current.pem.
//
// With node-a's credential: pods listed or watched without a field
// selector, or with spec.nodeName=node-b, are Forbidden; with
// spec.nodeName=node-a they are allowed and only node-a's come back; one
// pod may be read only if it is bound to node-a, one Secret only if a pod
// of node-a references it; Events may be created and patched, about
// node-a's pods and, the Node authorizer not narrowing Events, about any
// other. The shim's own lookup (pkg/cri, in-process) and the built
// command run with it: node-a's pod is found, node-b's is not, its
// Events are posted, and none of its requests is refused.
//
// With the shim's ServiceAccount bound to deploy/shim's ClusterRole (the
// default deploy), the same questions show what that exposes: every pod of
// every node and namespace, whole (literal env values included), but no
// Secret.
func TestNodeCredentials(t *testing.T) {
	ca := newClientCA(t)
	// test/apiserver's control planes authorize with Node,RBAC.
	cp := apiserver.StartT(t, apiserver.WithAPIServerArgs(
		"--client-ca-file="+ca.file,
		"--enable-admission-plugins=NodeRestriction",
	))
	ns, otherNS, cmdNS := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	checkGoroutines(t)
	ctx := context.Background()
	admin := newClient(t, cp.Config())

	// node-a's pod reads a Secret into its env; node-b's, in another
	// namespace, another Secret and a literal value.
	for _, s := range []struct{ ns, name string }{{ns, "mine"}, {otherNS, "theirs"}} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.ns}, StringData: map[string]string{"password": "secret-" + s.name}}
		if _, err := admin.CoreV1().Secrets(s.ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	secretEnv := func(name string) []corev1.EnvVar {
		return []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "password"}}}}
	}
	base := apiPods(ns)[0].pod
	mine := base.DeepCopy()
	mine.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1.0", Env: secretEnv("mine")}}
	mine = createPod(t, admin, ns, mine)
	const literal = "DB_PASSWORD=hunter2"
	theirs := base.DeepCopy()
	theirs.Name, theirs.Spec.NodeName = "elsewhere", otherNode
	theirs.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1.0",
		Env: append(secretEnv("theirs"), corev1.EnvVar{Name: "DB", Value: literal})}}
	theirs = createPod(t, admin, otherNS, theirs)

	kubeletConf := ca.kubeletConf(t, cp, node)
	nodeCfg := inlineCerts(t, loadKubeconfig(t, kubeletConf))
	asNode := newClient(t, nodeCfg)

	t.Run("identity", func(t *testing.T) {
		r, err := asNode.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u := r.Status.UserInfo; u.Username != "system:node:"+node || !slices.Contains(u.Groups, "system:nodes") {
			t.Errorf("authenticated as %q in %q, want system:node:%s in system:nodes", u.Username, u.Groups, node)
		}
	})

	t.Run("node credentials", func(t *testing.T) {
		for _, tc := range []struct {
			name, ns, selector string
		}{
			{"every pod", "", ""},
			{"a namespace's pods", ns, ""},
			{"another node's pods", "", "spec.nodeName=" + otherNode},
			{"another node's pods in a namespace", otherNS, "spec.nodeName=" + otherNode},
		} {
			_, err := asNode.CoreV1().Pods(tc.ns).List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
			if !apierrors.IsForbidden(err) {
				t.Errorf("list %s (namespace %q, fieldSelector %q): %v, want Forbidden", tc.name, tc.ns, tc.selector, err)
			}
			w, err := asNode.CoreV1().Pods(tc.ns).Watch(ctx, metav1.ListOptions{FieldSelector: tc.selector})
			if err == nil {
				w.Stop()
			}
			if !apierrors.IsForbidden(err) {
				t.Errorf("watch %s (namespace %q, fieldSelector %q): %v, want Forbidden", tc.name, tc.ns, tc.selector, err)
			}
		}

		own := fields.OneTermEqualSelector("spec.nodeName", node).String()
		list, err := asNode.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: own})
		if err != nil {
			t.Fatalf("list with %s: %v", own, err)
		}
		if got := podUIDs(list.Items); !slices.Equal(got, []types.UID{mine.UID}) {
			t.Errorf("list with %s: pods %v, want only node-a's %s (%s)", own, got, mine.Name, mine.UID)
		}
		w, err := asNode.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: own})
		if err != nil {
			t.Errorf("watch with %s: %v", own, err)
		} else {
			w.Stop()
		}

		// One object: through the Node authorizer's graph, which learns of
		// a pod (and what it references) from its own watch, a moment
		// after it is created.
		eventually(t, func() error {
			_, err := asNode.CoreV1().Pods(ns).Get(ctx, mine.Name, metav1.GetOptions{})
			return err
		}, "get node-a's pod")
		eventually(t, func() error {
			_, err := asNode.CoreV1().Secrets(ns).Get(ctx, "mine", metav1.GetOptions{})
			return err
		}, "get the Secret node-a's pod references")
		if _, err := asNode.CoreV1().Pods(otherNS).Get(ctx, theirs.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("get node-b's pod: %v, want Forbidden", err)
		}
		if _, err := asNode.CoreV1().Secrets(otherNS).Get(ctx, "theirs", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("get the Secret of node-b's pod: %v, want Forbidden", err)
		}
		if _, err := asNode.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("list Secrets: %v, want Forbidden", err)
		}
		if _, err := asNode.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("list ConfigMaps: %v, want Forbidden", err)
		}

		// Events: create and patch, as the shim's EventRecorder does. The
		// Node authorizer allows Events to every node in every namespace
		// (its static rules; NodeRestriction does not look at Events), so
		// a node can also post one about another node's pod.
		for _, p := range []*corev1.Pod{mine, theirs} {
			ev := podEvent(p)
			got, err := asNode.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("create an Event about %s/%s (node %s): %v", p.Namespace, p.Name, p.Spec.NodeName, err)
				continue
			}
			patch := []byte(`{"count":2}`)
			if _, err := asNode.CoreV1().Events(p.Namespace).Patch(ctx, got.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Errorf("patch the Event about %s/%s: %v", p.Namespace, p.Name, err)
			}
		}
	})

	t.Run("shim", func(t *testing.T) {
		const timeout = 500 * time.Millisecond
		s := startShim(t, nodeCfg, shimOptions{lookupTimeout: timeout})
		s.waitSynced(t)
		eng := newEngine(t)

		req := kubeletSandbox(t, eng, mine)
		if got, want := sandboxGot(t, s.client, s.runtime, req, "node-a's pod"), fromAPI(t, eng, mine, req); got != want {
			t.Errorf("node-a's pod: runtime got %s, want (API pod) %s", got, want)
		}
		req = kubeletSandbox(t, eng, theirs)
		fromPod, want := apiAndSandbox(t, eng, theirs, req)
		if got := sandboxGot(t, s.client, s.runtime, req, "node-b's pod"); got != want {
			t.Errorf("node-b's pod: runtime got %s, want (sandbox config) %s; the API pod would give %s", got, want, fromPod)
		}
		if n := s.counter(t, "dnsconfigurer_cri_pod_lookups_total", map[string]string{"result": "hit"}); n != 1 {
			t.Errorf("pod_lookups_total{hit} = %v, want 1", n)
		}

		big := createPod(t, admin, ns, overLimitPod("big"))
		req = kubeletSandbox(t, eng, big)
		if err := runSandbox(s.client, req); err != nil {
			t.Fatalf("RunPodSandbox, trimmed: %v", err)
		}
		checkTrimEvents(t, admin, big, 1, waitBound)

		podRequests := 0
		for _, r := range s.requests.All() {
			if r.Err != nil || r.Status >= 400 {
				t.Errorf("shim request refused or failed: %v", r)
			}
			if onResource(r.Path, "pods") {
				podRequests++
				if q, _ := url.ParseQuery(r.Query); q.Get("fieldSelector") != "spec.nodeName="+node {
					t.Errorf("shim pod request without fieldSelector spec.nodeName=%s: %v", node, r)
				}
			}
		}
		if podRequests == 0 {
			t.Error("no pod requests recorded")
		}
	})

	t.Run("command", func(t *testing.T) {
		s := startShimCommand(t, kubeletConf)
		checkShimCommand(t, s, admin, cmdNS)
		s.stop(t)
	})

	t.Run("service account", func(t *testing.T) {
		r := apiserver.LoadRBAC(t, rbacFile)
		r.Apply(t, admin)
		saCfg, err := cp.ServiceAccountConfig(ctx, r.Account.Namespace, r.Account.Name)
		if err != nil {
			t.Fatal(err)
		}
		asSA := newClient(t, saCfg)
		// Every pod, on every node, whole.
		list, err := asSA.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list every pod: %v", err)
		}
		got := podUIDs(list.Items)
		for _, p := range []*corev1.Pod{mine, theirs} {
			if !slices.Contains(got, p.UID) {
				t.Errorf("list every pod: %s/%s (node %s) missing", p.Namespace, p.Name, p.Spec.NodeName)
			}
		}
		i := slices.IndexFunc(list.Items, func(p corev1.Pod) bool { return p.UID == theirs.UID })
		if i < 0 || !slices.ContainsFunc(list.Items[i].Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Value == literal }) {
			t.Errorf("list every pod: node-b's pod without its literal env value %q", literal)
		}
		other := fields.OneTermEqualSelector("spec.nodeName", otherNode).String()
		if l, err := asSA.CoreV1().Pods(otherNS).List(ctx, metav1.ListOptions{FieldSelector: other}); err != nil || len(l.Items) != 1 {
			t.Errorf("list with %s: %v (%d pods), want node-b's pod", other, err, len(l.Items))
		}
		w, err := asSA.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("watch every pod: %v", err)
		} else {
			w.Stop()
		}
		// No Secret, not even one a pod references; no single pod.
		if _, err := asSA.CoreV1().Secrets(otherNS).Get(ctx, "theirs", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("get a Secret: %v, want Forbidden", err)
		}
		if _, err := asSA.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("list Secrets: %v, want Forbidden", err)
		}
		if _, err := asSA.CoreV1().Pods(ns).Get(ctx, mine.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("get a pod: %v, want Forbidden", err)
		}
		// Events about any pod.
		if _, err := asSA.CoreV1().Events(otherNS).Create(ctx, podEvent(theirs), metav1.CreateOptions{}); err != nil {
			t.Errorf("create an Event about node-b's pod: %v", err)
		}
	})
}

// podUIDs are the UIDs of pods, sorted.
func podUIDs(pods []corev1.Pod) []types.UID {
	var uids []types.UID
	for _, p := range pods {
		uids = append(uids, p.UID)
	}
	slices.Sort(uids)
	return uids
}

// podEvent is a Warning Event about pod, as the shim's recorder makes one.
func podEvent(pod *corev1.Pod) *corev1.Event {
	now := metav1.Now()
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1",
			Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Type: corev1.EventTypeWarning, Reason: "DNSConfigForming", Message: "test",
		Source: corev1.EventSource{Component: "dnsconfigurer-shim", Host: node}, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
	}
}

// eventually retries fn until it succeeds, failing the test after
// waitBound with its last error.
func eventually(t *testing.T, fn func() error, what string) {
	t.Helper()
	testkit.WaitFor(t, waitBound, func() error {
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
		return nil
	})
}

// clientCA is a CA the test's kube-apiserver trusts for client
// certificates (--client-ca-file), as kubeadm's cluster CA signs kubelets'.
type clientCA struct {
	*testkit.CA
	file string
}

func newClientCA(t *testing.T) *clientCA {
	t.Helper()
	ca := testkit.NewCA(t)
	file := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(file, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return &clientCA{CA: ca, file: file}
}

// kubeletConf writes node's kubelet credentials as a kubeadm node has
// them, under a temporary directory: a client certificate with CN
// system:node:<node> and O system:nodes (what kubelet's CSR is signed
// with), certificate and key in one file pki/kubelet-client-<stamp>.pem,
// the symlink pki/kubelet-client-current.pem to it, and kubelet.conf,
// whose user names that symlink as client-certificate and client-key and
// whose cluster embeds the API server's CA. It returns kubelet.conf's path.
func (ca *clientCA) kubeletConf(t *testing.T, cp *apiserver.ControlPlane, node string) string {
	t.Helper()
	certPEM, keyPEM := ca.NodeClient(t, node)
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if err := os.Mkdir(pki, 0o755); err != nil {
		t.Fatal(err)
	}
	stamped := fmt.Sprintf("kubelet-client-%s.pem", time.Now().Format("2006-01-02-15-04-05"))
	data := append(certPEM, keyPEM...)
	if err := os.WriteFile(filepath.Join(pki, stamped), data, 0o600); err != nil {
		t.Fatal(err)
	}
	current := filepath.Join(pki, "kubelet-client-current.pem")
	if err := os.Symlink(stamped, current); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: cp.Host(), CertificateAuthorityData: cp.CAData()}
	kc.AuthInfos["system:node:"+node] = &clientcmdapi.AuthInfo{ClientCertificate: current, ClientKey: current}
	kc.Contexts["system:node:"+node+"@kubernetes"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "system:node:" + node}
	kc.CurrentContext = "system:node:" + node + "@kubernetes"
	path := filepath.Join(dir, "kubelet.conf")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadKubeconfig reads a kubeconfig as the shim's --kubeconfig does.
func loadKubeconfig(t *testing.T, path string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	return cfg
}

// inlineCerts reads cfg's client certificate and key files into the
// config: the same credential, without the certificate-reloading
// goroutine client-go starts for files, which outlives a test's clients.
func inlineCerts(t *testing.T, cfg *rest.Config) *rest.Config {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	var err error
	if cfg.CertData, err = os.ReadFile(cfg.CertFile); err != nil {
		t.Fatal(err)
	}
	if cfg.KeyData, err = os.ReadFile(cfg.KeyFile); err != nil {
		t.Fatal(err)
	}
	cfg.CertFile, cfg.KeyFile = "", ""
	return cfg
}
