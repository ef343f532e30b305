package manifest

import "testing"

func TestFieldLine(t *testing.T) {
	yml := "apiVersion: v1\nkind: ConfigMap\n---\n# a Deployment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  annotations:\n    dnsconfigurer.io/policy: x\nspec:\n  template:\n    spec:\n      dnsConfig:\n        searches:\n        - a\n        - b\n"
	list := "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n {\"apiVersion\": \"v1\", \"kind\": \"Pod\",\n  \"spec\": {\"hostname\": \"x\"}}]}\n"
	tests := []struct {
		name, in, field string
		want            int
	}{
		{"sequence element", yml, "spec.template.spec.dnsConfig.searches[1]", 17},
		{"key of a block value", yml, "spec.template.spec.dnsConfig.searches", 15},
		{"missing index: the list", yml, "spec.template.spec.dnsConfig.searches[7]", 15},
		{"missing field: its parent", yml, "spec.template.spec.dnsConfig.options[0]", 14},
		{"annotation key with dots", yml, "metadata.annotations[dnsconfigurer.io/policy]", 10},
		{"nothing: the document", yml, "spec2", 5},
		{"JSON List item", list, "items[0].spec.hostname", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := lastParsed(t, "f", tc.in, 10)
			if got := o.Locator().FieldLine(tc.field); got != tc.want {
				t.Errorf("FieldLine(%q) = %d, want %d", tc.field, got, tc.want)
			}
		})
	}
}
