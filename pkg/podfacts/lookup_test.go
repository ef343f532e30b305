package podfacts

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func testPod(name, uid, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: types.UID(uid),
			Annotations: map[string]string{policy.AnnotationDNSPolicy: "ClusterFirstWithAutopath", "big": strings.Repeat("x", 1000)},
			Labels:      map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst, Hostname: "h", Subdomain: "s",
			Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func TestPodInformer(t *testing.T) {
	client := fake.NewClientset(testPod("known", "uid-known", "node-1"))
	p, err := NewPodInformer(client, "node-1", testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Start(t, p.Run)
	ctx := context.Background()

	lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	in, ok := p.Pod(lctx, "uid-known")
	lcancel()
	if !ok {
		t.Fatal("known pod not found")
	}
	want := policy.Input{Name: "known", Namespace: "team", UID: "uid-known", Policy: policy.ClusterFirst,
		PolicyAnnotation: "ClusterFirstWithAutopath", Hostname: "h", Subdomain: "s"}
	if in.Name != want.Name || in.Namespace != want.Namespace || in.UID != want.UID || in.Policy != want.Policy ||
		in.PolicyAnnotation != want.PolicyAnnotation || in.Hostname != want.Hostname || in.Subdomain != want.Subdomain {
		t.Errorf("Pod = %+v, want %+v", in, want)
	}
	// The store holds slim pods.
	for _, obj := range p.informer.GetStore().List() {
		pod := obj.(*corev1.Pod)
		if len(pod.Spec.Containers) != 0 || len(pod.Labels) != 0 || len(pod.Annotations) != 1 || pod.Status.Phase != "" {
			t.Errorf("stored pod not slimmed: %+v", pod)
		}
	}

	// A pod created while a lookup waits is found by that lookup.
	found := make(chan bool, 1)
	go func() {
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		defer lcancel()
		_, ok := p.Pod(lctx, "uid-late")
		found <- ok
	}()
	// It waits rather than giving up at once.
	testkit.Holds(t, 20*time.Millisecond, func() error {
		if len(found) > 0 {
			return errors.New("the lookup returned before the pod was created")
		}
		return nil
	})
	if _, err := client.CoreV1().Pods("team").Create(ctx, testPod("late", "uid-late", "node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !<-found {
		t.Error("pod created during the wait not found")
	}

	// An unknown pod: the lookup gives up when its context ends.
	lctx, lcancel = context.WithTimeout(ctx, 50*time.Millisecond)
	begin := time.Now()
	_, ok = p.Pod(lctx, "uid-never")
	lcancel()
	if ok || time.Since(begin) > 2*time.Second {
		t.Errorf("unknown pod: found %v after %v", ok, time.Since(begin))
	}
	// A static pod is found by its own UID through its mirror pod.
	mirror := testPod("etcd-node-1", "uid-mirror", "node-1")
	mirror.Annotations[configMirrorAnnotation] = "static-hash"
	if _, err := client.CoreV1().Pods("team").Create(ctx, mirror, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lctx, lcancel = context.WithTimeout(ctx, 5*time.Second)
	in, ok = p.Pod(lctx, "static-hash")
	lcancel()
	if !ok || in.Name != "etcd-node-1" || in.UID != "static-hash" {
		t.Errorf("static pod lookup = %+v, %v", in, ok)
	}
	if _, err := NewPodInformer(client, "", nil); err == nil {
		t.Error("NewPodInformer without a node succeeded")
	}
}

// startInformer runs an informer on node over client's pods until the test
// ends and waits for its first list.
func startInformer(t *testing.T, client *fake.Clientset, node string, opts ...InformerOption) *PodInformer {
	t.Helper()
	p, err := NewPodInformer(client, node, testkit.Logger(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	testkit.RunSynced(t, p.Run, p.HasSynced)
	return p
}

// nsPod is a pod in namespace ns with uid on node; mirror, if set, is its
// kubernetes.io/config.mirror annotation.
func nsPod(ns, name, uid, node, mirror string) *corev1.Pod {
	pod := testPod(name, uid, node)
	pod.Namespace = ns
	pod.Spec.Hostname = "host-of-" + name
	if mirror != "" {
		pod.Annotations[configMirrorAnnotation] = mirror
	}
	return pod
}

// TestPodLookupIdentity is the attack of a pod that carries another pod's
// UID (or a static pod's hash) as its mirror annotation, and the rules
// that stop it: node, namespace/name, static or not, ambiguity.
func TestPodLookupIdentity(t *testing.T) {
	client := fake.NewClientset(
		nsPod("team", "web", "uid-web", "node-1", ""),
		nsPod("tenant", "evil-web", "uid-evil-1", "node-1", "uid-web"),                      // claims web
		nsPod("kube-system", "etcd-node-1", "uid-mirror-1", "node-1", "hash-etcd"),          // a real mirror pod
		nsPod("tenant", "etcd-node-1", "uid-evil-2", "node-1", "hash-etcd"),                 // claims the static pod, same name
		nsPod("tenant", "evil-late", "uid-evil-3", "node-1", "uid-late"),                    // claims a pod not in the cache yet
		nsPod("tenant", "evil-static", "uid-evil-4", "node-1", "hash-sched"),                // claims a static pod with no mirror yet
		nsPod("kube-system", "etcd-node-2", "uid-mirror-2", "node-2", "hash-etcd-2"),        // another node's mirror pod
		nsPod("team", "elsewhere", "uid-elsewhere", "node-2", ""),                           // another node's pod
		nsPod("kube-system", "kube-proxy-x", "uid-api-hash", "node-1", "hash-kube-proxy-x"), // a mirror annotation on a pod whose sandbox is from the API
	)
	reg := prometheus.NewRegistry()
	p := startInformer(t, client, "node-1", InformerRegistry(reg))
	// The fake clientset ignores field selectors (the node checks above
	// stand in for them here); the informer must still ask for them.
	listed := 0
	for _, a := range client.Actions() {
		if r, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "pods" {
			listed++
			if got := r.GetListRestrictions().Fields.String(); got != "spec.nodeName=node-1" {
				t.Errorf("%s pods with field selector %q, want spec.nodeName=node-1", a.GetVerb(), got)
			}
		}
	}
	if listed == 0 {
		t.Error("the informer did not list pods")
	}

	tests := []struct {
		name   string
		sb     SandboxPod
		want   string // namespace/name, "" for no match
		reason string // rejected_total reason counted, "" for none
	}{
		{"API pod by its UID", SandboxPod{"team", "web", "uid-web", false}, "team/web", ""},
		{"static pod through its mirror", SandboxPod{"kube-system", "etcd-node-1", "hash-etcd", true}, "kube-system/etcd-node-1", ""},
		{"API pod not cached, another claims it", SandboxPod{"team", "late", "uid-late", false}, "", rejectNotStatic},
		{"static pod without mirror, another claims it", SandboxPod{"kube-system", "kube-scheduler-node-1", "hash-sched", true}, "", rejectIdentity},
		{"static pod of another node", SandboxPod{"kube-system", "etcd-node-2", "hash-etcd-2", true}, "", rejectNode},
		{"API pod of another node", SandboxPod{"team", "elsewhere", "uid-elsewhere", false}, "", rejectNode},
		{"name differs from the sandbox", SandboxPod{"team", "not-web", "uid-web", false}, "", rejectIdentity},
		{"namespace differs from the sandbox", SandboxPod{"other", "web", "uid-web", false}, "", rejectIdentity},
		{"static sandbox, API pod has the UID", SandboxPod{"kube-system", "kube-proxy-x", "uid-api-hash", true}, "", rejectNotStatic},
		{"unknown", SandboxPod{"team", "ghost", "uid-ghost", false}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := testutil.ToFloat64(p.rejected.WithLabelValues(tt.reason))
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // the cache is synced: do not wait
			in, ok := p.PodFor(ctx, tt.sb)
			got := ""
			if ok {
				got = in.Namespace + "/" + in.Name
				if in.UID != tt.sb.UID {
					t.Errorf("UID = %q, want the sandbox's %q", in.UID, tt.sb.UID)
				}
			}
			if got != tt.want {
				t.Errorf("PodFor(%+v) = %q, want %q", tt.sb, got, tt.want)
			}
			if tt.reason != "" {
				if d := testutil.ToFloat64(p.rejected.WithLabelValues(tt.reason)) - before; d != 1 {
					t.Errorf("rejected_total{reason=%q} grew by %v, want 1", tt.reason, d)
				}
			}
		})
	}

	// Pod (UID only) prefers the API pod with the UID, and finds no match
	// when two mirror pods claim a static pod.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if in, ok := p.Pod(ctx, "uid-web"); !ok || in.Name != "web" {
		t.Errorf("Pod(uid-web) = %s/%s, %v; want team/web", in.Namespace, in.Name, ok)
	}
	before := testutil.ToFloat64(p.rejected.WithLabelValues(rejectAmbiguous))
	if in, ok := p.Pod(ctx, "hash-etcd"); ok {
		t.Errorf("Pod(hash-etcd) = %s/%s with two mirror pods claiming it", in.Namespace, in.Name)
	}
	if d := testutil.ToFloat64(p.rejected.WithLabelValues(rejectAmbiguous)) - before; d != 1 {
		t.Errorf("ambiguous lookups counted %v, want 1", d)
	}
	if in, ok := p.Pod(ctx, "hash-etcd-2"); ok {
		t.Errorf("Pod(hash-etcd-2) = %s/%s, a mirror pod of another node", in.Namespace, in.Name)
	}
}
