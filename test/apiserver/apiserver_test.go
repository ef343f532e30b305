package apiserver_test

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

var controlPlane *apiserver.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(apiserver.RunTests(m, &controlPlane, apiserver.WithUser("alice", "testers")))
}

// TestObjects writes the objects the DNS server reads, the way tests must
// without controllers, and lists them back.
func TestObjects(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ctx := t.Context()
	client := cp.Client()
	ns := cp.Namespace(t)

	svc, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.10.10",
			Selector:  map[string]string{"app": "web"},
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service: %v", err)
	}
	auto, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "auto"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service: %v", err)
	}
	cidr := netip.MustParsePrefix(apiserver.ServiceCIDR)
	for _, s := range []*corev1.Service{svc, auto} {
		ip, err := netip.ParseAddr(s.Spec.ClusterIP)
		if err != nil || !cidr.Contains(ip) {
			t.Errorf("service %s cluster IP %q not in %s", s.Name, s.Spec.ClusterIP, cidr)
		}
	}

	ready := true
	_, err = client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.244.0.5"},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0"},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create endpointslice: %v", err)
	}

	pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:   "node-a",
			Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = "10.244.0.5"
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.5"}}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set pod IP: %v", err)
	}

	svcs, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list services: %v", err)
	}
	if len(svcs.Items) != 2 {
		t.Errorf("listed %d services, want 2", len(svcs.Items))
	}
	eps, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=web",
	})
	if err != nil {
		t.Fatalf("list endpointslices: %v", err)
	}
	if len(eps.Items) != 1 || eps.Items[0].Endpoints[0].Addresses[0] != "10.244.0.5" {
		t.Errorf("listed endpointslices %+v, want web-1 with 10.244.0.5", eps.Items)
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.podIP=10.244.0.5"})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != "web-0" || pods.Items[0].Status.Phase != corev1.PodRunning {
		t.Errorf("listed pods %+v, want running web-0", pods.Items)
	}
}

// TestRestartAPIServer stops the API server while an informer watches,
// checks that etcd kept the data and that the informer catches up.
func TestRestartAPIServer(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ctx := t.Context()
	client := cp.Client()
	ns := cp.Namespace(t)

	before := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}, Data: map[string]string{"k": "v"}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, before, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().ConfigMaps().Informer()
	stop := make(chan struct{})
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	factory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}

	start := time.Now()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatalf("stop apiserver: %v", err)
	}
	t.Logf("kube-apiserver stopped in %v", time.Since(start).Round(time.Millisecond))
	if _, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "before", metav1.GetOptions{}); err == nil {
		t.Error("get succeeded while the API server was stopped")
	}
	if _, ok, _ := informer.GetStore().GetByKey(ns + "/before"); !ok {
		t.Error("informer lost its cache while the API server was stopped")
	}
	start = time.Now()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatalf("start apiserver: %v", err)
	}
	t.Logf("kube-apiserver ready %v after start", time.Since(start).Round(time.Millisecond))

	got, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "before", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap after restart: %v", err)
	}
	if got.Data["k"] != "v" {
		t.Errorf("configmap after restart has data %v, want k=v", got.Data)
	}

	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, after, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap after restart: %v", err)
	}
	start = time.Now()
	testkit.WaitEqual(t, 90*time.Second, "the informer has "+ns+"/after", func() bool {
		_, ok, _ := informer.GetStore().GetByKey(ns + "/after")
		return ok
	}, true)
	t.Logf("informer caught up %v after the write", time.Since(start).Round(time.Millisecond))
}

// TestRBAC checks that token, impersonated and service account users are
// held to RBAC, and that granting a Role lets them in.
func TestRBAC(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ctx := t.Context()
	ns := cp.Namespace(t)

	alice, err := cp.UserConfig("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.UserConfig("mallory"); err == nil {
		t.Error("UserConfig for an unknown user succeeded")
	}
	sa, err := cp.ServiceAccountConfig(ctx, ns, "dns")
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]*rest.Config{
		"token":          alice,
		"impersonated":   cp.ConfigAs("bob", "viewers"),
		"serviceaccount": sa,
	}
	listPods := func(cfg *rest.Config) error {
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	}
	for name, cfg := range users {
		if err := listPods(cfg); !apierrors.IsForbidden(err) {
			t.Errorf("%s user: list pods without a role: got %v, want forbidden", name, err)
		}
	}

	admin := cp.Client()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "testers"},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "dns"},
		},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create rolebinding: %v", err)
	}
	// The RBAC authorizer reads roles through an informer: allow a moment.
	for name, cfg := range users {
		testkit.WaitFor(t, 30*time.Second, func() error {
			err := listPods(cfg)
			if err != nil && !apierrors.IsForbidden(err) {
				t.Fatalf("%s user: list pods: %v", name, err)
			}
			return err
		})
	}
}

// TestKubeconfig loads the admin kubeconfig as a binary under test would
// and checks the server reports the release build.sh stamped in.
func TestKubeconfig(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig())
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.Major != "1" || v.GitVersion == "" || v.GitVersion == "v0.0.0-master+$Format:%H$" {
		t.Errorf("server version %+v, want a release", v)
	}
	t.Logf("kube-apiserver %s", v.GitVersion)

	path := cp.Dir() + "/alice.kubeconfig"
	alice, _ := cp.UserConfig("alice")
	if err := apiserver.WriteKubeconfig(path, alice); err != nil {
		t.Fatal(err)
	}
	cfg, err = clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("load alice kubeconfig: %v", err)
	}
	client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("alice kubeconfig: list nodes: got %v, want forbidden", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestWriteKubeconfigInsecure: a config that skips TLS verification keeps
// that in the file, with its server and token.
func TestWriteKubeconfigInsecure(t *testing.T) {
	path := t.TempDir() + "/kubeconfig"
	in := &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if err := apiserver.WriteKubeconfig(path, in); err != nil {
		t.Fatal(err)
	}
	got, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != in.Host || got.BearerToken != in.BearerToken || !got.Insecure {
		t.Errorf("read back %s, token %q, insecure %v; want %s, %q, true", got.Host, got.BearerToken, got.Insecure, in.Host, in.BearerToken)
	}
}
