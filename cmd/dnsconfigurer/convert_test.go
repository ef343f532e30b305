package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/corefile"
)

const examples = "../../pkg/corefile/testdata/"

// TestConvert: exit codes, where the output goes and what the errors name.
func TestConvert(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stdin      string
		args       []string
		code       int
		stdout     []string // substrings
		stderr     []string
		configFrom string // stdout holds a ServerConfiguration that must validate
	}{
		{name: "kubeadm", args: []string{examples + "kubeadm/Corefile"}, code: exitOK,
			stdout: []string{"clusterDomain: cluster.local", "ttl: 30"}, stderr: []string{"kubeadm/Corefile:16", "11 directives: 9 converted, 2 differ, 0 dropped"}, configFrom: "stdout"},
		{name: "kube-dns", args: []string{examples + "kubedns/configmap.yaml"}, code: exitOK,
			stdout: []string{"zone: acme.local", "8.8.4.4"}, stderr: []string{"data.stubDomains.acme.local"}, configFrom: "stdout"},
		{name: "aks templates", args: []string{"--import-dir", examples + "aks/custom", examples + "aks/configmap.yaml"}, code: exitOK,
			stdout: []string{"zone: puglife.world", "templates:"}, stderr: []string{"Corefile:19       template     converted", "0 dropped"}},
		{name: "configmap wrap", args: []string{"--configmap", "dnsconfigurer-dns", "--namespace", "dns", examples + "eks/Corefile"}, code: exitOK,
			stdout: []string{"kind: ConfigMap", "name: dnsconfigurer-dns", "namespace: dns", "config.yaml: |", "    kind: ServerConfiguration"}},
		{name: "configmap carries the hosts key", args: []string{"--configmap", "dnsconfigurer-dns", examples + "k3s-kubectl/configmap.yaml"}, code: exitOK,
			stdout: []string{"  NodeHosts: |\n    192.168.1.10 k3s-server\n    192.168.1.11 k3s-agent-1\n", "      file: /etc/dnsconfigurer/NodeHosts\n"},
			stderr: []string{"Corefile:9   hosts        converted  hosts.file /etc/dnsconfigurer/NodeHosts, ttl 60s, reload 15s; /etc/coredns/NodeHosts was the ConfigMap key NodeHosts: the output ConfigMap carries it"}},
		{name: "without --configmap the hosts key is reported", args: []string{examples + "k3s-kubectl/configmap.yaml"}, code: exitOK,
			stdout: []string{"file: /etc/coredns/NodeHosts"}, stderr: []string{"differs    hosts.file /etc/coredns/NodeHosts, ttl 60s, reload 15s; /etc/coredns/NodeHosts is the ConfigMap key NodeHosts: mount it there"}, configFrom: "stdout"},
		{name: "hosts key not a ConfigMap key", stdin: hostsKeyConfigMap("node:hosts"), args: []string{"--configmap", "x", "-"}, code: exitFail,
			stderr: []string{`convert: Corefile:2: hosts file /etc/coredns/node:hosts: ConfigMap key "node:hosts" cannot be carried in the output ConfigMap: a valid config key must consist of`}},
		{name: "hosts key config.yaml", stdin: hostsKeyConfigMap("config.yaml"), args: []string{"--configmap", "x", "-"}, code: exitFail,
			stderr: []string{`ConfigMap key "config.yaml" cannot be carried in the output ConfigMap: the converted ServerConfiguration is its key config.yaml`}},
		{name: "hosts key config.yaml without --configmap", stdin: hostsKeyConfigMap("config.yaml"), args: []string{"-"}, code: exitOK,
			stderr: []string{"is the ConfigMap key config.yaml: mount it there"}},
		{name: "helm values carry the hosts key", args: []string{"--helm-values", examples + "k3s-kubectl/configmap.yaml"}, code: exitOK,
			stdout: []string{"\ndns:\n  config: |\n    # converted by", "  files:\n    NodeHosts: |\n      192.168.1.10 k3s-server\n      192.168.1.11 k3s-agent-1\n", "      file: /etc/dnsconfigurer/NodeHosts\n"},
			stderr: []string{"/etc/coredns/NodeHosts was the ConfigMap key NodeHosts: dns.files.NodeHosts carries it, mounted at /etc/dnsconfigurer/NodeHosts"}},
		{name: "helm values without a hosts key", args: []string{"--helm-values", examples + "kubeadm/Corefile"}, code: exitOK,
			stdout: []string{"\ndns:\n  config: |\n    # converted by", "    clusterDomain: cluster.local\n"}},
		{name: "helm values json", args: []string{"-o", "json", "--helm-values", examples + "k3s-kubectl/configmap.yaml"}, code: exitOK,
			stdout: []string{"{\n  \"dns\": {\n    \"config\": \"# converted by", `"NodeHosts": "192.168.1.10 k3s-server\n192.168.1.11 k3s-agent-1\n"`}},
		{name: "helm values hosts key not a ConfigMap key", stdin: hostsKeyConfigMap("node:hosts"), args: []string{"--helm-values", "-"}, code: exitFail,
			stderr: []string{`convert: Corefile:2: hosts file /etc/coredns/node:hosts: ConfigMap key "node:hosts" cannot be carried in dns.files.node:hosts: a valid config key must consist of`}},
		{name: "helm values hosts key config.yaml", stdin: hostsKeyConfigMap("config.yaml"), args: []string{"--helm-values", "-"}, code: exitFail,
			stderr: []string{`cannot be carried in dns.files.config.yaml: the converted ServerConfiguration is its key config.yaml`}},
		{name: "helm values of node-local", stdin: "kind: ConfigMap\nmetadata:\n  name: node-local-dns\ndata:\n  Corefile: |\n    cluster.local:53 {\n        forward . __PILLAR__CLUSTER__DNS__\n    }\n",
			args: []string{"--helm-values", "-"}, code: exitFail, stderr: []string{"convert: --helm-values: the input is NodeLocal DNSCache's, a node-local configuration"}},
		{name: "helm values and configmap", args: []string{"--helm-values", "--configmap", "x", examples + "k3s-kubectl/configmap.yaml"}, code: exitUsage,
			stderr: []string{"convert: --configmap and --helm-values: pick one\n"}},
		{name: "stdin", stdin: ".:53 {\n  forward . 10.0.0.53\n}\n", args: []string{"-"}, code: exitOK,
			stdout: []string{"- 10.0.0.53"}, stderr: []string{"Corefile:2  forward"}},
		// AKS's coredns-custom pattern: serve exited 2 on this output
		// (duplicate metrics collector); convert now builds the server.
		{name: "two routes to /etc/resolv.conf", stdin: ".:53 {\n  kubernetes cluster.local\n  forward . /etc/resolv.conf\n}\ncorp.example:53 {\n  forward . /etc/resolv.conf\n}\n",
			args: []string{"-"}, code: exitOK, stdout: []string{"zone: corp.example"}, configFrom: "stdout"},
		{name: "unknown directive", stdin: ".:53 {\n  errors\n  forwardd . 1.1.1.1\n}\n", args: []string{"-"}, code: exitFail,
			stderr: []string{"Corefile:3", "Unknown directive 'forwardd'"}},
		// Its imports read its keys, as a coredns ConfigMap's do (before,
		// convert's working directory).
		{name: "node-local imports a key", stdin: "kind: ConfigMap\nmetadata:\n  name: node-local-dns\ndata:\n  Corefile: |\n    cluster.local:53 {\n        forward . __PILLAR__CLUSTER__DNS__\n    }\n    import extra.server\n" +
			"  extra.server: |\n    corp.example:53 {\n        forward . 10.0.0.9\n    }\n", args: []string{"-"}, code: exitOK,
			stderr: []string{"Corefile:4      import   converted  extra.server: extra.server", "extra.server:1  server   differs    corp.example:53"}},
		{name: "bad stub domains", stdin: "kind: ConfigMap\ndata:\n  stubDomains: '[1'\n", args: []string{"-"}, code: exitFail,
			stderr: []string{"data.stubDomains: not a JSON object"}},
		{name: "json", args: []string{"-o", "json", examples + "kubeadm/Corefile"}, code: exitOK,
			stdout: []string{"{\n  \"apiVersion\": \"dnsconfigurer.io/v1alpha1\",\n", "  \"clusterDomain\": \"cluster.local\",\n"}, stderr: []string{"11 directives: 9 converted, 2 differ, 0 dropped"}, configFrom: "stdout"},
		{name: "json dropped", args: []string{"-o", "json", "../../test/convert/corpus/16-standalone-rewrite-file/Corefile"}, code: exitDropped,
			stdout: []string{`"kind": "ServerConfiguration"`}, stderr: []string{"2 dropped"}},
		{name: "json configmap", args: []string{"-o", "json", "--configmap", "dnsconfigurer-dns", examples + "k3s-kubectl/configmap.yaml"}, code: exitOK,
			stdout: []string{"{\n  \"apiVersion\": \"v1\",\n", `"kind": "ConfigMap"`, `"NodeHosts": "192.168.1.10 k3s-server\n192.168.1.11 k3s-agent-1\n"`, `"config.yaml": "# converted by`}},
		{name: "-o an unknown format", args: []string{"-o", "xml", examples + "eks/Corefile"}, code: exitUsage, stderr: []string{"convert: -o \"xml\": must be yaml or json\n"}},
		// -o FILE was the output file before --output.
		{name: "-o a file name", args: []string{"-o", "config.yaml", examples + "eks/Corefile"}, code: exitUsage,
			stderr: []string{"convert: -o \"config.yaml\": must be yaml or json; -o is the output format: to write a file use --output FILE\n"}},
		{name: "-o a path", args: []string{"-o", "out/cm", examples + "eks/Corefile"}, code: exitUsage, stderr: []string{"to write a file use --output FILE"}},
		{name: "-o an existing file", args: []string{"-o", "testdata", examples + "eks/Corefile"}, code: exitUsage, stderr: []string{"to write a file use --output FILE"}},
		{name: "missing file", args: []string{"/nonexistent/Corefile"}, code: exitUsage, stderr: []string{"/nonexistent/Corefile"}},
		{name: "no file", code: exitUsage, stderr: []string{"want one input file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, tc.stdin, append([]string{"convert"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut)
			}
			testkit.WantSubstrings(t, "stdout", out, tc.stdout...)
			testkit.WantSubstrings(t, "stderr", errOut, tc.stderr...)
			if tc.configFrom != "" {
				var cfg v1alpha1.ServerConfiguration
				if err := yaml.UnmarshalStrict([]byte(out), &cfg); err != nil {
					t.Fatal(err)
				}
				cfg.SetDefaults()
				if err := cfg.Validate(); err != nil {
					t.Errorf("invalid output: %v", err)
				}
			}
		})
	}
}

// hostsKeyConfigMap is a coredns ConfigMap whose hosts file is its key.
func hostsKeyConfigMap(key string) string {
	return "kind: ConfigMap\ndata:\n  Corefile: |\n    .:53 {\n      hosts /etc/coredns/" + key + " {\n        fallthrough\n      }\n      forward . 10.0.0.53\n    }\n  " + key + ": |\n    10.0.0.1 a\n"
}

// TestConvertConfigMapFile: --configmap --output on `kubectl get
// configmap coredns -o yaml` output writes a ConfigMap with exactly config.yaml, valid,
// and the hosts key, where the configuration's hosts.file points.
func TestConvertConfigMapFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cm.yaml")
	code, out, errOut := run(t, "", "convert", "--configmap", "dnsconfigurer-dns", "--output", path, examples+"k3s-kubectl/configmap.yaml")
	if code != exitOK || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
		Data       map[string]string `json:"data"`
	}
	if err := yaml.UnmarshalStrict(b, &cm); err != nil {
		t.Fatal(err)
	}
	var cfg v1alpha1.ServerConfiguration
	if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("invalid config.yaml: %v", err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Metadata["name"] != "dnsconfigurer-dns" || cm.Metadata["namespace"] != "kube-system" || len(cm.Data) != 2 ||
		cm.Data["NodeHosts"] != "192.168.1.10 k3s-server\n192.168.1.11 k3s-agent-1\n" || cfg.Hosts.File != "/etc/dnsconfigurer/NodeHosts" {
		t.Errorf("%s:\n%s", path, b)
	}
}

// TestConvertHelmValues: --helm-values on k3s's ConfigMap writes the
// chart's values, as testdata/golden/convert-helm-values-k3s.golden has
// them: dns.config a valid ServerConfiguration whose hosts.file is
// dns.files' NodeHosts where the chart mounts it, and nothing else.
func TestConvertHelmValues(t *testing.T) {
	args := []string{"convert", "--helm-values", examples + "k3s-kubectl/configmap.yaml"}
	code, out, errOut := run(t, "", args...)
	got := fmt.Sprintf("$ dnsconfigurer %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, out, errOut)
	compareGolden(t, filepath.Join("testdata", "golden", "convert-helm-values-k3s.golden"), got)
	var values struct {
		DNS struct {
			Config string            `json:"config"`
			Files  map[string]string `json:"files"`
		} `json:"dns"`
	}
	if err := yaml.UnmarshalStrict([]byte(out), &values); err != nil {
		t.Fatal(err)
	}
	var cfg v1alpha1.ServerConfiguration
	if err := yaml.UnmarshalStrict([]byte(values.DNS.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("invalid dns.config: %v", err)
	}
	if cfg.Hosts.File != corefile.MountDir+"/NodeHosts" || len(values.DNS.Files) != 1 ||
		values.DNS.Files["NodeHosts"] != "192.168.1.10 k3s-server\n192.168.1.11 k3s-agent-1\n" {
		t.Errorf("hosts.file %q, dns.files %q", cfg.Hosts.File, values.DNS.Files)
	}
}

// TestConvertOutputFile: --output writes the file and nothing to stdout.
func TestConvertOutputFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	code, out, errOut := run(t, "", "convert", "--output", path, examples+"k3s/configmap.yaml")
	if code != exitOK || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "file: /etc/coredns/NodeHosts") {
		t.Errorf("%s:\n%s", path, b)
	}
}

// TestConvertFormats: -o json is the same object as -o yaml (the default),
// the ServerConfiguration, the ConfigMap or the chart's values, indented,
// with a trailing newline; --output writes the format asked.
func TestConvertFormats(t *testing.T) {
	formats := []struct {
		name   string
		flags  []string
		json   bool
		output bool // --output FILE
	}{
		{"default", nil, false, false},
		{"yaml", []string{"-o", "yaml"}, false, false},
		{"json", []string{"-o", "json"}, true, false},
		{"json to a file", []string{"-o", "json"}, true, true},
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"corefile", []string{examples + "kubeadm/Corefile"}},
		{"kube-dns", []string{examples + "kubedns/configmap.yaml"}},
		{"configmap", []string{"--configmap", "dnsconfigurer-dns", "--namespace", "dns", examples + "k3s-kubectl/configmap.yaml"}},
		{"helm values", []string{"--helm-values", examples + "k3s-kubectl/configmap.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want any
			for _, f := range formats {
				args := append(append([]string{"convert"}, f.flags...), tc.args...)
				file := filepath.Join(t.TempDir(), "out")
				if f.output {
					args = append(append([]string{"convert", "--output", file}, f.flags...), tc.args...)
				}
				code, out, errOut := run(t, "", args...)
				if code != exitOK {
					t.Fatalf("%v: exit %d, stderr:\n%s", args, code, errOut)
				}
				if f.output {
					b, err := os.ReadFile(file)
					if err != nil || out != "" {
						t.Fatalf("%v: stdout %q, %v", args, out, err)
					}
					out = string(b)
				}
				isJSON := (strings.HasPrefix(out, "{\n  \"apiVersion\": ") || strings.HasPrefix(out, "{\n  \"dns\": ")) && strings.HasSuffix(out, "\n}\n")
				isYAML := strings.HasPrefix(out, "# converted by `dnsconfigurer convert` from ")
				if isJSON != f.json || isYAML == f.json {
					t.Errorf("%v: not %s:\n%s", args, f.name, out)
				}
				var v any
				if err := yaml.Unmarshal([]byte(out), &v); err != nil {
					t.Fatalf("%v: %v", args, err)
				}
				if want == nil {
					want = v
				} else if !reflect.DeepEqual(v, want) {
					t.Errorf("%v differs from the default:\n%v\n%v", args, v, want)
				}
			}
		})
	}
}

// TestConvertStopped: once ctx ends (SIGTERM, SIGINT), convert returns
// exit 1 saying so, even blocked in a read of stdin, and writes nothing.
func TestConvertStopped(t *testing.T) {
	stdin, w := io.Pipe() // never written: the read blocks
	defer w.Close()
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("terminated signal received"))
	var out, errb bytes.Buffer
	output := filepath.Join(t.TempDir(), "config.yaml")
	code := dispatch(ctx, []string{"convert", "--output", output, "-"}, stdin, &out, &errb)
	if code != exitFail || out.Len() != 0 || errb.String() != "convert: stopped (terminated signal received): nothing written\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if _, err := os.Stat(output); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--output written: %v", err)
	}
}
