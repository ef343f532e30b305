package nri_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestLimitsReject runs the plugin with --limits reject and no API server:
// a sandbox whose DNS config is over kubelet's limits (4 nameservers; 33
// search paths) reaches the plugin through containerd's sandbox file, and
// CreateContainer fails with cri.RejectMessage, naming the pod and the
// limit; no pod file is written. A pod within the limits gets the plugin's
// file.
//
// kubelet trims to its limits before the CRI call, so with kubelet and no
// API server the plugin sees over-limit configs only from other CRI
// clients (as here); with an API server it rejects the pod spec's config
// at RunPodSandbox instead (test/integration).
func TestLimitsReject(t *testing.T) {
	r := startNRI(t)
	h, c, ctx := r.h, r.c, r.ctx
	plugin := startPlugin(t, h, "--limits", "reject")

	searches := make([]string, 33)
	for i := range searches {
		searches[i] = fmt.Sprintf("s%02d.example", i)
	}
	for i, tc := range []struct {
		name string
		dns  *runtimeapi.DNSConfig
		want []string // in the error
	}{
		{"four-nameservers", &runtimeapi.DNSConfig{Servers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}},
			[]string{"4 nameservers, at most 3 allowed; over the limit: 10.0.0.4"}},
		{"33-searches", &runtimeapi.DNSConfig{Servers: []string{"10.0.0.1"}, Searches: searches},
			[]string{"33 search paths, at most 32 entries", "over the limit: s32.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", 2000+i)
			sb, err := c.RunPod(ctx, containerd.PodSpec{Name: tc.name, Namespace: "team", UID: uid, Hostname: tc.name, DNS: tc.dns})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.RemovePod(context.WithoutCancel(ctx), sb.ID); err != nil {
					t.Error(err)
				}
			}()
			ctr, err := c.CreateContainer(ctx, sb, "main")
			if err == nil {
				t.Fatalf("CreateContainer of a pod over the limits succeeded (%s), want it rejected", ctr.ID)
			}
			msg := err.Error()
			t.Logf("rejected: %s", msg)
			for _, want := range append([]string{fmt.Sprintf(`dnsconfigurer: pod "team/%s" (uid %s) exceeds the DNS limits (limits mode reject):`, tc.name, uid)}, tc.want...) {
				if !strings.Contains(msg, want) {
					t.Errorf("CreateContainer error = %q, want it to contain %q", msg, want)
				}
			}
			if _, err := os.Stat(nriplugin.PodFile(plugin.StateDir, uid)); !os.IsNotExist(err) {
				t.Errorf("pod file of a rejected pod: %v, want none", err)
			}
		})
	}

	t.Run("within-limits", func(t *testing.T) {
		pod := testPods()[1] // cluster-first-config: 2 nameservers, 6 search paths
		sb := r.runPod(t, pod)
		ctr, err := c.StartContainer(ctx, sb, "main")
		if err != nil {
			t.Fatal(err)
		}
		r.check(t, pod.Name, ctr.ID, adjusted(t, pod))
	})

	m := scrape(t, plugin.Metrics)
	m.Want(t, map[string]float64{
		`dnsconfigurer_nri_containers_total{result="rejected"}`: 2,
		`dnsconfigurer_nri_containers_total{result="adjusted"}`: 1,
	})
}
