package nriplugin

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// TestMetrics drives one container of each result and checks the counts,
// the histogram and the connected gauge on the injected registry.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	none4 := policy.Input{Name: "web", Namespace: "team", Policy: policy.None,
		DNSConfig: &policy.DNSConfig{Nameservers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}}}
	p := newPlugin(t, WithRegistry(reg), WithLimits(LimitsReject), WithPodLookup(fakeLookup{"u-over": none4}, 0))
	ctx := context.Background()

	// Every label value is exported before any event.
	if got := testutil.CollectAndCount(reg, "dnsconfigurer_nri_containers_total"); got != 3 {
		t.Errorf("containers_total series = %d, want 3", got)
	}
	if got := testutil.CollectAndCount(reg, "dnsconfigurer_nri_errors_total"); got != 7 {
		t.Errorf("errors_total series = %d, want 7", got)
	}

	for _, c := range []struct{ uid, file string }{
		{"u-ok1", clusterFirst}, {"u-ok2", hostFile}, // adjusted
		{"u-bad", "nameserver\n"}, // unparsable: unchanged, a facts error
		{"u-over", clusterFirst},  // rejected
	} {
		pod, ctr := sandbox(t, c.uid, c.file, nil, false)
		_, _, _ = p.CreateContainer(ctx, pod, ctr)
	}
	pod, ctr := sandbox(t, "u-nomount", clusterFirst, nil, false)
	ctr.Mounts = ctr.Mounts[:1] // no sandbox resolv.conf: unchanged, no error
	_, _, _ = p.CreateContainer(ctx, pod, ctr)

	want := `
# HELP dnsconfigurer_nri_containers_total CreateContainer events by result: adjusted (resolv.conf replaced), unchanged (left with kubelet's file), rejected (over the limits in limits mode reject).
# TYPE dnsconfigurer_nri_containers_total counter
dnsconfigurer_nri_containers_total{result="adjusted"} 2
dnsconfigurer_nri_containers_total{result="rejected"} 1
dnsconfigurer_nri_containers_total{result="unchanged"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "dnsconfigurer_nri_containers_total"); err != nil {
		t.Error(err)
	}
	for stage, n := range map[string]float64{stageFacts: 1, stageCompute: 0, stageHostConfig: 0, stageWrite: 0} {
		if got := testutil.ToFloat64(p.m.errors.WithLabelValues(stage)); got != n {
			t.Errorf("errors_total{stage=%q} = %v, want %v", stage, got, n)
		}
	}
	if got := testkit.Value(t, reg, "dnsconfigurer_nri_adjust_duration_seconds_count"); got != 5 {
		t.Errorf("adjust_duration_seconds count = %v, want 5", got)
	}
	if got := testutil.ToFloat64(p.m.connected); got != 0 {
		t.Errorf("connected = %v, want 0", got)
	}
}

// TestMetricsRegisterTwice: a second plugin on the same registry is an
// error from New, not a panic.
func TestMetricsRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	newPlugin(t, WithRegistry(reg))
	eng, _ := policy.New(policy.Node{})
	if _, err := New(eng, hostConfig(t, hostFile), "/state", WithRegistry(reg)); err == nil {
		t.Error("New on a registry with the metrics already registered succeeded, want an error")
	}
}
