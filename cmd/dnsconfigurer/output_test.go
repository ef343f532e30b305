package main

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/internal/completion"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/explain"
)

// TestOutputFormats: every command with -o takes json and yaml, and names
// its formats when given another. A command that gains -o must join the
// table.
func TestOutputFormats(t *testing.T) {
	tests := map[string]struct {
		args []string // before -o
		want string   // stderr
	}{
		"convert":  {nil, `convert: -o "x": must be yaml or json`},
		"explain":  {[]string{"web"}, `explain: -o "x": must be text, json or yaml`},
		"render":   {nil, `render: -o "x": must be resolv.conf, json or yaml`},
		"validate": {nil, `validate: -o "x": must be text, json, yaml or sarif`},
		"version":  {nil, `version: -o "x": must be text, json or yaml`},
	}
	cmds, err := completionCommands(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if _, ok := tests[c.Name]; ok != slices.ContainsFunc(c.Flags, func(f completion.Flag) bool { return f.Name == "o" }) {
			t.Errorf("%s: -o flag and the table disagree", c.Name)
		}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", append(append([]string{name}, tc.args...), "-o", "x")...)
			if code != exitUsage || stdout != "" || stderr != tc.want+"\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stderr %q", code, stdout, stderr, exitUsage, tc.want)
			}
		})
	}
}

// TestExplainYAML: explain -o yaml is its -o json report, and its control
// characters stay escaped.
func TestExplainYAML(t *testing.T) {
	f := explain.Facts{Pod: explainPod(t, "clusterfirst.yaml"), Agent: "dnsconfigurer-node/shim-x", Settings: explainSettings(nil),
		Containers: []explain.File{{Name: "app", Data: []byte("nameserver 10.0.0.66\x1b]52;c;Y3VybA==\x07\n\r# app: matches\xc2\x9b\n")}}}
	var decoded []any
	var yamlOut string
	for _, out := range []string{"json", "yaml"} {
		var stdout, stderr bytes.Buffer
		if code := writeExplain(&stdout, &stderr, out, f); code != exitOK {
			t.Fatalf("-o %s: exit %d, stderr:\n%s", out, code, stderr.String())
		}
		if i := bytes.IndexFunc(stdout.Bytes(), func(r rune) bool { return r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f }); i >= 0 {
			t.Errorf("-o %s: a control character at %d:\n%q", out, i, stdout.String())
		}
		var v any
		if err := yaml.Unmarshal(stdout.Bytes(), &v); err != nil {
			t.Fatalf("-o %s: %v", out, err)
		}
		decoded = append(decoded, v)
		yamlOut = stdout.String()
	}
	if !reflect.DeepEqual(decoded[0], decoded[1]) {
		t.Errorf("-o yaml is not -o json:\n%v\n%v", decoded[1], decoded[0])
	}
	if !strings.Contains(yamlOut, "\n  status: differs\n") {
		t.Errorf("-o yaml: the container should differ:\n%s", yamlOut)
	}
}
