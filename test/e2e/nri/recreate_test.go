package nri_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestRecreatedSandbox does what kubelet does when a pod's sandbox dies
// (the pause container killed, the network namespace lost): it stops
// sandbox A, runs sandbox B for the same pod (same UID, attempt 1) with a
// container, and later removes A. The plugin is restarted between B's
// container and A's removal. B's container must keep the plugin's file
// (the pod's state directory survives A's removal) and still see a change
// of the node's resolv.conf; the directory goes with B.
func TestRecreatedSandbox(t *testing.T) {
	r := startNRI(t)
	h, c, ctx := r.h, r.c, r.ctx
	plugin := startPlugin(t, h, "--resolv-conf", h.HostResolvConf)

	pod := testPods()[0] // cluster-first: follows the node's search paths
	want := adjusted(t, pod)
	spec := sandboxSpec(t, pod)
	sbA, err := c.RunPod(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	removedA := false
	t.Cleanup(func() {
		if !removedA {
			_ = c.RemovePod(context.Background(), sbA.ID)
		}
	})
	ctrA, err := c.StartContainer(ctx, sbA, "main")
	if err != nil {
		t.Fatal(err)
	}
	r.check(t, "sandbox A", ctrA.ID, want)

	if err := c.StopPod(ctx, sbA.ID); err != nil {
		t.Fatal(err)
	}
	spec.Attempt = 1
	sbB, err := c.RunPod(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RemovePod(context.Background(), sbB.ID) })
	ctrB, err := c.StartContainer(ctx, sbB, "main-b") // containerd reserves "main" of the pod while A has it
	if err != nil {
		t.Fatal(err)
	}
	r.check(t, "sandbox B", ctrB.ID, want)

	plugin.stop(t)
	plugin.start(t)
	if err := c.RemovePod(ctx, sbA.ID); err != nil {
		t.Fatal(err)
	}
	removedA = true
	file := nriplugin.PodFile(plugin.StateDir, string(pod.UID))
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("pod file after removing the old sandbox: %v", err)
	}
	r.check(t, "sandbox B after A's removal", ctrB.ID, want)

	if err := os.WriteFile(h.HostResolvConf, []byte("nameserver 10.233.0.7\nsearch new.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want = nriplugin.Header(pod.Namespace, pod.Name) + containerd.ResolvConfFor(&runtimeapi.DNSConfig{Servers: []string{testkit.ClusterDNS},
		Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local", "new.test"}, Options: []string{"ndots:5"}})
	r.waitResolv(t, "sandbox B after the host change", ctrB.ID, want)
	if got := scrape(t, plugin.Metrics)["dnsconfigurer_nri_live_updates_total"]; got != 1 {
		t.Errorf("live_updates_total of the restarted plugin = %v, want 1", got)
	}

	if err := c.RemovePod(ctx, sbB.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(file)); !os.IsNotExist(err) {
		t.Errorf("pod dir after its last sandbox: %v, want it removed", err)
	}
}
