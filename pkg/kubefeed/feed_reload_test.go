package kubefeed

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// TestFeedRewatch: a reload to pods: verified starts the API
// server's informers again with the pods; a reload away from it and back
// starts from an empty store, so a pod deleted while the pods were not
// watched does not come back; a reload that changes only the ttl
// publishes the records again without a restart. Each start's first
// publish, and only it, runs through FirstPublish.
func TestFeedRewatch(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.9", PodIPs: []corev1.PodIP{{IP: "10.1.0.9"}}}},
	)
	config := func(pods string, ttl int) *v1alpha1.ServerConfiguration {
		c := &v1alpha1.ServerConfiguration{Pods: pods, TTL: &ttl}
		c.SetDefaults()
		return c
	}
	cfg := config(v1alpha1.PodsDisabled, 5)
	r, st := newTestFeed(t, client, cfg)
	var firsts atomic.Int32
	r.FirstPublish = func(publish func()) {
		firsts.Add(1)
		publish()
	}
	wantFirsts := func(step string, n int32) {
		t.Helper()
		if got := firsts.Load(); got != n {
			t.Errorf("after %s: %d first publishes, want %d", step, got, n)
		}
	}
	ctx := runFeed(t, r)
	lookup := func(name string) (*store.Node, bool) {
		if s := st.Snapshot(); s != nil {
			return s.Lookup(name)
		}
		return nil, false
	}
	const pod, web = "10-1-0-9.prod.pod.cluster.local.", "web.prod.svc.cluster.local."
	testkit.WaitEqual(t, 10*time.Second, "web served (the first sync)", func() bool { _, ok := lookup(web); return ok }, true)
	if _, ok := lookup(pod); ok {
		t.Fatal("pods disabled: the pod's name is served")
	}
	wantFirsts("the first sync", 1)
	step := func(name string, cfg *v1alpha1.ServerConfiguration, cond func() bool) {
		t.Helper()
		if err := r.Apply(cfg); err != nil {
			t.Fatal(err)
		}
		testkit.WaitEqual(t, 10*time.Second, name+" applied", cond, true)
	}
	step("pods verified", config(v1alpha1.PodsVerified, 5), func() bool { _, ok := lookup(pod); return ok })
	wantFirsts("pods verified", 2)
	step("pods disabled", config(v1alpha1.PodsDisabled, 5), func() bool { _, ok := lookup(pod); return !ok })
	wantFirsts("pods disabled", 3)
	if err := client.CoreV1().Pods("prod").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	step("pods verified again", config(v1alpha1.PodsVerified, 6), func() bool { n, ok := lookup(web); return ok && n.TTL == 6 })
	if _, ok := lookup(pod); ok {
		t.Error("a pod deleted while pods were not watched is served again")
	}
	wantFirsts("pods verified again", 4)
	step("ttl only", config(v1alpha1.PodsVerified, 9), func() bool { n, ok := lookup(web); return ok && n.TTL == 9 })
	wantFirsts("ttl only", 4)
}

// TestFeedRewatchPodNames: the feed keeps no endpoint pod names while
// endpointPodNames is off, so a reload that turns it on watches again,
// and the endpoint is then named after its pod; turned off again, it is
// named by its address.
func TestFeedRewatchPodNames(t *testing.T) {
	ready := true
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "prod", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-0", Namespace: "prod"}}}},
	)
	config := func(podNames bool) *v1alpha1.ServerConfiguration {
		c := &v1alpha1.ServerConfiguration{EndpointPodNames: podNames}
		c.SetDefaults()
		return c
	}
	cfg := config(false)
	r, st := newTestFeed(t, client, cfg)
	runFeed(t, r)
	has := func(name string) func() bool {
		return func() bool {
			if s := st.Snapshot(); s != nil {
				_, ok := s.Lookup(name)
				return ok
			}
			return false
		}
	}
	const byIP, byPod = "10-1-0-9.web.prod.svc.cluster.local.", "web-0.web.prod.svc.cluster.local."
	testkit.WaitEqual(t, 10*time.Second, "the endpoint by its address", has(byIP), true)
	for _, on := range []bool{true, false} {
		if err := r.Apply(config(on)); err != nil {
			t.Fatal(err)
		}
		testkit.WaitEqual(t, 10*time.Second, fmt.Sprintf("endpointPodNames %v: the endpoint by its pod", on), has(byPod), on)
		if got := has(byIP)(); got == on {
			t.Errorf("endpointPodNames %v: the name by address served %v", on, got)
		}
	}
}

// newTestFeed is a feed of client's records into a new store, as cfg says.
func newTestFeed(t *testing.T, client kubernetes.Interface, cfg *v1alpha1.ServerConfiguration) (*Feed, *store.Store) {
	t.Helper()
	opts, err := StoreOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &Feed{st: st, log: slog.New(slog.DiscardHandler), client: client, watching: watchOf(cfg), rewatch: make(chan feedWatch, 1)}, st
}

// runFeed runs r until the test ends, and fails it if Run fails; the
// context is Run's.
func runFeed(t *testing.T, r *Feed) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return ctx
}
