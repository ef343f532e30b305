package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// k3sConfigMap is k3s's coredns ConfigMap as kubectl prints it, with its
// NodeHosts key (SOURCE in its comment).
const k3sConfigMap = "../../pkg/corefile/testdata/k3s-kubectl/configmap.yaml"

// TestChartHelmValues: `convert --helm-values` on k3s's ConfigMap, given
// to helm template -f, renders NodeHosts as a key of the cluster DNS's
// ConfigMap and of node-local's copy, mounted in both pods where the
// rendered config.yaml's hosts.file names it; validate accepts the
// output. Both placements, node-local on and off.
func TestChartHelmValues(t *testing.T) {
	helm := helmBin(t)
	bin := buildbin.Dnsconfigurer(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if out, err := exec.CommandContext(t.Context(), bin, "convert", "--helm-values", "--output", values, k3sConfigMap).CombinedOutput(); err != nil {
		t.Fatalf("convert --helm-values: %v\n%s", err, out)
	}
	const nodeHosts = "192.168.1.10 k3s-server\n192.168.1.11 k3s-agent-1\n"
	for _, tc := range []struct {
		placement, ns string
		nodeLocal     bool
	}{
		{"side-by-side", "dnsconfigurer", true},
		{"replace-coredns", "kube-system", true},
		{"side-by-side", "dnsconfigurer", false},
	} {
		t.Run(tc.placement+"/nodelocal="+map[bool]string{true: "on", false: "off"}[tc.nodeLocal], func(t *testing.T) {
			out := helmTemplate(t, helm, "-f", values, "--set", "placement="+tc.placement,
				"--set", "nodeLocal.enabled="+map[bool]string{true: "true", false: "false"}[tc.nodeLocal])
			objs := chartObjectsAll(t, out)
			cm := objs[objectKey{"ConfigMap", tc.ns, "dnsconfigurer-dns"}]
			if got := get(cm, "data", "NodeHosts"); got != nodeHosts {
				t.Fatalf("ConfigMap %s/dnsconfigurer-dns: NodeHosts %q, want %q", tc.ns, got, nodeHosts)
			}
			cfgText, _ := get(cm, "data", "config.yaml").(string)
			var cfg v1alpha1.ServerConfiguration
			if err := yaml.UnmarshalStrict([]byte(cfgText), &cfg); err != nil {
				t.Fatalf("config.yaml: %v", err)
			}
			if cfg.Hosts.File == "" {
				t.Fatalf("config.yaml names no hosts.file:\n%s", cfgText)
			}
			dep := objs[objectKey{"Deployment", tc.ns, "dnsconfigurer-dns"}]
			wantFile(t, objs, dep, tc.ns, "--config=", "dnsconfigurer-dns", "config.yaml")
			wantMounted(t, objs, dep, tc.ns, cfg.Hosts.File, "dnsconfigurer-dns", "NodeHosts")
			if tc.nodeLocal {
				ds := objs[objectKey{"DaemonSet", "dnsconfigurer-node", "dnsconfigurer-node-local-dns"}]
				copyCM := objs[objectKey{"ConfigMap", "dnsconfigurer-node", "dnsconfigurer-cluster-dns"}]
				if got := get(copyCM, "data", "NodeHosts"); got != nodeHosts {
					t.Errorf("node-local's copy: NodeHosts %q, want %q", got, nodeHosts)
				}
				if got := get(copyCM, "data", "config.yaml"); got != cfgText {
					t.Errorf("node-local's copy of config.yaml differs:\n%s", got)
				}
				wantFile(t, objs, ds, "dnsconfigurer-node", "--cluster-config=", "dnsconfigurer-cluster-dns", "config.yaml")
				wantMounted(t, objs, ds, "dnsconfigurer-node", cfg.Hosts.File, "dnsconfigurer-cluster-dns", "NodeHosts")
			}
			lint(t, bin, "helm template -f values.yaml "+tc.placement, out, nil, "Deployment")
		})
	}
}

// wantFile checks that the first container's argument with prefix names
// a file that is key of ConfigMap cm.
func wantFile(t *testing.T, objs map[objectKey]map[string]any, w map[string]any, ns, prefix, cm, key string) {
	t.Helper()
	for _, a := range args(firstContainer(w)) {
		if p, ok := strings.CutPrefix(a, prefix); ok {
			wantMounted(t, objs, w, ns, p, cm, key)
			return
		}
	}
	t.Errorf("no argument %s...", prefix)
}

// wantMounted checks that path, in the first container of workload w, is
// key of ConfigMap cm in namespace ns, mounted without subPath (which the
// kubelet does not update). The deepest mount holding path is the one the
// container sees.
func wantMounted(t *testing.T, objs map[objectKey]map[string]any, w map[string]any, ns, path, cm, key string) {
	t.Helper()
	mounts, _ := firstContainer(w)["volumeMounts"].([]any)
	var mount any
	rel, dir := "", ""
	for _, m := range mounts {
		d, _ := get(m, "mountPath").(string)
		if r, ok := strings.CutPrefix(path, strings.TrimSuffix(d, "/")+"/"); ok && len(d) > len(dir) {
			mount, rel, dir = m, r, d
		}
	}
	if mount == nil {
		t.Errorf("%s: not under any mount", path)
		return
	}
	if sub, _ := get(mount, "subPath").(string); sub != "" {
		t.Errorf("%s: mounted with subPath %q: the kubelet does not update it", path, sub)
	}
	vol := volume(w, get(mount, "name"))
	gotCM, _ := get(vol, "configMap", "name").(string)
	gotKey := ""
	items, _ := get(vol, "configMap", "items").([]any)
	if len(items) == 0 && !strings.Contains(rel, "/") {
		gotKey = rel
	}
	for _, it := range items {
		if get(it, "path") == rel {
			gotKey, _ = get(it, "key").(string)
		}
	}
	if gotCM != cm || gotKey != key {
		t.Errorf("%s: ConfigMap %q key %q (mount %s), want ConfigMap %q key %q", path, gotCM, gotKey, dir, cm, key)
	}
	if _, ok := objs[objectKey{"ConfigMap", ns, cm}]; !ok {
		t.Errorf("no ConfigMap %s/%s rendered", ns, cm)
	}
}

// volume returns the pod template's volume named name.
func volume(w map[string]any, name any) any {
	vols, _ := get(w, "spec", "template", "spec", "volumes").([]any)
	for _, v := range vols {
		if get(v, "name") == name {
			return v
		}
	}
	return nil
}

// TestChartFilesRefused: a dns.files key that cannot be a file beside
// config.yaml is refused, naming it.
func TestChartFilesRefused(t *testing.T) {
	helm := helmBin(t)
	for _, tc := range []struct {
		key, want string
	}{
		{"node:hosts", "dns.files.node:hosts: not a ConfigMap key: use only letters, digits, '-', '_' and '.'"},
		{"..data", "dns.files...data: not a ConfigMap key: must not be '.' or start with '..'"},
		{".", "dns.files..: not a ConfigMap key"},
		{strings.Repeat("a", 254), "not a ConfigMap key: longer than 253 characters"},
		{"config.yaml", "dns.files.config.yaml: config.yaml is the ServerConfiguration's own key (dns.config)"},
		{"cluster", "dns.files.cluster: node-local reads the cluster DNS's configuration from /etc/dnsconfigurer/cluster"},
	} {
		t.Run(tc.key[:min(len(tc.key), 20)], func(t *testing.T) {
			b, err := yaml.Marshal(map[string]any{"dns": map[string]any{"files": map[string]string{tc.key: "10.0.0.1 a\n"}}})
			if err != nil {
				t.Fatal(err)
			}
			values := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(values, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = helmTemplateErr(t, helm, "-f", values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("dns.files key %q: %v, want an error with %q", tc.key, err, tc.want)
			}
		})
	}
}
