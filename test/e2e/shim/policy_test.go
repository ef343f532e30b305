package shim_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/cri"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/testpod"
)

const autopath = string(policy.ClusterFirstWithAutopath)

// testPods are one pod per dnsPolicy, autopath and hostNetwork included.
func testPods() []*corev1.Pod {
	pod := func(name string, dnsPolicy corev1.DNSPolicy, mutate ...func(*corev1.Pod)) *corev1.Pod {
		return testpod.New(name, len(name)*1000+int(name[0]), dnsPolicy, containerd.TestImage, mutate...)
	}
	fqdn := true
	return []*corev1.Pod{
		pod("cluster-first", corev1.DNSClusterFirst, func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web-0", "web" }),
		pod("cluster-first-config", corev1.DNSClusterFirst, testpod.WithConfig),
		pod("autopath", corev1.DNSClusterFirst, testpod.Autopath),
		pod("autopath-config", corev1.DNSClusterFirst, testpod.Autopath, testpod.WithConfig),
		pod("default", corev1.DNSDefault),
		pod("default-config", corev1.DNSDefault, testpod.WithConfig),
		pod("none", corev1.DNSNone, testpod.OnlyConfig),
		pod("fqdn", corev1.DNSClusterFirst, func(p *corev1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "db-0", "db", &fqdn
		}),
		pod("hostnet-with-hostnet", corev1.DNSClusterFirstWithHostNet, testpod.HostNetwork),
		pod("hostnet-cluster-first", corev1.DNSClusterFirst, testpod.HostNetwork),
		pod("hostnet-autopath", corev1.DNSClusterFirstWithHostNet, testpod.HostNetwork, testpod.Autopath),
	}
}

// kubeletView is the pod as kubelet sees it: kubelet does not know the
// autopath annotation, so its DNS is render's without it.
func kubeletView(pod *corev1.Pod) *corev1.Pod {
	k := pod.DeepCopy()
	delete(k.Annotations, policy.AnnotationDNSPolicy)
	return k
}

// sandboxSpec is the sandbox config kubelet sends for pod, with kubelet's
// DNS and hostname; annotations are the pod's (kubelet copies them) unless
// dropAnnotations.
func sandboxSpec(t *testing.T, pod *corev1.Pod, dropAnnotations bool) containerd.PodSpec {
	k := render(t, kubeletView(pod))
	spec := containerd.PodSpec{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), HostNetwork: pod.Spec.HostNetwork,
		Hostname: k.Hostname, DNS: k.DNSConfig()}
	if !dropAnnotations {
		spec.Annotations = pod.Annotations
	}
	return spec
}

// TestPolicies runs a pod of each dnsPolicy through the shim and checks
// that the container's /etc/resolv.conf and hostname are what `dnsconfigurer
// render` gives for the pod. The binary shim has no API server and reads
// the sandbox config; the in-process shim gets the pods from an informer
// (a fake clientset) and is sent sandbox configs without the pod
// annotations, so autopath can only come from the API server.
func TestPolicies(t *testing.T) {
	h := containerd.Start(t, containerd.Options{HostResolvConf: testkit.HostResolvConf})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pods := testPods()
	machine, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}

	bin := startShim(t, h)
	api, _ := startInProcessShim(t, ctx, h, pods)
	for _, via := range []struct {
		name   string
		socket string
		api    bool
	}{{"binary", bin.Socket, false}, {"apiserver", api, true}} {
		c := h.Dial(via.socket)
		for _, pod := range pods {
			t.Run(via.name+"/"+pod.Name, func(t *testing.T) {
				want := render(t, pod)
				spec := sandboxSpec(t, pod, via.api)
				if !via.api {
					// Another UID than the informer's pods, so nothing could
					// come from elsewhere.
					spec.UID = spec.UID[:len(spec.UID)-2] + "b1"
				}
				sb, err := c.RunPod(ctx, spec)
				if err != nil {
					t.Fatal(err)
				}
				defer c.RemovePod(context.WithoutCancel(ctx), sb.ID)
				ctr, got, err := c.StartResolvConf(ctx, sb, "main")
				if err != nil {
					t.Fatal(err)
				}
				if wantResolv := containerd.ResolvConfFor(want.DNSConfig()); got != wantResolv {
					t.Errorf("/etc/resolv.conf =\n%s\nwant (render)\n%s", got, wantResolv)
				}
				host, err := c.Hostname(ctx, ctr.ID)
				if err != nil {
					t.Fatal(err)
				}
				wantHost := want.Hostname
				if pod.Spec.HostNetwork {
					wantHost = machine
				}
				if host != wantHost {
					t.Errorf("hostname = %q, want %q", host, wantHost)
				}
				if strings.Contains(pod.Name, "autopath") && !pod.Spec.HostNetwork || pod.Name == "hostnet-autopath" {
					if !strings.Contains(got, "search.team.cluster.local.ap.k8s.io") {
						t.Errorf("autopath pod without the autopath search: %q", got)
					}
				}
			})
		}
	}
	m := bin.metrics(t)
	if v := m[`dnsconfigurer_cri_sandboxes_total{outcome="rewritten",source="sandbox"}`]; v != 3 {
		t.Errorf("binary shim: rewritten sandboxes = %v, want 3 (the autopath pods)", v)
	}
	if v, ok := m[`dnsconfigurer_cri_rewrite_errors_total{reason="compute"}`]; ok {
		t.Errorf("binary shim: rewrite errors %v", v)
	}
}

// startInProcessShim serves pkg/cri in front of h with a pod informer on a
// fake clientset holding pods, and returns its socket and the node
// resolver file it watches.
func startInProcessShim(t *testing.T, ctx context.Context, h *containerd.Harness, pods []*corev1.Pod) (socket string, host *hostresolv.Watcher) {
	t.Helper()
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(testkit.HostResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	log := slog.New(slog.DiscardHandler)
	w, err := hostresolv.Watch(ctx, resolv, hostresolv.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(testkit.NodeWithNodeLocal())
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inf, err := podfacts.NewPodInformer(client, "node-1", log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := cri.New(h.Endpoint, eng, w, cri.WithLogger(log), cri.WithPodLookup(inf), cri.WithLookupTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "shim.sock")
	l, err := cri.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { inf.Run(ctx); done <- struct{}{} }()
	go func() { _ = srv.Serve(ctx, l); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return sock, w
}
