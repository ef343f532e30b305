package nri_test

import (
	"os"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestLiveUpdate runs a Default and a ClusterFirst pod with the plugin
// reading the harness's host resolv.conf, rewrites that file in place and
// waits until the running containers see the new config (the Default
// pod's whole file, the ClusterFirst pod's host search paths), without a
// restart and on the same inode; a None pod keeps its file. It also
// checks the plugin's metrics.
func TestLiveUpdate(t *testing.T) {
	r := startNRI(t)
	h, c, ctx := r.h, r.c, r.ctx
	plugin := startPlugin(t, h, "--resolv-conf", h.HostResolvConf)

	const newHost = "nameserver 10.233.0.7\nsearch new.test\noptions timeout:1\n"
	pods := testPods()
	want := map[string]string{ // after the change, by pod name
		"cluster-first": containerd.ResolvConfFor(&runtimeapi.DNSConfig{Servers: []string{testkit.ClusterDNS},
			Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local", "new.test"}, Options: []string{"ndots:5"}}),
		"default": containerd.ResolvConfFor(&runtimeapi.DNSConfig{Servers: []string{"10.233.0.7"}, Searches: []string{"new.test"}, Options: []string{"timeout:1"}}),
		"none":    containerd.ResolvConfFor(render(t, pods[3]).DNSConfig()),
	}
	ctrs := map[string]string{} // pod name → container id
	for _, pod := range pods {
		if want[pod.Name] == "" {
			continue
		}
		want[pod.Name] = nriplugin.Header(pod.Namespace, pod.Name) + want[pod.Name]
		sb := r.runPod(t, pod)
		ctr, err := c.StartContainer(ctx, sb, "main")
		if err != nil {
			t.Fatal(err)
		}
		ctrs[pod.Name] = ctr.ID
		before, err := c.ResolvConf(ctx, ctr.ID)
		if err != nil {
			t.Fatal(err)
		}
		if wantBefore := adjusted(t, pod); before != wantBefore {
			t.Fatalf("%s before the change: /etc/resolv.conf =\n%s\nwant\n%s", pod.Name, before, wantBefore)
		}
	}

	// In place, as an operator's editor or a DHCP client may: same inode.
	if err := os.WriteFile(h.HostResolvConf, []byte(newHost), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, id := range ctrs {
		r.waitResolv(t, name+" after the host change", id, want[name])
	}

	m := scrape(t, plugin.Metrics)
	m.Want(t, map[string]float64{
		`dnsconfigurer_nri_containers_total{result="adjusted"}`:  3,
		`dnsconfigurer_nri_containers_total{result="rejected"}`:  0,
		`dnsconfigurer_nri_containers_total{result="unchanged"}`: 0,
		`dnsconfigurer_nri_errors_total{stage="update"}`:         0,
		`dnsconfigurer_nri_live_updates_total`:                   2,
		`dnsconfigurer_nri_adjust_duration_seconds_count`:        3,
		`dnsconfigurer_nri_connected`:                            1,
	})
}

// scrape reads the plugin's /metrics.
func scrape(t testing.TB, addr string) testkit.Metrics {
	t.Helper()
	m, err := testkit.Scrape(nil, "http://"+addr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}
