package corefile

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// checkKey stands in for validation.IsConfigMapKey, which the command
// passes: a colon is not allowed.
func checkKey(key string) []string {
	if strings.Contains(key, ":") {
		return []string{"no colon", "see the key rule"}
	}
	return nil
}

// TestHostsConfigMapKey: a hosts file that is a key of the input ConfigMap
// is carried in the output ConfigMap with --configmap (Carry), and only
// then; a key that cannot be carried is an error naming it.
func TestHostsConfigMapKey(t *testing.T) {
	const nodeHosts = "192.168.1.10 k3s-server\n"
	corefile := func(file string, opts ...string) string {
		return ".:53 {\n  hosts " + file + " {\n    " + strings.Join(append(opts, "fallthrough"), "\n    ") + "\n  }\n  forward . 10.0.0.53\n}\n"
	}
	for _, tc := range []struct {
		desc      string
		text      string
		keys      *ConfigMapKeys
		file      string            // hosts.file
		files     map[string]string // Result.Files
		status    Status            // of the hosts finding
		reason    []string          // substrings of its reason
		wantErr   []string          // substrings of the error
		noFinding bool
	}{
		{desc: "carried", text: corefile("/etc/coredns/NodeHosts", "ttl 60"),
			keys: &ConfigMapKeys{Data: map[string]string{"Corefile": "", "NodeHosts": nodeHosts}, Carry: true, CheckKey: checkKey},
			file: "/etc/dnsconfigurer/NodeHosts", files: map[string]string{"NodeHosts": nodeHosts}, status: Converted,
			reason: []string{"hosts.file /etc/dnsconfigurer/NodeHosts, ttl 60s; /etc/coredns/NodeHosts was the ConfigMap key NodeHosts: the output ConfigMap carries it, mounted at /etc/dnsconfigurer/NodeHosts"}},
		{desc: "carried, a relative path", text: corefile("NodeHosts"),
			keys: &ConfigMapKeys{Data: map[string]string{"NodeHosts": nodeHosts}, Carry: true, CheckKey: checkKey},
			file: "/etc/dnsconfigurer/NodeHosts", files: map[string]string{"NodeHosts": nodeHosts}, status: Converted,
			reason: []string{"NodeHosts was the ConfigMap key NodeHosts"}},
		{desc: "carried, its other differences kept", text: ".:53 {\n  hosts /etc/coredns/NodeHosts\n  forward . 10.0.0.53\n}\n",
			keys: &ConfigMapKeys{Data: map[string]string{"NodeHosts": nodeHosts}, Carry: true, CheckKey: checkKey},
			file: "/etc/dnsconfigurer/NodeHosts", files: map[string]string{"NodeHosts": nodeHosts}, status: Differs,
			reason: []string{"hosts.file /etc/dnsconfigurer/NodeHosts;", "the output ConfigMap carries it", "as with fallthrough"}},
		{desc: "carried into the chart's values", text: corefile("/etc/coredns/NodeHosts"),
			keys: &ConfigMapKeys{Data: map[string]string{"NodeHosts": nodeHosts}, Carry: true, Helm: true, CheckKey: checkKey},
			file: "/etc/dnsconfigurer/NodeHosts", files: map[string]string{"NodeHosts": nodeHosts}, status: Converted,
			reason: []string{"/etc/coredns/NodeHosts was the ConfigMap key NodeHosts: dns.files.NodeHosts carries it, mounted at /etc/dnsconfigurer/NodeHosts"}},
		{desc: "not carried without --configmap", text: corefile("/etc/coredns/NodeHosts"),
			keys: &ConfigMapKeys{Data: map[string]string{"NodeHosts": nodeHosts}},
			file: "/etc/coredns/NodeHosts", status: Differs,
			reason: []string{"/etc/coredns/NodeHosts is the ConfigMap key NodeHosts: mount it there in the dnsconfigurer pod"}},
		{desc: "a Corefile file", text: corefile("/etc/coredns/NodeHosts"),
			file: "/etc/coredns/NodeHosts", status: Converted, reason: []string{"hosts.file /etc/coredns/NodeHosts"}, noFinding: true},
		{desc: "not a key", text: corefile("/etc/hosts.d/extra"),
			keys: &ConfigMapKeys{Data: map[string]string{"NodeHosts": nodeHosts}, Carry: true, CheckKey: checkKey},
			file: "/etc/hosts.d/extra", status: Converted, reason: []string{"hosts.file /etc/hosts.d/extra"}, noFinding: true},
		{desc: "not a valid ConfigMap key", text: corefile("/etc/coredns/node:hosts"),
			keys:    &ConfigMapKeys{Data: map[string]string{"node:hosts": nodeHosts}, Carry: true, CheckKey: checkKey},
			wantErr: []string{`hosts file /etc/coredns/node:hosts: ConfigMap key "node:hosts" cannot be carried in the output ConfigMap: no colon; see the key rule`}},
		{desc: "no key check", text: corefile("/etc/coredns/NodeHosts"),
			keys:    &ConfigMapKeys{Data: map[string]string{"NodeHosts": nodeHosts}, Carry: true},
			wantErr: []string{`ConfigMap key "NodeHosts": no key check`}},
		{desc: "the key of the configuration", text: corefile("/etc/coredns/config.yaml"),
			keys:    &ConfigMapKeys{Data: map[string]string{"config.yaml": nodeHosts}, Carry: true, CheckKey: checkKey},
			wantErr: []string{`ConfigMap key "config.yaml" cannot be carried`, "the converted ServerConfiguration is its key config.yaml"}},
		{desc: "not a valid key for the chart's values", text: corefile("/etc/coredns/node:hosts"),
			keys:    &ConfigMapKeys{Data: map[string]string{"node:hosts": nodeHosts}, Carry: true, Helm: true, CheckKey: checkKey},
			wantErr: []string{`ConfigMap key "node:hosts" cannot be carried in dns.files.node:hosts: no colon`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(tc.text)}, tc.keys)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; hosts.file %q", r.Config.Hosts.File)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q, want it to contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Config.Hosts.File != tc.file {
				t.Errorf("hosts.file %q, want %q", r.Config.Hosts.File, tc.file)
			}
			if len(r.Files) != len(tc.files) || r.Files["NodeHosts"] != tc.files["NodeHosts"] {
				t.Errorf("files %q, want %q", r.Files, tc.files)
			}
			var hosts []Finding
			for _, f := range r.Findings {
				if f.Plugin == "hosts" {
					hosts = append(hosts, f)
				}
			}
			if len(hosts) != 1 {
				t.Fatalf("hosts findings %+v, want one", hosts)
			}
			if hosts[0].Status != tc.status {
				t.Errorf("status %s, want %s: %s", hosts[0].Status, tc.status, hosts[0].Reason)
			}
			for _, s := range tc.reason {
				if !strings.Contains(hosts[0].Reason, s) {
					t.Errorf("reason %q, want it to contain %q", hosts[0].Reason, s)
				}
			}
			if tc.noFinding && strings.Contains(hosts[0].Reason, "ConfigMap key") {
				t.Errorf("reason %q names a ConfigMap key", hosts[0].Reason)
			}
		})
	}
}

// TestHostsConfigMapKeyInEveryBlock: kubespray puts one hosts file in
// every server block. It is carried once, every block's finding names
// the new place, and no block's is a difference or a second file.
func TestHostsConfigMapKeyInEveryBlock(t *testing.T) {
	const text = "corp.example {\n  hosts /etc/coredns/hosts {\n    fallthrough\n  }\n  forward . 10.0.0.54\n}\n" +
		".:53 {\n  hosts /etc/coredns/hosts {\n    fallthrough\n  }\n  forward . 10.0.0.53\n}\n"
	keys := &ConfigMapKeys{Data: map[string]string{"hosts": "10.1.2.3 legacy.internal\n"}, Carry: true, CheckKey: checkKey}
	r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(text)}, keys)
	if err != nil {
		t.Fatal(err)
	}
	if r.Config.Hosts.File != "/etc/dnsconfigurer/hosts" || len(r.Files) != 1 {
		t.Errorf("hosts.file %q, files %q", r.Config.Hosts.File, r.Files)
	}
	var n int
	for _, f := range r.Findings {
		if f.Plugin != "hosts" {
			continue
		}
		n++
		if f.Status != Converted || !strings.HasPrefix(f.Reason, "hosts.file /etc/dnsconfigurer/hosts") {
			t.Errorf("%s: %s %s, want converted, naming /etc/dnsconfigurer/hosts", f.Where, f.Status, f.Reason)
		}
	}
	if n != 2 {
		t.Errorf("%d hosts findings, want 2", n)
	}
}

// TestResultConfigMap: the ConfigMap holds the configuration under
// config.yaml and each carried file under its key.
func TestResultConfigMap(t *testing.T) {
	r := Result{Files: map[string]string{"NodeHosts": "10.0.0.1 a\n"}}
	b, err := r.ConfigMap("dnsconfigurer-dns", "dns", "kind: ServerConfiguration\n")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind     string
		Metadata struct{ Name, Namespace string }
		Data     map[string]string
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata.Name != "dnsconfigurer-dns" || cm.Metadata.Namespace != "dns" ||
		len(cm.Data) != 2 || cm.Data[ConfigKey] != "kind: ServerConfiguration\n" || cm.Data["NodeHosts"] != "10.0.0.1 a\n" {
		t.Errorf("got:\n%s", b)
	}
	r.Files = map[string]string{ConfigKey: "x"}
	if _, err := r.ConfigMap("n", "ns", "y"); err == nil || !strings.Contains(err.Error(), `"config.yaml"`) {
		t.Errorf("a carried config.yaml: got %v, want an error naming it", err)
	}
}

// TestResultHelmValues: the chart's values hold the configuration as
// dns.config and each carried file in dns.files, none when there is none.
func TestResultHelmValues(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		files map[string]string
		want  string
		err   string
	}{
		{desc: "a hosts file", files: map[string]string{"NodeHosts": "10.0.0.1 a\n"},
			want: "dns:\n  config: |\n    kind: ServerConfiguration\n  files:\n    NodeHosts: |\n      10.0.0.1 a\n"},
		{desc: "no file", want: "dns:\n  config: |\n    kind: ServerConfiguration\n"},
		{desc: "config.yaml", files: map[string]string{ConfigKey: "x"}, err: `dns.files key "config.yaml": the key of dns.config`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			b, err := Result{Files: tc.files}.HelmValues("kind: ServerConfiguration\n")
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("got %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(b) != tc.want {
				t.Errorf("got %v:\n%s\nwant:\n%s", err, b, tc.want)
			}
		})
	}
}

// TestConfigMapDataKubectl: `kubectl get configmap -o yaml` and `-o json`
// output (metadata, managedFields) is read as its data.
func TestConfigMapDataKubectl(t *testing.T) {
	for _, text := range []string{
		"apiVersion: v1\ndata:\n  Corefile: |\n    .:53 {}\n  NodeHosts: |\n    10.0.0.1 a\nkind: ConfigMap\nmetadata:\n  name: coredns\n  namespace: kube-system\n  managedFields:\n  - manager: k3s\n    fieldsV1:\n      f:data:\n        f:NodeHosts: {}\n  resourceVersion: \"1187\"\n",
		`{"apiVersion":"v1","data":{"Corefile":".:53 {}\n","NodeHosts":"10.0.0.1 a\n"},"kind":"ConfigMap","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{}}"},"name":"coredns"}}`,
	} {
		data, ok, err := ConfigMapData([]byte(text))
		if !ok || err != nil || data["Corefile"] != ".:53 {}\n" || data["NodeHosts"] != "10.0.0.1 a\n" || len(data) != 2 {
			t.Errorf("ok %v, %v, data %q; input:\n%s", ok, err, data, text)
		}
	}
}

// TestMountDir: deploy/ mounts ConfigMap dnsconfigurer-dns as a directory
// at MountDir in the cluster DNS pod, and serve reads MountDir/ConfigKey:
// a carried key is a file next to it. overlays/replace-coredns (and
// components/replace-coredns) reuse deploy/dnsserver's Deployment without
// touching its mounts; the chart mounts it at the same place.
func TestMountDir(t *testing.T) {
	b, err := os.ReadFile("../../deploy/dnsserver/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name         string
						Args         []string
						VolumeMounts []struct{ Name, MountPath, SubPath string }
					}
					Volumes []struct {
						Name      string
						ConfigMap *struct{ Name string }
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	vol := ""
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == "dnsconfigurer-dns" {
			vol = v.Name
		}
	}
	found := false
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == vol && m.MountPath == MountDir && m.SubPath == "" {
				found = slices.Contains(c.Args, "--config="+path.Join(MountDir, ConfigKey))
			}
		}
	}
	if vol == "" || !found {
		t.Errorf("deploy/dnsserver/deployment.yaml: want ConfigMap dnsconfigurer-dns mounted as a directory at %s and --config=%s/%s", MountDir, MountDir, ConfigKey)
	}
	for _, f := range []string{"../../deploy/overlays/replace-coredns/dns/kustomization.yaml", "../../deploy/components/replace-coredns/kustomization.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "volume") || strings.Contains(string(b), "mountPath") {
			t.Errorf("%s changes the cluster DNS's mounts: check MountDir", f)
		}
	}
	// The chart's pod template is shared by its Deployments (one, or one
	// per topology zone).
	b, err = os.ReadFile("../../charts/dnsconfigurer/templates/_dnsserver.tpl")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "mountPath: "+MountDir+"\n") || !strings.Contains(string(b), "--config="+path.Join(MountDir, ConfigKey)) {
		t.Errorf("charts/dnsconfigurer/templates/_dnsserver.tpl: want the ConfigMap at %s", MountDir)
	}
}

// TestConvertInput: a Corefile, a kube-dns ConfigMap and the coredns
// ConfigMap of a manifest each convert; the report opens with the object
// taken, and the ConfigMap's import reads its other key.
func TestConvertInput(t *testing.T) {
	const manifest = `apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: kube-system}
data: {Corefile: ".:53 {\n  forward . 10.9.9.9\n}\n"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
      import upstream.conf
    }
  upstream.conf: |
    forward . 10.0.0.53
`
	for _, tc := range []struct {
		name, text string
		upstream   string // the default route's first upstream
		taken      bool   // the report opens with an input finding
	}{
		{"Corefile", ".:53 {\n  forward . 10.0.0.53\n}\n", "10.0.0.53", false},
		{"kube-dns", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-dns}\ndata: {upstreamNameservers: '[\"10.0.0.53\"]'}\n", "10.0.0.53", false},
		{"manifest", manifest, "10.0.0.53", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ConvertInput(t.Context(), tc.name, []byte(tc.text), nil, ConfigMapKeys{CheckKey: checkKey})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(r.Config.Forward, func(f v1alpha1.ForwardRoute) bool { return f.Zone == "." })
			if i < 0 || r.Config.Forward[i].Upstreams[0] != tc.upstream {
				t.Errorf("forward %+v, want . to %s", r.Config.Forward, tc.upstream)
			}
			if taken := len(r.Findings) > 0 && r.Findings[0].Plugin == "input"; taken != tc.taken {
				t.Errorf("findings %+v: an input finding first %v, want %v", r.Findings, taken, tc.taken)
			}
		})
	}
}
