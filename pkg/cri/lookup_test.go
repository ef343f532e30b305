package cri

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func newServerForTest(endpoint string, opts ...Option) (*Server, error) {
	eng, err := policy.New(testNode)
	if err != nil {
		return nil, err
	}
	return New(endpoint, eng, hostSnap(nil, nil, nil), opts...)
}

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
	p, err := NewPodInformer(client, "node-1", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

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
	time.Sleep(20 * time.Millisecond)
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

func TestEventRecorder(t *testing.T) {
	client := fake.NewClientset()
	rec, stop := NewEventRecorder(client, "node-1")
	defer stop()
	rec.Warning(PodRef{Namespace: "team", Name: "big", UID: "u1"}, "DNSConfigForming", "Nameserver limits were exceeded")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		list, err := client.CoreV1().Events("team").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			ev := list.Items[0]
			if ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.Name != "big" || string(ev.InvolvedObject.UID) != "u1" ||
				ev.Type != corev1.EventTypeWarning || ev.Reason != "DNSConfigForming" || ev.Source.Component != "dnsconfigurer-shim" || ev.Source.Host != "node-1" {
				t.Errorf("event = %+v", ev)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no event recorded")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
