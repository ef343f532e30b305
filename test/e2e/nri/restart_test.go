package nri_test

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestPluginRestart stops the plugin (SIGTERM) and starts it again with
// the same state dir: while it is gone, containerd lets new containers
// through with kubelet's file, in a pod the plugin adjusted before and in
// a new pod; once it is back, new containers of both pods get its file
// again; the container created before keeps the plugin's file throughout,
// and the resync at the new connection keeps the live pods' state.
func TestPluginRestart(t *testing.T) {
	r := startNRI(t)
	h, c, ctx := r.h, r.c, r.ctx
	plugin := startPlugin(t, h)

	pods := testPods()
	before, during := pods[0], pods[4] // cluster-first; autopath, whose file differs most from kubelet's
	kubelet := func(pod *corev1.Pod) string { return containerd.ResolvConfFor(sandboxSpec(t, pod).DNS) }

	sbBefore := r.runPod(t, before)
	first, err := c.StartContainer(ctx, sbBefore, "first")
	if err != nil {
		t.Fatal(err)
	}
	r.check(t, "container created before the restart", first.ID, adjusted(t, before))
	stateFile := nriplugin.PodFile(plugin.StateDir, string(before.UID))

	plugin.stop(t)
	if plugin.ready() {
		t.Fatal("/readyz still answers after the plugin exited")
	}
	gone, err := c.StartContainer(ctx, sbBefore, "while-gone")
	if err != nil {
		t.Fatalf("CreateContainer with the plugin gone: %v (NRI should let it through)", err)
	}
	r.check(t, "new container of the old pod, plugin gone", gone.ID, kubelet(before))
	sbDuring := r.runPod(t, during)
	goneNew, err := c.StartContainer(ctx, sbDuring, "while-gone")
	if err != nil {
		t.Fatalf("CreateContainer with the plugin gone: %v (NRI should let it through)", err)
	}
	r.check(t, "container of a pod run while the plugin is gone", goneNew.ID, kubelet(during))
	r.check(t, "container created before, plugin gone", first.ID, adjusted(t, before))

	plugin.start(t)
	back, err := c.StartContainer(ctx, sbBefore, "after")
	if err != nil {
		t.Fatal(err)
	}
	r.check(t, "new container of the old pod, plugin back", back.ID, adjusted(t, before))
	backNew, err := c.StartContainer(ctx, sbDuring, "after")
	if err != nil {
		t.Fatal(err)
	}
	r.check(t, "new container of the pod run while gone, plugin back", backNew.ID, adjusted(t, during))
	r.check(t, "container created before, plugin back", first.ID, adjusted(t, before))
	r.check(t, "container created while gone, plugin back", gone.ID, kubelet(before))
	if got, err := os.ReadFile(stateFile); err != nil || string(got) != adjusted(t, before) {
		t.Errorf("state file of the old pod after the restart = %q, %v; want %q", got, err, adjusted(t, before))
	}

	m := scrape(t, plugin.Metrics)
	m.Want(t, map[string]float64{
		`dnsconfigurer_nri_containers_total{result="adjusted"}`: 2, // the new process's counters
		`dnsconfigurer_nri_connected`:                           1,
	})
}
