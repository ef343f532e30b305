package nri_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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
	requireNRI(t)
	h := containerd.Start(t, containerd.Options{HostResolvConf: hostResolv})
	plugin := startPlugin(t, h, "--resolv-conf", h.HostResolvConf)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := h.Client()

	const newHost = "nameserver 10.233.0.7\nsearch new.test\noptions timeout:1\n"
	pods := testPods()
	want := map[string]string{ // after the change, by pod name
		"cluster-first": containerd.ResolvConfFor(&runtimeapi.DNSConfig{Servers: []string{clusterDNS},
			Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local", "new.test"}, Options: []string{"ndots:5"}}),
		"default": containerd.ResolvConfFor(&runtimeapi.DNSConfig{Servers: []string{"10.233.0.7"}, Searches: []string{"new.test"}, Options: []string{"timeout:1"}}),
		"none":    containerd.ResolvConfFor(render(t, pods[3]).dns()),
	}
	ctrs := map[string]string{} // pod name → container id
	for _, pod := range pods {
		if want[pod.Name] == "" {
			continue
		}
		want[pod.Name] = nriplugin.Header(pod.Namespace, pod.Name) + want[pod.Name]
		sb, err := c.RunPod(ctx, sandboxSpec(t, pod))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.RemovePod(context.Background(), sb.ID); err != nil {
				t.Error(err)
			}
		})
		ctr, err := c.StartContainer(ctx, sb, "main")
		if err != nil {
			t.Fatal(err)
		}
		ctrs[pod.Name] = ctr.ID
		before, err := c.ResolvConf(ctx, ctr.ID)
		if err != nil {
			t.Fatal(err)
		}
		if wantBefore := nriplugin.Header(pod.Namespace, pod.Name) + containerd.ResolvConfFor(render(t, pod).dns()); before != wantBefore {
			t.Fatalf("%s before the change: /etc/resolv.conf =\n%s\nwant\n%s", pod.Name, before, wantBefore)
		}
	}

	// In place, as an operator's editor or a DHCP client may: same inode.
	if err := os.WriteFile(h.HostResolvConf, []byte(newHost), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, id := range ctrs {
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := c.ResolvConf(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got == want[name] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /etc/resolv.conf 30s after the host change =\n%s\nwant\n%s", name, got, want[name])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	m := scrape(t, plugin.Metrics)
	for series, wantV := range map[string]float64{
		`dnsconfigurer_nri_containers_total{result="adjusted"}`:  3,
		`dnsconfigurer_nri_containers_total{result="rejected"}`:  0,
		`dnsconfigurer_nri_containers_total{result="unchanged"}`: 0,
		`dnsconfigurer_nri_errors_total{stage="update"}`:         0,
		`dnsconfigurer_nri_live_updates_total`:                   2,
		`dnsconfigurer_nri_adjust_duration_seconds_count`:        3,
		`dnsconfigurer_nri_connected`:                            1,
	} {
		if got, ok := m[series]; !ok || got != wantV {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, wantV)
		}
	}
}

// scrape reads the plugin's /metrics into series → value.
func scrape(t testing.TB, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			m[line[:i]] = v
		}
	}
	return m
}
