package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// bigStream is a stream over the 3 MiB an object may have, of small
// objects (kube-prometheus-stack with its CRDs is 5 MB), then a
// hostNetwork DaemonSet and one object over 3 MiB.
func bigStream() string {
	var b strings.Builder
	for i := 0; b.Len() < 4<<20; i++ {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d}\ndata: {rules: %q}\n---\n", i, strings.Repeat("x", 8<<10))
	}
	b.WriteString("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent, namespace: kube-system}\nspec:\n  template:\n    spec:\n      hostNetwork: true\n---\n")
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: huge}\ndata: {dashboards: %q}\n", strings.Repeat("y", 3<<20))
	return b.String()
}

// gapCases are issue 57's linter gaps, one golden file each: render's
// warnings in validate (hostNetwork with ClusterFirst), an integer option
// value as a finding with its line in every format, a stream over 3 MiB,
// empty input, and workload kinds outside Kubernetes.
var gapCases = []struct {
	name  string
	stdin string
	args  []string
}{
	{"lint-gaps-hostnetwork", "", []string{"validate", "-f", "testdata/lint/gaps/hostnetwork.yaml"}},
	{"lint-gaps-hostnetwork-sarif", "", []string{"validate", "-f", "testdata/lint/gaps/hostnetwork.yaml", "-o", "sarif"}},
	{"lint-gaps-hostnetwork-strict", "", []string{"validate", "--strict", "-f", "testdata/lint/gaps/hostnetwork.yaml", "--resolv-conf", "testdata/node-resolv.conf"}},
	{"lint-gaps-hostnetwork-pod", "", []string{"validate", "-f", "testdata/pods/hostnetwork-clusterfirst.yaml"}},
	{"lint-gaps-render-hostnetwork", "", []string{"render", "-f", "testdata/lint/gaps/hostnetwork.yaml", "--resolv-conf", "testdata/node-resolv.conf"}},
	{"lint-gaps-int-option", "", []string{"validate", "-f", "testdata/lint/gaps/int-option.yaml"}},
	{"lint-gaps-int-option-json", "", []string{"validate", "-f", "testdata/lint/gaps/int-option.yaml", "-o", "json"}},
	{"lint-gaps-int-option-sarif", "", []string{"validate", "-f", "testdata/lint/gaps/int-option.yaml", "-o", "sarif"}},
	{"lint-gaps-big-stream", bigStream(), []string{"validate", "-f", "-"}},
	{"lint-gaps-empty-stdin", "", []string{"validate", "-f", "-"}},
	{"lint-gaps-comments-stdin", "# Source: chart/templates/all.yaml\n---\n\n", []string{"validate", "-f", "-"}},
	{"lint-gaps-empty-stdin-sarif", "", []string{"validate", "-f", "-", "-o", "sarif"}},
	{"lint-gaps-missing-sarif", "", []string{"validate", "-f", "testdata/lint/nope.yaml", "-o", "sarif"}},
	{"lint-gaps-workloads", "", []string{"validate", "-f", "testdata/lint/gaps/workloads.yaml"}},
	{"lint-gaps-workloads-pod-template", "", []string{"validate", "-f", "testdata/lint/gaps/workloads.yaml", "--pod-template", "NightlyJob.batch.example.com=spec.runs[*].pod"}},
	{"lint-gaps-workloads-json", "", []string{"validate", "-f", "testdata/lint/gaps/workloads.yaml", "-o", "json"}},
	{"lint-gaps-workloads-sarif", "", []string{"validate", "-f", "testdata/lint/gaps/workloads.yaml", "-o", "sarif"}},
	{"lint-gaps-pod-template-bad", "", []string{"validate", "-f", "testdata/lint/gaps/workloads.yaml", "--pod-template", "NightlyJob=spec.runs[x]"}},
}

func TestLintGapsGolden(t *testing.T) {
	schema := sarifSchema(t)
	for _, tc := range gapCases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.stdin, tc.args...)
			args := strings.Join(tc.args, " ")
			if len(tc.stdin) > 1000 {
				args += fmt.Sprintf(" < (%d bytes)", len(tc.stdin))
			}
			got := fmt.Sprintf("$ dnsconfigurer %s\nexit %d\n--- stdout\n%s--- stderr\n%s", args, code, stdout, stderr)
			compareGolden(t, filepath.Join("testdata", "golden", tc.name+".golden"), got)
			if strings.HasSuffix(tc.name, "-sarif") {
				checkSARIF(t, schema, stdout)
			}
		})
	}
}
