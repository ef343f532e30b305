package lint

import (
	"context"
	"reflect"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
)

func parse(t *testing.T, in string) []manifest.Object {
	t.Helper()
	objs, err := manifest.Parse("f.yaml", []byte(in), 10)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestFindingFields: each finding is named at its full path in the
// document, and the workload's own metadata where the template inherits it.
func TestFindingFields(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Finding
	}{
		{"pod", "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec: {dnsPolicy: None}\n", []Finding{
			{Rule: RuleAPI, Field: "metadata.name", Line: 3},
			{Rule: RuleAPI, Field: "spec.dnsConfig", Line: 4},
		}},
		{"deployment name is the workload's", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: Bad_Name, namespace: Bad_NS}\nspec:\n  template:\n    spec: {}\n", []Finding{
			{Rule: RuleAPI, Field: "metadata.name", Line: 3},
			{Rule: RuleAPI, Field: "metadata.namespace", Line: 3},
		}},
		{"template's own name", "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: rc}\nspec:\n  template:\n    metadata: {name: Bad_Name}\n    spec: {}\n", []Finding{
			{Rule: RuleAPI, Field: "spec.template.metadata.name", Line: 6},
		}},
		{"list item cronjob", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: batch/v1\n  kind: CronJob\n  metadata: {name: c}\n  spec:\n    jobTemplate:\n      spec:\n        template:\n          spec:\n            dnsConfig: {searches: [Bad_Domain]}\n", []Finding{
			{Rule: RuleAPI, Field: "items[0].spec.jobTemplate.spec.template.spec.dnsConfig.searches[0]", Line: 12},
		}},
		{"warning with a field", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      dnsPolicy: None\n      dnsConfig: {nameservers: [010.0.0.1]}\n", []Finding{
			{Rule: RuleAPI, Field: "spec.template.spec.dnsConfig.nameservers[0]", Line: 8},
			{Rule: RuleWarning, Field: "spec.template.spec.dnsConfig.nameservers[0]", Line: 8},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			targets, skipped, err := Targets(parse(t, tc.in))
			if err != nil || skipped != 0 {
				t.Fatalf("Targets: %v, %d skipped", err, skipped)
			}
			rep, err := Run(context.Background(), targets, APICheck)
			if err != nil {
				t.Fatal(err)
			}
			var got []Finding
			for _, r := range rep.Results {
				for _, f := range r.Findings {
					f.Message = ""
					got = append(got, f)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestTargetsSkipsAndRefuses(t *testing.T) {
	_, skipped, err := Targets(parse(t, "apiVersion: v1\nkind: Service\n---\napiVersion: v1\nkind: ConfigMap\n"))
	if err != nil || skipped != 2 {
		t.Errorf("Service and ConfigMap: %v, %d skipped, want nil, 2", err, skipped)
	}
	_, _, err = Targets(parse(t, "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: apps/v1, kind: Deployment, metadata: {name: d}}\n"))
	if err == nil || err.Error() != "f.yaml: document 1: items[0]: Deployment: spec: Required value" {
		t.Errorf("Deployment without template: %v", err)
	}
}

// TestRunStops: a run whose context has ended stops with its error.
func TestRunStops(t *testing.T) {
	targets, _, err := Targets(parse(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: x}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, targets, APICheck); err != context.Canceled {
		t.Errorf("got %v, want context.Canceled", err)
	}
}
