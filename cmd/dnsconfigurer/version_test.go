package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

func TestVersion(t *testing.T) {
	info := version.Get()
	decodeJSON := func(s string) (version.Info, error) {
		var i version.Info
		err := json.Unmarshal([]byte(s), &i)
		return i, err
	}
	decodeYAML := func(s string) (version.Info, error) {
		var i version.Info
		err := yaml.UnmarshalStrict([]byte(s), &i)
		return i, err
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		decode func(string) (version.Info, error) // nil: text
		stderr string
	}{
		{name: "text", args: []string{"version"}},
		{name: "flag", args: []string{"--version"}},
		{name: "json", args: []string{"version", "-o", "json"}, decode: decodeJSON},
		{name: "flag json", args: []string{"--version", "-o", "json"}, decode: decodeJSON},
		{name: "yaml", args: []string{"version", "-o", "yaml"}, decode: decodeYAML},
		{name: "bad output", args: []string{"version", "-o", "xml"}, code: exitUsage, stderr: `version: -o "xml": must be text, json or yaml`},
		{name: "argument", args: []string{"version", "extra"}, code: exitUsage, stderr: `version: unexpected argument "extra"`},
		{name: "help", args: []string{"version", "-h"}, stderr: "usage: dnsconfigurer version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d, stderr containing %q", code, stderr, tc.code, tc.stderr)
			}
			switch {
			case tc.code != exitOK || tc.stderr != "":
				if stdout != "" {
					t.Errorf("stdout %q, want none", stdout)
				}
			case tc.decode == nil:
				if stdout != info.String()+"\n" {
					t.Errorf("stdout %q, want %q", stdout, info.String())
				}
			default:
				if got, err := tc.decode(stdout); err != nil || got != info {
					t.Errorf("stdout %q decodes to %+v (%v), want %+v", stdout, got, err, info)
				}
			}
		})
	}
}

// buildInfoLine is the dnsconfigurer_build_info sample of this build, as
// every component's /metrics must show it.
func buildInfoLine() string {
	i := version.Get()
	return fmt.Sprintf(`dnsconfigurer_build_info{goversion=%q,revision=%q,version=%q} 1`, i.GoVersion, i.Revision, i.Version)
}

// wantBuildInfo fails t unless a /metrics page has the build info.
func wantBuildInfo(t *testing.T, component string, metrics testkit.Metrics) {
	t.Helper()
	i := version.Get()
	key := testkit.Key("dnsconfigurer_build_info", "goversion", i.GoVersion, "revision", i.Revision, "version", i.Version)
	if metrics[key] != 1 {
		t.Errorf("%s /metrics lacks %s 1: %v", component, key, metrics)
	}
}

func TestRegistryHasBuildInfo(t *testing.T) {
	want := "# HELP dnsconfigurer_build_info A metric with a constant '1' value labelled by the version, git revision and Go version of the running binary.\n" +
		"# TYPE dnsconfigurer_build_info gauge\n" + buildInfoLine() + "\n"
	if err := testutil.GatherAndCompare(newRegistry(), strings.NewReader(want), "dnsconfigurer_build_info"); err != nil {
		t.Error(err)
	}
}
