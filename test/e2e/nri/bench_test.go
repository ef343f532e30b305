package nri_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// BenchmarkCreateContainer measures, against one containerd, the latency
// of CRI CreateContainer (created, not started) of a ClusterFirst pod's
// containers without an NRI plugin and then with the plugin registered,
// over benchContainers containers each, and logs p50 and p99 of both and
// the plugin's own time per container (adjust_duration_seconds mean).
// Each container is removed after it is measured. Run it once:
//
//	DNSCONFIGURER_CONTAINERD_BIN=... go test -run '^$' -bench CreateContainer -benchtime 1x ./test/e2e/nri/
func BenchmarkCreateContainer(b *testing.B) {
	const benchContainers = 200
	requireNRI(b)
	h := containerd.Start(b, containerd.Options{HostResolvConf: testkit.HostResolvConf})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := h.Client()
	pod := testPods()[0] // cluster-first
	sb, err := c.RunPod(ctx, sandboxSpec(b, pod))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.RemovePod(context.Background(), sb.ID); err != nil {
			b.Error(err)
		}
	})

	// measure creates and removes n containers (after 10 unmeasured ones)
	// and returns the sorted CreateContainer latencies.
	measure := func(phase string, n int) []time.Duration {
		var d []time.Duration
		for i := range n + 10 {
			begin := time.Now()
			ctr, err := c.CreateContainer(ctx, sb, fmt.Sprintf("%s-%d", phase, i))
			took := time.Since(begin)
			if err != nil {
				b.Fatal(err)
			}
			if i >= 10 {
				d = append(d, took)
			}
			if err := c.RemoveContainer(ctx, ctr.ID); err != nil {
				b.Fatal(err)
			}
		}
		slices.Sort(d)
		return d
	}
	pct := func(d []time.Duration, p int) time.Duration { return d[(len(d)-1)*p/100].Round(time.Microsecond) }

	for range b.N {
		without := measure("without", benchContainers)
		plugin := startPlugin(b, h, "--log-level", "warn")
		with := measure("with", benchContainers)
		m := scrape(b, plugin.Metrics)
		plugin.stop(b)

		if got := m[`dnsconfigurer_nri_containers_total{result="adjusted"}`]; got != benchContainers+10 {
			b.Errorf("adjusted containers = %v, want %d", got, benchContainers+10)
		}
		b.Logf("CreateContainer over %d containers: without the plugin p50 %v p99 %v; with it p50 %v p99 %v; added p50 %v (%+.1f%%) p99 %v",
			benchContainers, pct(without, 50), pct(without, 99), pct(with, 50), pct(with, 99),
			pct(with, 50)-pct(without, 50), 100*float64(pct(with, 50)-pct(without, 50))/float64(pct(without, 50)), pct(with, 99)-pct(without, 99))
		if n := m["dnsconfigurer_nri_adjust_duration_seconds_count"]; n > 0 {
			b.Logf("the plugin's own work per CreateContainer (adjust_duration_seconds mean): %v over %v containers",
				time.Duration(m["dnsconfigurer_nri_adjust_duration_seconds_sum"]/n*1e9).Round(time.Microsecond), n)
		}
		b.ReportMetric(float64(pct(without, 50).Microseconds()), "p50-without-µs")
		b.ReportMetric(float64(pct(with, 50).Microseconds()), "p50-with-µs")
		b.ReportMetric(float64(pct(with, 99).Microseconds()), "p99-with-µs")
	}
}
