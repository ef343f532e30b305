package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// run calls the binary's dispatcher in-process.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestGolden renders and validates every pod under testdata/pods with a set
// of node settings and compares exit code, stdout and stderr with
// testdata/golden/<case>.golden.
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tc.args...)
			got := fmt.Sprintf("$ dnsconfigurer %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(tc.args, " "), code, stdout, stderr)
			compareGolden(t, filepath.Join("testdata", "golden", tc.name+".golden"), got)
		})
	}
}

// TestExplainOnlyAdds runs every golden case again with --explain: the
// exit code is the same, and the output is the same plus the trace (after
// it as '#' lines in text; a trace array, the rest equal, with -o json|yaml).
func TestExplainOnlyAdds(t *testing.T) {
	for _, tc := range goldenCases {
		if slices.Contains(tc.args, "--explain") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tc.args...)
			args := append(slices.Clone(tc.args), "--explain")
			if !slices.Contains(tc.args, "--resolv-conf") {
				args = append(args, "--resolv-conf", "testdata/node-resolv.conf") // validate reads it for the trace
			}
			ecode, estdout, estderr := run(t, "", args...)
			if ecode == exitUsage && strings.Contains(estderr, "--explain takes a single Pod") {
				return // validate lints any other input: --explain cannot add to it
			}
			if ecode != code {
				t.Fatalf("exit %d with --explain, %d without", ecode, code)
			}
			if code == exitUsage {
				return
			}
			addsTrace(t, "stderr", stderr, estderr)
			if i := slices.Index(tc.args, "-o"); i >= 0 && tc.args[i+1] != "resolv.conf" && tc.args[i+1] != "text" && stdout != "" {
				plain, explained := decode(t, tc.args[i+1], stdout), decode(t, tc.args[i+1], estdout)
				if _, ok := explained["trace"].([]any); !ok {
					t.Errorf("no trace array in %s", estdout)
				}
				delete(explained, "trace")
				if !reflect.DeepEqual(plain, explained) {
					t.Errorf("--explain changed the result:\n%s\nwithout:\n%s", estdout, stdout)
				}
				return
			}
			addsTrace(t, "stdout", stdout, estdout)
		})
	}
}

// addsTrace checks that explained is plain plus '#' lines.
func addsTrace(t *testing.T, what, plain, explained string) {
	t.Helper()
	rest, ok := strings.CutPrefix(explained, plain)
	if !ok {
		t.Errorf("%s with --explain does not start with the %s without it:\n%s\nwithout:\n%s", what, what, explained, plain)
		return
	}
	for _, l := range strings.SplitAfter(rest, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			t.Errorf("%s: --explain added a line that is not a comment: %q", what, l)
		}
	}
}

func decode(t *testing.T, format, out string) map[string]any {
	t.Helper()
	b := []byte(out)
	if format == outYAML {
		var err error
		if b, err = yaml.YAMLToJSON(b); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return m
}

// goldenCases are the commands TestGolden compares with
// testdata/golden/<name>.golden.
var goldenCases = func() []struct {
	name string
	args []string
} {
	node := []string{"--resolv-conf", "testdata/node-resolv.conf"}
	return []struct {
		name string
		args []string
	}{
		{"render-clusterfirst", append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml"}, node...)},
		{"render-clusterfirst-json", append([]string{"render", "-f", "testdata/pods/clusterfirst.json", "-o", "json"}, node...)},
		{"render-clusterfirst-dualstack", append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--cluster-dns", "10.96.0.10,fd00:0:0::000a", "--cluster-domain", "k8s.example"}, node...)},
		{"render-clusterfirst-no-cluster-dns", append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--cluster-dns", "", "-o", "json"}, node...)},
		{"render-default", append([]string{"render", "-f", "testdata/pods/default.yaml", "-o", "json"}, node...)},
		{"render-default-resolvconf-off", []string{"render", "-f", "testdata/pods/default.yaml", "--resolv-conf", "", "--node-ip", "192.0.2.10,2001:db8::10"}},
		{"render-default-systemd-stub", []string{"render", "-f", "testdata/pods/default.yaml", "--resolv-conf", "testdata/stub-resolv.conf"}},
		{"render-hostnet-default-systemd-stub", []string{"render", "-f", "testdata/pods/hostnet-default.yaml", "--resolv-conf", "testdata/stub-resolv.conf"}},
		{"render-hostnet-clusterfirst-systemd-stub", []string{"render", "-f", "testdata/pods/hostnet-clusterfirst.yaml", "--resolv-conf", "testdata/stub-resolv.conf", "-o", "json"}},
		{"render-hostnet-withhostnet-no-cluster-dns-systemd-stub", []string{"render", "-f", "testdata/pods/hostnet-withhostnet.yaml", "--resolv-conf", "testdata/stub-resolv.conf", "--cluster-dns", ""}},
		{"validate-strict-hostnet-systemd-stub", []string{"validate", "--strict", "-f", "testdata/pods/hostnet-default-nameservers.yaml", "--resolv-conf", "testdata/stub-resolv.conf"}},
		{"render-hostnet-clusterfirst", append([]string{"render", "-f", "testdata/pods/hostnet-clusterfirst.yaml", "-o", "json"}, node...)},
		{"render-hostnet-withhostnet", append([]string{"render", "-f", "testdata/pods/hostnet-withhostnet.yaml", "-o", "json"}, node...)},
		{"render-none", append([]string{"render", "-f", "testdata/pods/none.yaml"}, node...)},
		{"render-merge", append([]string{"render", "-f", "testdata/pods/merge.yaml", "-o", "json"}, node...)},
		{"render-autopath", append([]string{"render", "-f", "testdata/pods/autopath.yaml", "-o", "json"}, node...)},
		{"render-autopath-node-local", append([]string{"render", "-f", "testdata/pods/autopath.yaml", "--node-local-dns", "169.254.20.10"}, node...)},
		{"render-many-searches", append([]string{"render", "-f", "testdata/pods/many-searches.yaml"}, node...)},
		{"render-windows", append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--node-os", "windows"}, node...)},
		{"render-windows-bad-resolvconf", []string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--node-os", "windows", "--resolv-conf", "C:\\nope"}},
		{"render-bad-policy", append([]string{"render", "-f", "testdata/pods/bad-policy.yaml"}, node...)},
		{"render-fqdn-fits", append([]string{"render", "-f", "testdata/pods/fqdn-too-long.yaml", "-o", "json"}, node...)},
		{"render-fqdn-too-long", append([]string{"render", "-f", "testdata/pods/fqdn-too-long.yaml", "--cluster-domain", "cluster-domain.example"}, node...)},
		{"render-broken-resolvconf", []string{"render", "-f", "testdata/pods/none.yaml", "--resolv-conf", "testdata/broken-resolv.conf"}},
		{"render-missing-resolvconf", []string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--resolv-conf", "testdata/does-not-exist"}},
		{"render-not-a-pod", []string{"render", "-f", "testdata/pods/not-a-pod.yaml"}},
		{"render-unknown-field", []string{"render", "-f", "testdata/pods/unknown-field.yaml"}},
		{"render-malformed", []string{"render", "-f", "testdata/pods/malformed.yaml"}},
		{"render-missing-file", []string{"render", "-f", "testdata/pods/nope.yaml"}},
		{"render-clusterfirst-yaml", append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml", "-o", "yaml"}, node...)},
		{"render-bad-output", []string{"render", "-f", "testdata/pods/clusterfirst.yaml", "-o", "xml"}},
		{"validate-ok", []string{"validate", "-f", "testdata/pods/merge.yaml"}},
		{"validate-bad", []string{"validate", "-f", "testdata/pods/bad-policy.yaml"}},
		{"validate-bad-json", []string{"validate", "-f", "testdata/pods/bad-policy.yaml", "-o", "json"}},
		{"validate-bad-yaml", []string{"validate", "-f", "testdata/pods/bad-policy.yaml", "-o", "yaml"}},
		{"validate-bad-output", []string{"validate", "-f", "testdata/pods/bad-policy.yaml", "-o", "xml"}},
		{"validate-strict-merge", append([]string{"validate", "--strict", "-f", "testdata/pods/merge.yaml"}, node...)},
		{"validate-strict-fqdn", append([]string{"validate", "--strict", "-f", "testdata/pods/fqdn-too-long.yaml", "--cluster-domain", "cluster-domain.example", "-o", "json"}, node...)},
		{"validate-strict-autopath-ok", append([]string{"validate", "--strict", "-f", "testdata/pods/autopath.yaml", "-o", "json"}, node...)},
		{"validate-strict-many-searches", append([]string{"validate", "--strict", "-f", "testdata/pods/many-searches.yaml"}, node...)},
		{"validate-not-a-pod", []string{"validate", "-f", "testdata/pods/not-a-pod.yaml"}},
		{"render-explain-clusterfirst", append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--explain"}, node...)},
		{"render-explain-merge-json", append([]string{"render", "-f", "testdata/pods/merge.yaml", "-o", "json", "--explain"}, node...)},
		{"render-explain-autopath-yaml", append([]string{"render", "-f", "testdata/pods/autopath.yaml", "-o", "yaml", "--explain", "--node-local-dns", "169.254.20.10"}, node...)},
		{"render-explain-hostnet-clusterfirst", append([]string{"render", "-f", "testdata/pods/hostnet-clusterfirst.yaml", "--explain"}, node...)},
		{"render-explain-no-cluster-dns", append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--cluster-dns", "", "--explain"}, node...)},
		{"render-explain-hostnet-default-systemd-stub", []string{"render", "-f", "testdata/pods/hostnet-default.yaml", "--resolv-conf", "testdata/stub-resolv.conf", "--explain"}},
		{"render-explain-default-systemd-stub", []string{"render", "-f", "testdata/pods/default.yaml", "--resolv-conf", "testdata/stub-resolv.conf", "--explain"}},
		{"render-explain-none", append([]string{"render", "-f", "testdata/pods/none.yaml", "--explain"}, node...)},
		{"render-explain-many-searches", append([]string{"render", "-f", "testdata/pods/many-searches.yaml", "--explain"}, node...)},
		{"render-explain-fqdn-too-long", append([]string{"render", "-f", "testdata/pods/fqdn-too-long.yaml", "--cluster-domain", "cluster-domain.example", "--explain"}, node...)},
		{"render-explain-namespace-label", append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--namespace-policy", "ClusterFirstWithAutopath", "--ndots", "2", "--explain"}, node...)},
		{"render-explain-cluster-default-hostnet", append([]string{"render", "-f", "testdata/pods/hostnet-withhostnet.yaml", "--default-dns-policy", "ClusterFirstWithAutopath", "--explain"}, node...)},
		{"render-hostname-override", append([]string{"render", "-f", "testdata/pods/hostname-override.yaml", "-o", "yaml"}, node...)},
		{"render-hostname-override-kubelet-1.34", append([]string{"render", "-f", "testdata/pods/hostname-override.yaml", "-o", "yaml", "--kubelet-version", "v1.34.4"}, node...)},
		{"render-bad-kubelet-version", append([]string{"render", "-f", "testdata/pods/hostname-override.yaml", "--kubelet-version", "1.x"}, node...)},
		{"render-bad-ndots", append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--ndots", "16"}, node...)},
		{"render-explain-broken-resolvconf", []string{"render", "-f", "testdata/pods/none.yaml", "--resolv-conf", "testdata/broken-resolv.conf", "--explain", "-o", "json"}},
		{"validate-explain-bad", append([]string{"validate", "-f", "testdata/pods/bad-policy.yaml", "--explain"}, node...)},
		{"validate-explain-strict-merge-json", append([]string{"validate", "--strict", "-f", "testdata/pods/merge.yaml", "-o", "json", "--explain"}, node...)},
	}
}()

func TestRenderStdinAndExitCodes(t *testing.T) {
	pod, err := os.ReadFile("testdata/pods/clusterfirst.yaml")
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := run(t, string(pod), "render", "-f", "-", "--resolv-conf", "", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var j map[string]any
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nameservers", "searches", "options", "warnings"} {
		if _, ok := j[k].([]any); !ok {
			t.Errorf("%s is %T, want an array", k, j[k])
		}
	}
	if code, _, _ := run(t, "", "render"); code != exitUsage {
		t.Errorf("render without -f: exit %d", code)
	}
	if code, _, _ := run(t, "", "nope"); code != exitUsage {
		t.Errorf("unknown subcommand: exit %d", code)
	}
}

// FuzzRender feeds arbitrary manifests to render: it must never panic, and
// must exit 0 with JSON of the documented shape, or 1 or 2 with a message.
func FuzzRender(f *testing.F) {
	entries, _ := filepath.Glob("testdata/pods/*")
	for _, e := range entries {
		b, _ := os.ReadFile(e)
		f.Add(b)
	}
	f.Add([]byte("apiVersion: v1\nkind: Pod\nspec:\n  dnsConfig:\n    options: [{}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), []string{"render", "-f", "-", "--resolv-conf", "", "-o", "json"}, bytes.NewReader(data), &out, &errb)
		switch code {
		case exitOK:
			// A single Pod is one object; anything else (templates of
			// workloads, Lists, several documents, none) is an array.
			var err error
			if bytes.HasPrefix(bytes.TrimSpace(out.Bytes()), []byte("[")) {
				var j []renderTemplateJSON
				err = json.Unmarshal(out.Bytes(), &j)
			} else {
				var j renderJSON
				err = json.Unmarshal(out.Bytes(), &j)
			}
			if err != nil {
				t.Fatalf("exit 0 with bad json %q: %v", out.String(), err)
			}
		case exitFail, exitUsage:
			if errb.Len() == 0 {
				t.Fatalf("exit %d without a message", code)
			}
			if strings.Contains(errb.String(), "goroutine ") {
				t.Fatalf("stack trace in %q", errb.String())
			}
		default:
			t.Fatalf("exit %d", code)
		}
	})
}
