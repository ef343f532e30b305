package shim_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// waitInformer waits until the shim's informer has the pod with uid.
func (s *shim) waitInformer(t *testing.T, uid types.UID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if _, ok := s.informer.Pod(ctx, string(uid)); !ok {
		t.Fatalf("the informer has no pod %s after %v", uid, waitBound)
	}
}

// TestDeletedPod: a pod deleted from the API server leaves the informer, so
// a sandbox with its UID gets what the sandbox config gives; the pod created
// again under the same name has a new UID and is found by it.
func TestDeletedPod(t *testing.T) {
	_, ns, s, eng, admin := startShimTest(t, shimOptions{lookupTimeout: 500 * time.Millisecond})
	old := createPod(t, admin, ns, apiPods(ns)[0].pod)
	s.waitInformer(t, old.UID)
	// Without kubelet a bound pod is only removed with no grace period.
	zero := int64(0)
	if err := admin.CoreV1().Pods(ns).Delete(context.Background(), old.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	again := createPod(t, admin, ns, apiPods(ns)[0].pod)
	// Events arrive in order: once the new pod is in, the deletion is too.
	s.waitInformer(t, again.UID)

	req := kubeletSandbox(t, eng, old)
	if got, want := sandboxGot(t, s.client, s.runtime, req, "deleted pod"), fromSandbox(t, eng, req); got != want {
		t.Errorf("deleted pod: runtime got %s\nwant (sandbox config) %s", got, want)
	}
	req = kubeletSandbox(t, eng, again)
	if got, want := sandboxGot(t, s.client, s.runtime, req, "pod created again"), fromAPI(t, eng, again, req); got != want {
		t.Errorf("pod created again: runtime got %s\nwant (API pod) %s", got, want)
	}
}

// TestAPIServerOutage stops the kube-apiserver under a running shim. Pods
// the informer has are still found at once, and a trimmed sandbox does not
// wait for its Events; after the restart the Events queued meanwhile are
// posted and a pod created then is found (the informer watches again).
func TestAPIServerOutage(t *testing.T) {
	const timeout = 30 * time.Second
	cp, ns, s, eng, admin := startShimTest(t, shimOptions{lookupTimeout: timeout})
	pods := apiPods(ns)
	known := createPod(t, admin, ns, pods[0].pod)
	big := createPod(t, admin, ns, overLimitPod("big"))
	s.waitInformer(t, known.UID)
	s.waitInformer(t, big.UID)

	if err := cp.StopAPIServer(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	down := true
	t.Cleanup(func() {
		if down {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := cp.StartAPIServer(ctx); err != nil {
				t.Errorf("start kube-apiserver again: %v", err)
			}
		}
	})
	// Nothing in the shim may wait on the API server: well under the
	// lookup timeout on a loaded machine.
	const quick = 5 * time.Second
	for _, pod := range []*corev1.Pod{known, big} {
		req := kubeletSandbox(t, eng, pod)
		start := time.Now()
		if err := runSandbox(s.client, req); err != nil {
			t.Fatalf("RunPodSandbox %s during the outage: %v", pod.Name, err)
		}
		if took := time.Since(start); took > quick {
			t.Errorf("RunPodSandbox %s during the outage took %v", pod.Name, took)
		}
		if got, want := gotSandbox(t, s.runtime, string(pod.UID)), fromAPI(t, eng, pod, req); got != want {
			t.Errorf("%s during the outage: runtime got %s\nwant (API pod) %s", pod.Name, got, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	err := cp.StartAPIServer(ctx)
	cancel()
	if err != nil {
		t.Fatalf("start kube-apiserver again: %v", err)
	}
	down = false
	// client-go retries an Event every 10s (the first time sooner), 12
	// times.
	checkTrimEvents(t, admin, big, 1, 45*time.Second)

	after := createPod(t, admin, ns, pods[1].pod)
	req := kubeletSandbox(t, eng, after)
	start := time.Now()
	if err := runSandbox(s.client, req); err != nil {
		t.Fatalf("RunPodSandbox after the restart: %v", err)
	}
	if got, want := gotSandbox(t, s.runtime, string(after.UID)), fromAPI(t, eng, after, req); got != want {
		t.Errorf("pod created after the restart: runtime got %s\nwant (API pod) %s", got, want)
	}
	t.Logf("pod created after the restart found in %v", time.Since(start))
}
