package lint

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
)

// badList is a List of n Deployments, each with a finding (four
// nameservers), as `kubectl get deploy -o yaml` prints many.
func badList(n int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range n {
		fmt.Fprintf(&b, "- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: app-%d, namespace: default}\n"+
			"  spec:\n    selector: {matchLabels: {app: a%d}}\n    template:\n      metadata: {labels: {app: a%d}}\n"+
			"      spec:\n        dnsPolicy: None\n        dnsConfig: {nameservers: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4]}\n"+
			"        containers: [{name: c, image: x}]\n", i, i, i)
	}
	return []byte(b.String())
}

func listTargets(tb testing.TB, n int) []Target {
	tb.Helper()
	objs, err := manifest.Parse("list.yaml", badList(n), n+1)
	if err != nil {
		tb.Fatal(err)
	}
	targets, _, err := Targets(objs)
	if err != nil {
		tb.Fatal(err)
	}
	return targets
}

// TestRunLinear (issue 55 row 6): Run's work grows with a List's items,
// not with their square: four times the items take at most five times the
// allocations (each item once parsed the whole List for its line numbers:
// 500 / 1,000 / 2,000 items took 9 / 30 / 102 s). Lines stay right.
func TestRunLinear(t *testing.T) {
	allocs := map[int]float64{}
	for _, n := range []int{100, 400} {
		targets := listTargets(t, n)
		allocs[n] = testing.AllocsPerRun(3, func() {
			if _, err := Run(context.Background(), targets, APICheck); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("allocations: %v for 100 items, %v for 400 (%.1f×)", allocs[100], allocs[400], allocs[400]/allocs[100])
	if allocs[400] > 5*allocs[100] {
		t.Errorf("400 items allocate %.1f× what 100 do, want at most 5×", allocs[400]/allocs[100])
	}
	rep, err := Run(context.Background(), listTargets(t, 3), APICheck)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rep.Results {
		// Each item is 11 lines from line 4; its dnsConfig is its 10th.
		if want := 4 + 11*i + 9; len(r.Findings) == 0 || r.Findings[0].Line != want {
			t.Errorf("item %d: findings %+v, want the first at line %d", i, r.Findings, want)
		}
	}
}

// BenchmarkRunList: go test -run '^$' -bench RunList -benchmem ./pkg/lint/
func BenchmarkRunList(b *testing.B) {
	for _, n := range []int{500, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			targets := listTargets(b, n)
			for b.Loop() {
				if _, err := Run(context.Background(), targets, APICheck); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
