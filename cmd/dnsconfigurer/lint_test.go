package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// lintCases run validate and render over testdata/lint: a corpus of bad
// workloads of every kind, in multi-document YAML, JSON streams, Lists and
// a subdirectory. Each golden file holds the exact findings.
var lintCases = []struct {
	name  string
	stdin string
	args  []string
}{
	{"lint-validate-dir", "", []string{"validate", "-f", "testdata/lint/bad"}},
	{"lint-validate-recursive", "", []string{"validate", "-f", "testdata/lint/bad", "-R"}},
	{"lint-validate-recursive-json", "", []string{"validate", "-f", "testdata/lint/bad", "-R", "-o", "json"}},
	{"lint-validate-recursive-sarif", "", []string{"validate", "-f", "testdata/lint/bad", "-R", "-o", "sarif"}},
	{"lint-validate-files", "", []string{"validate", "-f", "testdata/lint/bad/list.json", "-f", "testdata/lint/bad/stream.json"}},
	{"lint-validate-strict", "", []string{"validate", "--strict", "-f", "testdata/lint/strict", "--resolv-conf", "testdata/node-resolv.conf"}},
	{"lint-validate-strict-sarif", "", []string{"validate", "--strict", "-f", "testdata/lint/strict", "--resolv-conf", "testdata/node-resolv.conf", "-o", "sarif"}},
	{"lint-validate-strict-node-sarif", "", []string{"validate", "--strict", "-f", "testdata/lint/node", "--cluster-domain", "cluster-domain.example", "--resolv-conf", "testdata/node-resolv.conf", "-o", "sarif"}},
	{"lint-validate-not-strict", "", []string{"validate", "-f", "testdata/lint/strict"}},
	{"lint-validate-pod-sarif", "", []string{"validate", "-f", "testdata/pods/bad-policy.yaml", "-o", "sarif"}},
	{"lint-validate-stdin", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n" + "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      dnsPolicy: None\n", []string{"validate", "-f", "-"}},
	{"lint-validate-bad-document", "", []string{"validate", "-f", "testdata/lint/bad-input/doc2.yaml"}},
	{"lint-validate-no-kind", "", []string{"validate", "-f", "testdata/lint/bad", "-f", "testdata/lint/bad-input/no-kind.yaml"}},
	{"lint-validate-missing", "", []string{"validate", "-f", "testdata/lint/nope"}},
	{"lint-validate-explain", "", []string{"validate", "-f", "testdata/lint/bad", "--explain"}},
	{"lint-render", "", append([]string{"render", "-f", "testdata/lint/bad", "-R"}, "--resolv-conf", "testdata/node-resolv.conf")},
	{"lint-render-json", "", append([]string{"render", "-f", "testdata/lint/bad/sub/job.yaml", "-o", "json"}, "--resolv-conf", "testdata/node-resolv.conf")},
}

func TestLintGolden(t *testing.T) {
	schema := sarifSchema(t)
	for _, tc := range lintCases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.stdin, tc.args...)
			got := fmt.Sprintf("$ dnsconfigurer %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(tc.args, " "), code, stdout, stderr)
			compareGolden(t, filepath.Join("testdata", "golden", tc.name+".golden"), got)
			if strings.HasSuffix(tc.name, "-sarif") {
				checkSARIF(t, schema, stdout)
			}
		})
	}
}

// sarifSchema compiles the OASIS SARIF 2.1.0 schema (errata01, a copy in
// testdata).
func sarifSchema(t *testing.T) *jsonschema.Schema {
	return testkit.SARIFSchema(t, "testdata/lint/sarif-schema-2.1.0.json")
}

func checkSARIF(t *testing.T, schema *jsonschema.Schema, out string) {
	t.Helper()
	testkit.CheckSARIF(t, schema, []byte(out))
}

// TestSARIFSchemaRejects keeps the schema check able to fail: a log
// without runs, a result without a message and a region at line 0 are
// refused.
func TestSARIFSchemaRejects(t *testing.T) {
	schema := sarifSchema(t)
	for _, bad := range []string{
		`{"version": "2.1.0"}`,
		`{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"ruleId": "api"}]}]}`,
		`{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"message": {"text": "m"}, "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a"}, "region": {"startLine": 0}}}]}]}]}`,
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if schema.Validate(v) == nil {
			t.Errorf("schema accepts %s", bad)
		}
	}
}
