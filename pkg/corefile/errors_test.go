package corefile

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

// placed is an error that opens with the file and line it is about.
var placed = regexp.MustCompile(`^[^\s:]+:[0-9]+: `)

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\n  namespace: kube-system\ndata:\n"

// TestErrorsPlaced: every error convert gives about its input opens with
// FILE:LINE: (the input, an imported file or a ConfigMap key), on every
// path: reading the input, YAML, picking the ConfigMap, parsing, imports,
// the plugins, and what serve would refuse.
func TestErrorsPlaced(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		imports        fs.FS
	}{
		{name: "empty", in: " \n", want: "in.yaml:1: empty input"},
		{name: "binary", in: ".:53 {\n  errors\x00\n}\n", want: "in.yaml:2: binary input"},
		{name: "yaml of a later document", in: cm + "  a: b\n---\nkind: ConfigMap\n  bad: [\n", want: "in.yaml:10: document 2: error converting YAML to JSON: yaml: mapping values are not allowed in this context"},
		{name: "no object", in: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n", want: "in.yaml:1: no ConfigMap with data.Corefile"},
		{name: "not an object", in: "kind: ConfigMap\ndata:\n  Corefile:\n    a: b\n", want: "in.yaml:1: document 1: not a Kubernetes object"},
		{name: "custom alone", in: "---\nkind: ConfigMap\nmetadata:\n  name: coredns-custom\ndata:\n  a.server: x\n", want: "in.yaml:2: ConfigMap coredns-custom is a coredns-custom ConfigMap"},
		{name: "two", in: "kind: ConfigMap\nmetadata:\n  name: a\ndata:\n  Corefile: x\n---\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  Corefile: z\n", want: "in.yaml:7: 2 DNS ConfigMaps and none named coredns"},
		{name: "key twice", in: cm + "  Corefile: x\n  a.server: w\n---\nkind: ConfigMap\nmetadata:\n  name: coredns-custom\ndata:\n  a.server: z\n", want: "in.yaml:10: key a.server is in ConfigMap coredns-custom"},
		{name: "kube-dns stub domains", in: "kind: ConfigMap\nmetadata:\n  name: kube-dns\ndata:\n  upstreamNameservers: '[\"8.8.8.8\"]'\n  stubDomains: |\n    {\"a\": 1}\n", want: "in.yaml:6: data.stubDomains: not a JSON object"},
		{name: "kube-dns invalid upstream", in: "kind: ConfigMap\nmetadata:\n  name: kube-dns\ndata:\n  upstreamNameservers: '[\"8.8.8.8:x\"]'\n", want: "in.yaml:1: data: forward[0].upstreams[0]"},
		{name: "parse", in: ".:53 {\n  forwardd . 1.1.1.1\n}\n", want: "in.yaml:2: Error during parsing: Unknown directive 'forwardd'"},
		{name: "syntax", in: ".:53 {\n  forward . 1.1.1.1\n", want: "in.yaml:2: Syntax error: Unexpected token '1.1.1.1', expecting '}'"},
		{name: "parse in a key", in: cm + "  Corefile: |\n    .:53 {\n      errors\n      nope\n    }\n", want: "Corefile:3: Error during parsing: Unknown directive 'nope'"},
		{name: "import missing", in: ".:53 {\n  import nothere\n}\n", want: "in.yaml:2: import nothere: file not found", imports: fstest.MapFS{}},
		{name: "import unreadable", in: ".:53 {\n  import a.conf\n}\n", want: "in.yaml:2: import a.conf: ", imports: fstest.MapFS{"a.conf": {Mode: fs.ModeDir}}},
		{name: "plugin refused", in: ".:53 {\n  errors\n  dnstap\n}\n", want: "in.yaml:3: dnstap: Wrong argument count"},
		{name: "serve refuses a value", in: ".:53 {\n  forward . 8.8.8.8 {\n    expire 10\n  }\n}\n", want: `in.yaml:2: forward[0].expire: "10": not a duration`},
		{name: "bad key", in: cm + "  Corefile: x\n  \"a/b\": w\n", want: "in.yaml:8: configmap key \"a/b\": not a file name"},
		{name: "unrendered", in: cm + "  Corefile: |\n    .:53 {\n      kubernetes %{CLUSTER_DOMAIN}%\n", want: "in.yaml:9: unrendered template placeholder %{CLUSTER_DOMAIN}%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConvertInput(t.Context(), "in.yaml", []byte(tc.in), tc.imports, ConfigMapKeys{})
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, e := range strings.Split(err.Error(), "\n") {
				if !placed.MatchString(e) {
					t.Errorf("error %q: no FILE:LINE: in front", e)
				}
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
		})
	}
}
