// Package podpolicy_test shows the cluster DNS policy of issue 18 against a
// real kube-apiserver (test/apiserver): the shim's pod lookup (pkg/podfacts'
// pod informer with the metadata-only namespace informer, wired as
// `dnsconfigurer shim --namespace-labels` wires them, with the credentials
// of deploy/shim/rbac.yaml's ClusterRole plus its commented namespaces
// rule) gives a pod its namespace's dnsconfigurer.io/dns-policy label, a
// label change reaches the pods created after it, and the webhook warns
// what a pod gets under the cluster default. They skip when the
// kube-apiserver and etcd binaries are absent (see test/testbin/build.sh):
//
//	export DNSCONFIGURER_TESTBIN="$(test/testbin/build.sh)"
//	go test ./test/integration/podpolicy/
package podpolicy_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/cri"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/webhook"
	"github.com/dnsconfigurer/dnsconfigurer/test/admission"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

var controlPlane *apiserver.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(apiserver.RunTests(m, &controlPlane))
}

const (
	node           = "node-a"
	waitBound      = 20 * time.Second
	hostResolvConf = "nameserver 192.0.2.53\nsearch corp.example\n"
	rbacFile       = "../../../deploy/shim/rbac.yaml"
	label          = policy.AnnotationDNSPolicy
)

var (
	kubeletNode = testkit.NodeWithNodeLocal()
	testHost    = policy.Host{Nameservers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}}
)

// shimRole is deploy/shim/rbac.yaml's ClusterRole, decoded strictly, with
// its commented namespaces rule uncommented when namespaces is set.
func shimRole(t *testing.T, namespaces bool) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(rbacFile)
	if err != nil {
		t.Fatal(err)
	}
	if namespaces {
		rule := regexp.MustCompile(`(?m)^  # (- apiGroups: .*|  resources: \["namespaces"\]|  verbs: .*)$`)
		if n := len(rule.FindAll(data, -1)); n != 3 {
			t.Fatalf("%s: %d lines of the commented namespaces rule, want 3", rbacFile, n)
		}
		data = rule.ReplaceAll(data, []byte("  $1"))
	}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		if !bytes.Contains(doc, []byte("kind: ClusterRole\n")) {
			continue
		}
		var role rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(doc, &role); err != nil {
			t.Fatalf("%s: %v", rbacFile, err)
		}
		return &role
	}
	t.Fatalf("%s: no ClusterRole", rbacFile)
	return nil
}

// shimCredentials binds role (renamed for the test) to a ServiceAccount of
// ns and returns a rest.Config acting as it.
func shimCredentials(t *testing.T, cp *apiserver.ControlPlane, ns string, role *rbacv1.ClusterRole) *rest.Config {
	t.Helper()
	admin := cp.Client()
	role.Name = "podpolicy-" + ns
	if _, err := admin.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "dnsconfigurer-shim", Namespace: ns}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	return cp.ConfigAs("system:serviceaccount:"+ns+":dnsconfigurer-shim", "system:serviceaccounts", "system:serviceaccounts:"+ns)
}

// fakeRuntime records the RunPodSandboxRequests the shim forwards.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu   sync.Mutex
	reqs map[string]*runtimeapi.PodSandboxConfig // by pod UID
}

func (f *fakeRuntime) Version(_ context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: req.Version, RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs[req.GetConfig().GetMetadata().GetUid()] = req.GetConfig()
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: "sandbox-" + req.GetConfig().GetMetadata().GetUid()}, nil
}

// shim is an in-process `dnsconfigurer shim --namespace-labels`.
type shim struct {
	client     runtimeapi.RuntimeServiceClient
	runtime    *fakeRuntime
	pods       *podfacts.PodInformer
	namespaces *podfacts.NamespaceInformer
}

// startShim runs the shim with cfg's credentials and eng's policy in front
// of a fake runtime, as cmd/dnsconfigurer wires it (agentns.go: the
// metadata client, the namespace informer, the pod informer with
// WithNamespaces).
func startShim(t *testing.T, cfg *rest.Config, eng *policy.Engine) *shim {
	t.Helper()
	dir, err := os.MkdirTemp("", "podpolicy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	rtPath := filepath.Join(dir, "runtime.sock")
	l, err := net.Listen("unix", rtPath)
	if err != nil {
		t.Fatal(err)
	}
	rt := &fakeRuntime{reqs: map[string]*runtimeapi.PodSandboxConfig{}}
	gs := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(gs, rt)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shim log:\n%s", logs.String())
		}
	})

	client := apiserver.NewClient(t, cfg)
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	watcher, err := hostresolv.Watch(ctx, resolv, hostresolv.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	namespaces, err := podfacts.NewNamespaceInformer(meta, log)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := podfacts.NewPodInformer(client, node, log, podfacts.WithNamespaces(namespaces))
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { namespaces.Run(ctx) })
	wg.Go(func() { pods.Run(ctx) })
	srv, err := cri.New("unix://"+rtPath, eng, watcher, cri.WithPodLookup(pods), cri.WithLookupTimeout(waitBound), cri.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "shim.sock")
	sl, err := cri.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { srv.Serve(ctx, sl) })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &shim{client: runtimeapi.NewRuntimeServiceClient(conn), runtime: rt, pods: pods, namespaces: namespaces}
}

// run creates pod in ns on the shim's node, sends the RunPodSandbox kubelet
// would send (kubelet's DNS: no annotation, label or cluster policy) and
// returns the DNS config the runtime got.
func (s *shim) run(t *testing.T, client kubernetes.Interface, ns string, pod *corev1.Pod) *runtimeapi.DNSConfig {
	t.Helper()
	pod.Namespace, pod.Spec.NodeName = ns, node
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}}
	pod, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := policy.New(kubeletNode)
	if err != nil {
		t.Fatal(err)
	}
	in := podspec.Input(pod)
	in.PolicyAnnotation = ""
	res, err := kubelet.Compute(in, testHost)
	if err != nil {
		t.Fatal(err)
	}
	annotations := map[string]string{"kubernetes.io/config.source": "api"}
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	req := &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: ns, Uid: string(pod.UID)},
		Hostname:    res.Hostname,
		DnsConfig:   &runtimeapi.DNSConfig{Servers: res.Nameservers, Searches: res.Searches, Options: res.Options},
		Annotations: annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD}}},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 2*waitBound)
	defer cancel()
	if _, err := s.client.RunPodSandbox(ctx, req); err != nil {
		t.Fatalf("RunPodSandbox %s/%s: %v", ns, pod.Name, err)
	}
	s.runtime.mu.Lock()
	defer s.runtime.mu.Unlock()
	return s.runtime.reqs[string(pod.UID)].GetDnsConfig()
}

// waitLabel waits until the shim's namespace informer has value for ns.
func (s *shim) waitLabel(t *testing.T, ns, value string) {
	t.Helper()
	testkit.WaitEqual(t, waitBound, "namespace "+ns+"'s label", func() string {
		ctx, cancel := context.WithTimeout(t.Context(), waitBound)
		defer cancel()
		return s.namespaces.NamespacePolicy(ctx, ns)
	}, value)
}

func setLabel(t *testing.T, client kubernetes.Interface, ns, value string) {
	t.Helper()
	patch := `{"metadata":{"labels":{"` + label + `":null}}}`
	if value != "" {
		patch = `{"metadata":{"labels":{"` + label + `":"` + value + `"}}}`
	}
	if _, err := client.CoreV1().Namespaces().Patch(t.Context(), ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func autopathSearch(ns string) []string { return []string{"search." + ns + ".cluster.local.ap.k8s.io"} }

func clusterSearch(ns string) []string {
	return []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}
}

// TestNamespaceLabelThroughShim: with no cluster default and ndots 2, the
// shim gives pods of a namespace labelled ClusterFirstWithAutopath the
// autopath search path, a pod's annotation ClusterFirst wins over the
// label, an unlabelled namespace stays ClusterFirst, removing the label
// reaches the next pod, and labelling a namespace ClusterFirst opts it
// out of a cluster default of autopath.
func TestNamespaceLabelThroughShim(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	labelled, plain := cp.Namespace(t), cp.Namespace(t)
	admin := cp.Client()
	setLabel(t, admin, labelled, string(policy.ClusterFirstWithAutopath))

	two := 2
	n := kubeletNode
	n.Ndots = &two
	eng, err := policy.New(n)
	if err != nil {
		t.Fatal(err)
	}
	s := startShim(t, shimCredentials(t, cp, labelled, shimRole(t, true)), eng)
	pod := func(name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Spec: corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst}}
	}
	check := func(what string, got *runtimeapi.DNSConfig, servers, searches []string) {
		t.Helper()
		if !slices.Equal(got.GetServers(), servers) || !slices.Equal(got.GetSearches(), searches) || !slices.Equal(got.GetOptions(), []string{"ndots:2"}) {
			t.Errorf("%s: runtime got %v, want servers %q, searches %q, options [ndots:2]", what, got, servers, searches)
		}
	}
	check("labelled namespace", s.run(t, admin, labelled, pod("a", nil)), []string{"169.254.20.10"}, autopathSearch(labelled))
	check("annotation opts out", s.run(t, admin, labelled, pod("b", map[string]string{label: "ClusterFirst"})), []string{"10.96.0.10"}, clusterSearch(labelled))
	check("unlabelled namespace", s.run(t, admin, plain, pod("c", nil)), []string{"10.96.0.10"}, clusterSearch(plain))

	setLabel(t, admin, labelled, "")
	s.waitLabel(t, labelled, "")
	check("label removed", s.run(t, admin, labelled, pod("d", nil)), []string{"10.96.0.10"}, clusterSearch(labelled))
	setLabel(t, admin, plain, string(policy.ClusterFirstWithAutopath))
	s.waitLabel(t, plain, string(policy.ClusterFirstWithAutopath))
	check("label added", s.run(t, admin, plain, pod("e", nil)), []string{"169.254.20.10"}, autopathSearch(plain))

	// A cluster default of autopath, and a namespace labelled ClusterFirst
	// opting out of it.
	n.DefaultPolicy = policy.ClusterFirstWithAutopath
	eng, err = policy.New(n)
	if err != nil {
		t.Fatal(err)
	}
	optOut := cp.Namespace(t)
	setLabel(t, admin, optOut, "ClusterFirst")
	s2 := startShim(t, shimCredentials(t, cp, optOut, shimRole(t, true)), eng)
	check("cluster default", s2.run(t, admin, labelled, pod("f", nil)), []string{"169.254.20.10"}, autopathSearch(labelled))
	check("namespace opts out", s2.run(t, admin, optOut, pod("g", nil)), []string{"10.96.0.10"}, clusterSearch(optOut))
}

// TestNamespaceLabelsWithoutRBAC: deploy/shim/rbac.yaml as shipped (the
// namespaces rule commented out) refuses the namespace list; the shim
// does not wait for the labels and pods get the cluster default.
func TestNamespaceLabelsWithoutRBAC(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	admin := cp.Client()
	setLabel(t, admin, ns, "ClusterFirst")
	n := kubeletNode
	n.DefaultPolicy = policy.ClusterFirstWithAutopath
	eng, err := policy.New(n)
	if err != nil {
		t.Fatal(err)
	}
	s := startShim(t, shimCredentials(t, cp, ns, shimRole(t, false)), eng)
	start := time.Now()
	got := s.run(t, admin, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst}})
	if !slices.Equal(got.GetSearches(), autopathSearch(ns)) {
		t.Errorf("runtime got %v, want the cluster default's autopath search %q (the label is unreadable)", got, autopathSearch(ns))
	}
	if s.namespaces.HasSynced() {
		t.Error("the namespace informer synced without the namespaces rule")
	}
	if d := time.Since(start); d > waitBound {
		t.Errorf("the sandbox took %v: the lookup waited for the refused namespace list", d)
	}
}

// TestWebhookPolicyWarning: behind the API server, the webhook with a
// cluster default of autopath and ndots 2 (and namespaceLabels) warns a
// ClusterFirst pod's creator what it gets; a pod that opts out by
// annotation, and a Default pod, get no such warning.
func TestWebhookPolicyWarning(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	two := 2
	n := kubeletNode
	n.DefaultPolicy, n.Ndots = policy.ClusterFirstWithAutopath, &two
	eng, err := policy.New(n)
	if err != nil {
		t.Fatal(err)
	}
	url, caBundle := admission.Serve(t, &webhook.Reviewer{Default: webhook.Pool{Engine: eng, Host: testHost}, ClusterPolicy: true, NamespaceLabels: true})
	admission.Register(t, cp.Client(), ns, url, caBundle)

	client, got := admission.WarnedClient(t, cp.Config())
	create := func(name string, mod func(*corev1.Pod)) []string {
		t.Helper()
		p := admission.Pod(name)
		if mod != nil {
			mod(p)
		}
		got.Take()
		if _, err := client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		var ours []string
		for _, w := range got.Take() {
			if strings.HasPrefix(w, webhook.WarningPrefix) {
				ours = append(ours, w)
			}
		}
		return ours
	}
	ws := create("web", nil)
	want := "dnsconfigurer: cluster DNS policy: this pod gets ClusterFirstWithAutopath (search search." + ns + ".cluster.local.ap.k8s.io) and option ndots:2; " +
		"opt out: annotation dnsconfigurer.io/dns-policy=ClusterFirst, dnsConfig.options ndots; " +
		`a dnsconfigurer.io/dns-policy label on namespace "` + ns + `" wins (not read by the webhook)`
	if !slices.Equal(ws, []string{want}) {
		t.Errorf("warnings %q\nwant %q", ws, want)
	}
	if ws := create("opted-out", func(p *corev1.Pod) {
		p.Annotations = map[string]string{label: "ClusterFirst"}
		ndots := "5"
		p.Spec.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}}}
	}); len(ws) != 0 {
		t.Errorf("opted-out pod: warnings %q", ws)
	}
	if ws := create("default", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }); len(ws) != 0 {
		t.Errorf("Default pod: warnings %q", ws)
	}
}
