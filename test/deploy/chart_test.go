package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// chartDir is the Helm chart of deploy/'s topologies.
const chartDir = "../../charts/dnsconfigurer"

// chartKubeVersion is the Kubernetes version helm template renders for:
// the chart's minimum (Chart.yaml kubeVersion).
const chartKubeVersion = "1.30.0"

// topology is one combination of the chart's choices.
type topology struct {
	agent, placement      string
	nodeLocal, monitoring bool
	// canary is components/canary, canary.enabled (TestChartCanary).
	canary bool
}

func (tp topology) String() string {
	return fmt.Sprintf("%s/%s/nodelocal=%t/monitoring=%t", tp.agent, tp.placement, tp.nodeLocal, tp.monitoring)
}

// topologies are every combination: 2 agents × 2 placements × node-local
// on/off × monitoring on/off.
func topologies() []topology {
	var all []topology
	for _, agent := range []string{"shim", "nri"} {
		for _, placement := range []string{"side-by-side", "replace-coredns"} {
			for _, nl := range []bool{true, false} {
				for _, mon := range []bool{false, true} {
					all = append(all, topology{agent: agent, placement: placement, nodeLocal: nl, monitoring: mon})
				}
			}
		}
	}
	return all
}

// Cluster settings the comparison renders with, other than the defaults
// on both sides, so that every place a setting goes is compared.
const (
	cmpDNS      = "10.100.0.10"
	cmpUpstream = "10.100.0.11"
	cmpDomain   = "cluster.example"
	monitorNS   = "monitoring"
)

// sets are the helm --set flags of tp with the comparison's settings.
func (tp topology) sets() []string {
	return []string{
		"--set", "agent=" + tp.agent, "--set", "placement=" + tp.placement,
		"--set", fmt.Sprintf("nodeLocal.enabled=%t", tp.nodeLocal), "--set", fmt.Sprintf("monitoring.enabled=%t", tp.monitoring),
		"--set", "monitoring.namespace=" + monitorNS,
		"--set", "cluster.dns=" + cmpDNS, "--set", "cluster.dnsUpstream=" + cmpUpstream, "--set", "cluster.domain=" + cmpDomain,
		"--set", "image.tag=latest", "--set", fmt.Sprintf("canary.enabled=%t", tp.canary),
		// deploy/webhook has cert-manager's Certificate.
		"--set", "webhook.certManager.enabled=true",
	}
}

// helmTemplate runs helm template on the chart with args and returns its
// output, or fails the test.
func helmTemplate(t *testing.T, helm string, args ...string) []byte {
	t.Helper()
	out, err := helmTemplateErr(t, helm, args...)
	if err != nil {
		t.Fatalf("helm template %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func helmTemplateErr(t *testing.T, helm string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), helm, append([]string{"template", "dnsconfigurer", chartDir,
		"--namespace", "kube-system", "--kube-version", chartKubeVersion}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// TestChartLint: helm lint --strict is clean and dnsconfigurer validate
// finds nothing in helm template's output, for every topology.
func TestChartLint(t *testing.T) {
	helm := helmBin(t)
	bin := buildbin.Dnsconfigurer(t)
	for _, tp := range topologies() {
		t.Run(tp.String(), func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), helm, append([]string{"lint", "--strict", chartDir, "--kube-version", chartKubeVersion}, tp.sets()...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
			kinds := []string{"Deployment", "DaemonSet"}
			lint(t, bin, "helm template "+tp.String(), helmTemplate(t, helm, tp.sets()...), nil, kinds...)
		})
	}
}

// TestChartMatchesKustomize: for every topology, helm template renders
// the same objects as kustomize does from deploy/'s components for the
// same choices and settings, field for field. Ignored: the helm test Pod,
// the shim ConfigMap's content hash suffix (kustomize) and checksum
// annotation (helm), and helm.sh/resource-policy. deploy/ has overlays for
// some topologies only, so the kustomize side is a kustomization written
// here that composes deploy/'s component directories as deploy/base and
// the overlays do (kustomizationFor); the monitoring add-on is built from
// deploy/monitoring and put in the namespace `kubectl apply -n` would.
func TestChartMatchesKustomize(t *testing.T) {
	helm := helmBin(t)
	kustomize := kustomizeBin(t)
	for _, tp := range topologies() {
		t.Run(tp.String(), func(t *testing.T) {
			dir := kustomizationFor(t, tp)
			out, err := exec.CommandContext(t.Context(), kustomize, "build", dir).Output()
			if err != nil {
				t.Fatalf("kustomize build: %v", stderrOf(err))
			}
			want := chartObjects(t, "kustomize", out)
			if tp.monitoring {
				mon, err := exec.CommandContext(t.Context(), kustomize, "build", filepath.Join(deployDir, "monitoring")).Output()
				if err != nil {
					t.Fatalf("kustomize build deploy/monitoring: %v", stderrOf(err))
				}
				for k, o := range chartObjects(t, "kustomize deploy/monitoring", mon) {
					o["metadata"].(map[string]any)["namespace"] = monitorNS
					k.ns = monitorNS
					want[k] = o
				}
			}
			got := chartObjects(t, "helm", helmTemplate(t, helm, tp.sets()...))
			compareObjects(t, want, got)
			if len(want) < 20 {
				t.Errorf("only %d objects compared", len(want))
			}
		})
	}
}

// TestChartCanary: canary.enabled renders what components/canary does,
// for each agent.
func TestChartCanary(t *testing.T) {
	helm := helmBin(t)
	kustomize := kustomizeBin(t)
	for _, agent := range []string{"shim", "nri"} {
		tp := topology{agent: agent, placement: "side-by-side", nodeLocal: true, canary: true}
		t.Run(tp.String(), func(t *testing.T) {
			out, err := exec.CommandContext(t.Context(), kustomize, "build", kustomizationFor(t, tp)).Output()
			if err != nil {
				t.Fatalf("kustomize build: %v", stderrOf(err))
			}
			compareObjects(t, chartObjects(t, "kustomize", out), chartObjects(t, "helm", helmTemplate(t, helm, tp.sets()...)))
		})
	}
}

// kustomizationFor writes a kustomization of deploy/'s components for tp
// with the comparison's cluster settings, and returns its directory.
func kustomizationFor(t *testing.T, tp topology) string {
	t.Helper()
	dir := t.TempDir()
	deploy, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(deploy, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var k strings.Builder
	fmt.Fprintf(&k, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\n- %s\n", rel("webhook"), rel("namespace-node"))
	if tp.placement == "replace-coredns" {
		// The chart keeps kube-dns (helm.sh/resource-policy: keep); deploy/
		// has it apart, in deploy/kube-dns, which no rollback deletes.
		fmt.Fprintf(&k, "- %s\n- %s\n", rel("overlays/replace-coredns/dns"), rel("kube-dns"))
	} else {
		fmt.Fprintf(&k, "- %s\n", rel("dnsserver"))
	}
	if tp.nodeLocal {
		fmt.Fprintf(&k, "- %s\n", rel("nodelocal"))
	}
	fmt.Fprintf(&k, "- %s\n- cluster-settings.yaml\ncomponents:\n- %s\n", rel(tp.agent), rel("components/cluster-settings"))
	if tp.canary {
		fmt.Fprintf(&k, "- %s\n", rel("components/canary"))
	}
	if tp.placement == "replace-coredns" {
		k.WriteString(`replacements:
- source: {kind: ConfigMap, name: dnsconfigurer-cluster-settings, fieldPath: data.clusterDNS}
  targets:
  - select: {kind: Service, name: kube-dns, namespace: kube-system}
    fieldPaths:
    - spec.clusterIP
`)
	}
	if !tp.nodeLocal {
		// No node-local stage: the agent's --node-local-dns goes (its
		// default is the cluster DNS).
		fmt.Fprintf(&k, `patches:
- target: {kind: DaemonSet, name: dnsconfigurer-%[1]s}
  patch: |
    - op: test
      path: /spec/template/spec/containers/0/args/3
      value: --node-local-dns=169.254.20.10,%[2]s
    - op: remove
      path: /spec/template/spec/containers/0/args/3
`, tp.agent, cmpDNS)
	}
	writeFile(t, dir, "kustomization.yaml", []byte(k.String()))
	writeFile(t, dir, "cluster-settings.yaml", []byte(clusterSettings(cmpDNS, cmpUpstream, cmpDomain)))
	return dir
}

func writeFile(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// objectKey names an object.
type objectKey struct{ kind, ns, name string }

func (k objectKey) String() string { return k.kind + " " + k.ns + "/" + k.name }

// shimConfigMapHash is kustomize's content hash on the shim's ConfigMap.
var shimConfigMapHash = regexp.MustCompile(`^(dnsconfigurer-shim)-[0-9a-z]{10}$`)

// chartObjects decodes a multi-document render into objects by key, in a
// form both renderers share: the helm test Pod dropped, the shim
// ConfigMap's hash suffix and checksum annotation and helm's
// resource-policy annotation removed.
func chartObjects(t *testing.T, what string, out []byte) map[objectKey]map[string]any {
	t.Helper()
	objs := map[objectKey]map[string]any{}
	for i, doc := range splitDocs(out) {
		var o map[string]any
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%s: document %d: %v", what, i+1, err)
		}
		if len(o) == 0 {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if _, hook := ann["helm.sh/hook"]; hook {
			continue
		}
		delete(ann, "helm.sh/resource-policy")
		if ann != nil && len(ann) == 0 {
			delete(md, "annotations")
		}
		name, _ := md["name"].(string)
		name = shimConfigMapHash.ReplaceAllString(name, "$1")
		md["name"] = name
		b, _ := json.Marshal(o)
		b = regexp.MustCompile(`"dnsconfigurer-shim-[0-9a-z]{10}"`).ReplaceAll(b, []byte(`"dnsconfigurer-shim"`))
		o = nil
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatal(err)
		}
		if tmd, ok := nested(o, "spec", "template", "metadata"); ok {
			if tann, ok := tmd["annotations"].(map[string]any); ok {
				delete(tann, "dnsconfigurer.io/config-checksum")
				if len(tann) == 0 {
					delete(tmd, "annotations")
				}
			}
		}
		kind, _ := o["kind"].(string)
		ns, _ := o["metadata"].(map[string]any)["namespace"].(string)
		k := objectKey{kind, ns, name}
		if _, dup := objs[k]; dup {
			t.Errorf("%s: %s twice", what, k)
		}
		objs[k] = o
	}
	return objs
}

// nested returns the map at path in o.
func nested(o map[string]any, path ...string) (map[string]any, bool) {
	for _, p := range path {
		next, ok := o[p].(map[string]any)
		if !ok {
			return nil, false
		}
		o = next
	}
	return o, true
}

// compareObjects wants the same objects with the same content.
func compareObjects(t *testing.T, want, got map[objectKey]map[string]any) {
	t.Helper()
	var keys []objectKey
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case !inGot:
			t.Errorf("%s: kustomize renders it, the chart does not", k)
		case !inWant:
			t.Errorf("%s: the chart renders it, kustomize does not", k)
		case !reflect.DeepEqual(w, g):
			wy, _ := yaml.Marshal(w)
			gy, _ := yaml.Marshal(g)
			t.Errorf("%s differs:\n%s", k, lineDiff(string(wy), string(gy)))
		}
	}
}

// lineDiff lists the lines only one side has (- kustomize, + helm).
func lineDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if count[l] > 0 {
			out = append(out, "- "+l)
			count[l]--
		}
	}
	for l, n := range count {
		for ; n < 0; n++ {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
