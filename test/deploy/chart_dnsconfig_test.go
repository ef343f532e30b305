package deploy

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
)

// configHead starts every ServerConfiguration of the table.
const configHead = "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nlisten: [\"0.0.0.0:53\"]\n"

// serveLoad is serve's verdict on a --config file of text: the function
// `serve --config` reads it with (strict decoding, apiVersion and kind,
// defaults, Validate).
func serveLoad(t *testing.T, text string) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, filepath.Dir(path), filepath.Base(path), []byte(text))
	var cfg v1alpha1.ServerConfiguration
	return flaglayer.ReadFile(path, v1alpha1.ServerKind, &cfg)
}

// renderConfig renders the chart with dns.config set to text, as a
// string (--set-file) or, with asMap, as the map of its YAML (a values
// file), and returns the ConfigMap's config.yaml.
func renderConfig(t *testing.T, helm, text string, asMap bool) (string, error) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"--set-file", "dns.config=" + filepath.Join(dir, "config.yaml")}
	writeFile(t, dir, "config.yaml", []byte(text))
	if asMap {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(text), &m); err != nil {
			t.Fatalf("the map form of %q: %v", text, err)
		}
		b, err := yaml.Marshal(map[string]any{"dns": map[string]any{"config": m}})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "values.yaml", b)
		args = []string{"-f", filepath.Join(dir, "values.yaml")}
	}
	out, err := helmTemplateErr(t, helm, args...)
	if err != nil {
		return "", err
	}
	for k, o := range chartObjects(t, "helm template", out) {
		if k.kind == "ConfigMap" && k.name == "dnsconfigurer-dns" {
			s, _ := get(o, "data", "config.yaml").(string)
			return s, nil
		}
	}
	t.Fatal("helm template: no ConfigMap dnsconfigurer-dns")
	return "", nil
}

// TestChartDNSConfigRefused: a dns.config that serve refuses, the chart
// refuses too, naming the same field: serve's loader (flaglayer.ReadFile,
// what `serve --config` calls) and helm template, on the string and the
// map form.
func TestChartDNSConfigRefused(t *testing.T) {
	helm := helmBin(t)
	for _, tc := range []struct {
		name, config string
		// serve is in serve's error, chart in the chart's after
		// "dns.config"; notMap: the input is no mapping.
		serve, chart string
		notMap       bool
	}{
		{name: "unknown field", config: configHead + "cach: {}\n", serve: `unknown field "cach"`, chart: ".cach: unknown field"},
		{name: "unknown nested field", config: configHead + "cache: {maxTll: 30s}\n", serve: `unknown field "maxTll"`, chart: ".cache.maxTll: unknown field"},
		{name: "unknown field in a list", config: configHead + "forward: [{zone: ., upstream: [10.0.0.53]}]\n", serve: `unknown field "upstream"`, chart: ".forward[0].upstream: unknown field"},
		{name: "unknown field beside the head", config: "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nmetadata: {name: x}\n", serve: `unknown field "metadata"`, chart: ".metadata: unknown field"},
		{name: "string for an integer", config: configHead + "ttl: \"5\"\n", serve: "ttl", chart: `.ttl: a string "5", want integer`},
		{name: "number for a duration", config: configHead + "cache: {maxTTL: 30}\n", serve: "cache.maxTTL", chart: ".cache.maxTTL: a integer 30, want string"},
		{name: "string for a list", config: "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nlisten: \":53\"\n", serve: "listen", chart: `.listen: a string ":53", want array`},
		{name: "fraction for an integer", config: configHead + "udpSockets: 1.5\n", serve: "udpSockets", chart: ".udpSockets: a number 1.5, want integer"},
		{name: "bad enum", config: configHead + "mode: nodelocal\n", serve: "mode: ", chart: `.mode: "nodelocal": must be one of "cluster", "node-local"`},
		{name: "bad nested enum", config: configHead + "forward: [{zone: ., upstreams: [10.0.0.53], policy: roundrobin}]\n", serve: "forward[0].policy: ", chart: ".forward[0].policy: "},
		{name: "bad listen address", config: "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nlisten: [\"0.0.0.0:65536\"]\n", serve: "listen[0]: ", chart: `.listen[0]: "0.0.0.0:65536": not an address`},
		{name: "bad upstream", config: configHead + "forward: [{zone: ., upstreams: [10.0.0.300]}]\n", serve: "forward[0].upstreams[0]: ", chart: ".forward[0].upstreams[0]: "},
		{name: "no upstream", config: configHead + "forward: [{zone: ., upstreams: []}]\n", serve: "forward[0].upstreams: ", chart: ".forward[0].upstreams: required"},
		{name: "bad CIDR", config: configHead + "reverseZones: [10.96.0.0/33]\n", serve: "reverseZones[0]: ", chart: ".reverseZones[0]: "},
		{name: "bad zone", config: configHead + "forward: [{zone: a..b, upstreams: [10.0.0.53]}]\n", serve: "forward[0].zone: ", chart: ".forward[0].zone: "},
		{name: "integer over its range", config: configHead + "ttl: 7200\n", serve: "ttl: 7200", chart: ".ttl: 7200: must be between 0 and 3600"},
		{name: "option code under its range", config: configHead + "autopathOptionCode: 100\n", serve: "autopathOptionCode: ", chart: ".autopathOptionCode: 100: must be between 65001 and 65534"},
		{name: "negative count", config: configHead + "maxConcurrent: -1\n", serve: "maxConcurrent: ", chart: ".maxConcurrent: -1: must be at least 0"},
		{name: "duration under its range", config: configHead + "cache: {maxTTL: 0s}\n", serve: "cache.maxTTL: ", chart: `.cache.maxTTL: "0s": must be between 1s and`},
		{name: "duration over its range", config: configHead + "forward: [{zone: ., upstreams: [10.0.0.53], timeout: 1m0.5s}]\n", serve: "forward[0].timeout: ", chart: `.forward[0].timeout: "1m0.5s": must be between 1ms and 1m0s`},
		{name: "duration without a unit", config: configHead + "lameduck: \"5\"\n", serve: "lameduck: ", chart: `.lameduck: "5": not a duration`},
		{name: "node-local timeout under the autopath deadline", config: configHead + "nodeLocal: {clusterTimeout: 2500ms}\n", serve: "nodeLocal.clusterTimeout: ", chart: ".nodeLocal.clusterTimeout: "},
		{name: "bad size", config: configHead + "cache: {successBytes: 32MB}\n", serve: "cache.successBytes: ", chart: `.cache.successBytes: "32MB": not a size`},
		{name: "zero size", config: configHead + "cache: {denialBytes: 0}\n", serve: "cache.denialBytes: ", chart: ".cache.denialBytes: 0: must be at least 1"},
		{name: "bad interface name", config: configHead + "nodeLocal: {interfaceName: node-local-dns-0}\n", serve: "nodeLocal.interfaceName: ", chart: ".nodeLocal.interfaceName: "},
		{name: "rewrite without to", config: configHead + "rewrites: [{from: a.example}]\n", serve: "rewrites[0].to: required", chart: ".rewrites[0].to: required"},
		{name: "wrong apiVersion", config: "apiVersion: dnsconfigurer.io/v1\nkind: ServerConfiguration\n", serve: "apiVersion: ", chart: `.apiVersion: "dnsconfigurer.io/v1": must be one of "dnsconfigurer.io/v1alpha1"`},
		{name: "wrong kind", config: "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\n", serve: "kind: ", chart: `.kind: "ShimConfiguration": must be one of "ServerConfiguration"`},
		{name: "no apiVersion", config: "kind: ServerConfiguration\nlisten: [\":53\"]\n", serve: "apiVersion: ", chart: ".apiVersion: required"},
		{name: "YAML garbage", config: "garbage", serve: "cannot unmarshal string", chart: ": not a YAML mapping", notMap: true},
		{name: "broken YAML", config: configHead + "cache: {maxTTL: 30s\n", serve: "config", chart: ": not a YAML mapping", notMap: true},
		{name: "a list", config: "- listen: [\":53\"]\n", serve: "cannot unmarshal array", chart: ": not a YAML mapping", notMap: true},
		{name: "a Corefile", config: ".:53 {\n    errors\n    forward . /etc/resolv.conf\n}\n", serve: "this is a Corefile", chart: ": not a YAML mapping", notMap: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := serveLoad(t, tc.config)
			if err == nil || !strings.Contains(err.Error(), tc.serve) {
				t.Errorf("serve: %v, want an error with %q", err, tc.serve)
			}
			forms := []bool{false, true}
			if tc.notMap {
				forms = forms[:1]
			}
			for _, asMap := range forms {
				_, err := renderConfig(t, helm, tc.config, asMap)
				if want := "dns.config" + tc.chart; err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("helm template (map form %t): %v, want an error with %q", asMap, err, want)
				}
			}
		})
	}
}

// validConfigs are every ServerConfiguration the repository has, by
// file: the chart's, deploy/'s (a ConfigMap's config.yaml, or a file),
// api's complete example, and convert's expected outputs.
func validConfigs(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	for _, dir := range []string{"../../charts/dnsconfigurer/files", "../../deploy", "../../api/v1alpha1/testdata", "../../pkg/corefile/testdata"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, doc := range splitDocs(b) {
				var head struct {
					Kind string            `json:"kind"`
					Data map[string]string `json:"data"`
				}
				if yaml.Unmarshal(doc, &head) != nil {
					continue
				}
				name := fmt.Sprintf("%s#%d", strings.TrimPrefix(path, "../../"), i+1)
				switch {
				case head.Kind == v1alpha1.ServerKind:
					found[name] = string(doc)
				case head.Kind == "ConfigMap" && strings.Contains(head.Data["config.yaml"], "kind: "+v1alpha1.ServerKind):
					found[name] = head.Data["config.yaml"]
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The chart's two, deploy/'s four, api's one, convert's eleven.
	if len(found) < 18 {
		t.Fatalf("%d ServerConfigurations found, want at least 18: %v", len(found), found)
	}
	return found
}

// TestChartDNSConfigAccepted: every ServerConfiguration of the
// repository passes serve's loader and the chart's check, and the chart
// renders it: as given for the string form, as its YAML for the map.
func TestChartDNSConfigAccepted(t *testing.T) {
	helm := helmBin(t)
	for name, config := range validConfigs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if err := serveLoad(t, config); err != nil {
				t.Fatalf("serve: %v", err)
			}
			got, err := renderConfig(t, helm, config, false)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			if strings.TrimRight(got, "\n") != strings.TrimRight(config, "\n") {
				t.Errorf("the ConfigMap's config.yaml is not dns.config as given:\n%s", lineDiff(config, got))
			}
			got, err = renderConfig(t, helm, config, true)
			if err != nil {
				t.Fatalf("helm template, map form: %v", err)
			}
			var want, have any
			if err := yaml.Unmarshal([]byte(config), &want); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal([]byte(got), &have); err != nil {
				t.Fatalf("the ConfigMap's config.yaml: %v", err)
			}
			if !jsonEqual(want, have) {
				t.Errorf("map form: the ConfigMap's config.yaml is not dns.config:\n%s", got)
			}
			if err := serveLoad(t, got); err != nil {
				t.Errorf("serve, the map form's config.yaml: %v", err)
			}
		})
	}
}
