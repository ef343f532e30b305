package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// helmVersion is the helm CLI test/testbin/helm.sh builds.
const helmVersion = "v3.19.0"

// envHelm names the helm binary to run; when set, a missing one fails the
// test rather than skips it (CI sets it).
const envHelm = "DNSCONFIGURER_HELM"

// lintSummary is the part of validate -o json a lint test reads.
type lintSummary struct {
	Results []struct {
		Kind string `json:"kind"`
	} `json:"results"`
	Summary struct {
		Templates int `json:"templates"`
		Errors    int `json:"errors"`
		Warnings  int `json:"warnings"`
	} `json:"summary"`
}

// lint runs dnsconfigurer validate -f - on manifests (with extra flags)
// and wants exit 0, no finding, and a template of each kind in wantKinds.
func lint(t *testing.T, bin, what string, manifests []byte, extra []string, wantKinds ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"validate", "-f", "-", "-o", "json"}, extra...)...)
	cmd.Stdin = bytes.NewReader(manifests)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: dnsconfigurer validate: %v\n%s\n%s", what, err, out, stderr.String())
	}
	var s lintSummary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("%s: validate -o json: %v", what, err)
	}
	if s.Summary.Errors != 0 || s.Summary.Warnings != 0 {
		t.Errorf("%s: %d errors, %d warnings:\n%s", what, s.Summary.Errors, s.Summary.Warnings, out)
	}
	kinds := map[string]bool{}
	for _, r := range s.Results {
		kinds[r.Kind] = true
	}
	for _, k := range wantKinds {
		if !kinds[k] {
			t.Errorf("%s: no %s template linted (%d templates): the input is not what the test means", what, k, s.Summary.Templates)
		}
	}
	t.Logf("%s: %d pod templates, clean", what, s.Summary.Templates)
}

// TestLintKustomize: deploy/ and each overlay and example, rendered as
// the issue and a CI job would (kubectl kustomize) and with the standalone
// kustomize CLI, lint cleanly with validate, and with --strict for a node
// with two nameservers. Each renderer skips on its own when it is missing.
func TestLintKustomize(t *testing.T) {
	bin := buildbin.Dnsconfigurer(t)
	strict := strictFlags(t)
	dirs := []struct {
		path  string
		kinds []string
	}{
		{".", []string{"Deployment", "DaemonSet"}},
		{"overlays/side-by-side", []string{"Deployment", "DaemonSet"}},
		{"overlays/replace-coredns", []string{"Deployment", "DaemonSet"}},
		{"overlays/nri", []string{"Deployment", "DaemonSet"}},
		{"examples/autoscaler", []string{"Deployment"}},
		{"examples/node-resolver", []string{"DaemonSet"}},
	}
	for _, r := range []struct {
		name string
		argv func(t *testing.T) []string // the command before the directory
	}{
		{"kubectl kustomize", func(t *testing.T) []string { return []string{kubectlBin(t), "kustomize"} }},
		{"kustomize build", func(t *testing.T) []string { return []string{kustomizeBin(t), "build"} }},
	} {
		t.Run(r.name, func(t *testing.T) {
			argv := r.argv(t)
			t.Logf("%s: %s", r.name, argv[0])
			for _, dir := range dirs {
				t.Run(dir.path, func(t *testing.T) {
					what := r.name + " deploy/" + dir.path
					cmd := exec.CommandContext(t.Context(), argv[0], append(argv[1:], filepath.Join(deployDir, dir.path))...)
					out, err := cmd.Output()
					if err != nil {
						t.Fatalf("%s: %v", what, stderrOf(err))
					}
					lint(t, bin, what, out, nil, dir.kinds...)
					lint(t, bin, what+" (--strict)", out, strict, dir.kinds...)
				})
			}
		})
	}
}

// kubectlBin finds kubectl: the one test/testbin/build.sh builds
// ($DNSCONFIGURER_TESTBIN, which .ci/run sets, or build.sh's cache), else
// kubectl in PATH, as test/integration/webhook does. It skips the test
// without one.
func kubectlBin(t *testing.T) string {
	t.Helper()
	var dirs []string
	if d := os.Getenv(apiserver.EnvBinDir); d != "" {
		dirs = append(dirs, d)
	}
	if d, err := apiserver.BinDir(); err == nil {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		p := filepath.Join(d, "kubectl")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	t.Skipf("no kubectl: not in $%s (test/testbin/build.sh) nor in PATH; "+
		"install kubectl 1.27 or newer (kustomize v5) to render with kubectl kustomize", apiserver.EnvBinDir)
	return ""
}

// TestLintHelm: helm template of real charts lints cleanly, also with
// --strict: helm's own
// starter chart (helm create: a Deployment and a test Pod) and the MariaDB
// chart helm carries in its module's testdata (a StatefulSet).
func TestLintHelm(t *testing.T) {
	helm := helmBin(t)
	bin := buildbin.Dnsconfigurer(t)
	dir := t.TempDir()
	create := exec.CommandContext(t.Context(), helm, "create", "starter")
	create.Dir = dir
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("helm create: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), helm, "template", "web", filepath.Join(dir, "starter")).Output()
	if err != nil {
		t.Fatalf("helm template starter: %v", stderrOf(err))
	}
	lint(t, bin, "helm template (helm create)", out, nil, "Deployment", "Pod")
	lint(t, bin, "helm template (helm create, --strict)", out, strictFlags(t), "Deployment", "Pod")

	chart := filepath.Join(helmModule(t), "pkg", "action", "testdata", "charts", "chart-with-uncompressed-dependencies")
	out, err = exec.CommandContext(t.Context(), helm, "template", "db", chart).Output()
	if err != nil {
		t.Fatalf("helm template %s: %v", chart, stderrOf(err))
	}
	lint(t, bin, "helm template (mariadb)", out, nil, "StatefulSet")
	lint(t, bin, "helm template (mariadb, --strict)", out, strictFlags(t), "StatefulSet")
}

// strictFlags are validate --strict on a node with two nameservers.
func strictFlags(t *testing.T) []string {
	t.Helper()
	node := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(node, []byte("nameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch corp.example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--strict", "--resolv-conf", node, "--cluster-dns", "10.96.0.10"}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return err.Error() + "\n" + string(ee.Stderr)
	}
	return err.Error()
}

// helmBin finds the helm CLI: $DNSCONFIGURER_HELM, else the one
// test/testbin/helm.sh caches (built now if missing), else helm in PATH.
// It skips the test only when none can be had (no module proxy).
func helmBin(t *testing.T) string {
	t.Helper()
	if p, ok := testkit.EnvBin(t, envHelm); ok {
		return p
	}
	out, err := exec.CommandContext(t.Context(), "bash", "../testbin/helm.sh").Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	if p, lerr := exec.LookPath("helm"); lerr == nil {
		return p
	}
	t.Skipf("no helm CLI: test/testbin/helm.sh could not build it: %v", stderrOf(err))
	return ""
}

// helmModule is the source of the helm module helm.sh builds, from the
// module cache (go mod download fetches it when it is not there).
func helmModule(t *testing.T) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", "helm.sh/helm/v3@"+helmVersion)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download helm.sh/helm/v3@%s: %v", helmVersion, stderrOf(err))
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download helm.sh/helm/v3@%s: no Dir in %s (%v)", helmVersion, out, err)
	}
	return mod.Dir
}
