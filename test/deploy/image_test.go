package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// kustomizeVersion is the kustomize CLI test/testbin/kustomize.sh builds.
const kustomizeVersion = "v5.7.1"

// envKustomize names the kustomize binary to run; when set, a missing one
// fails the test rather than skips it (CI sets it).
const envKustomize = "DNSCONFIGURER_KUSTOMIZE"

// kustomizeBin finds the kustomize CLI: $DNSCONFIGURER_KUSTOMIZE, else the
// one test/testbin/kustomize.sh caches, else kustomize in PATH. It skips
// the test without one.
func kustomizeBin(t *testing.T) string {
	t.Helper()
	if p, ok := testkit.EnvBin(t, envKustomize); ok {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	if cache != "" {
		p := filepath.Join(cache, "dnsconfigurer", "kustomize", kustomizeVersion, "kustomize")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath("kustomize"); err == nil {
		return p
	}
	t.Skip("no kustomize CLI: run test/testbin/kustomize.sh (kubectl kustomize has no edit)")
	return ""
}

// readmeSetImage is the image argument of deploy/README.md's
// `kustomize edit set image NAME=REGISTRY/dnsconfigurer:TAG`, with
// REGISTRY and TAG filled in from image.
func readmeSetImage(t *testing.T, image string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(deployDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(?:cd deploy && )?kustomize edit set image ([^`\\s]+)`").FindAllSubmatch(readme, -1)
	if len(m) != 1 {
		t.Fatalf("deploy/README.md: %d `kustomize edit set image ...` commands, want 1", len(m))
	}
	registry, tag, ok := strings.Cut(image, ":")
	registry = strings.TrimSuffix(registry, "/dnsconfigurer")
	if !ok || registry == image {
		t.Fatalf("image %q: want REGISTRY/dnsconfigurer:TAG", image)
	}
	arg := strings.NewReplacer("REGISTRY", registry, "TAG", tag).Replace(string(m[0][1]))
	if !strings.HasSuffix(arg, "="+image) {
		t.Fatalf("deploy/README.md: set image %s: want NAME=REGISTRY/dnsconfigurer:TAG", m[0][1])
	}
	return arg
}

// TestSetImage runs deploy/README.md's `kustomize edit set image` with
// the real kustomize CLI in a copy of deploy/: in deploy/, in each overlay
// and example, in deploy/base, and in kustomizations of one's own on top
// of deploy/base, deploy/ and an overlay. kubectl kustomize then renders
// each, and every container and init container that rendered with the
// placeholder dnsconfigurer:latest must have the new image; the others
// (the autoscaler) keep theirs.
func TestSetImage(t *testing.T) {
	kustomize := kustomizeBin(t)
	const image = "registry.example/dnsconfigurer:v9.9.9"
	arg := readmeSetImage(t, image)

	entries := []string{"deploy", "deploy/base", "own-on-base", "own-on-deploy", "own-on-side-by-side"}
	for _, parent := range []string{"overlays", "examples"} {
		dirs, err := os.ReadDir(filepath.Join(deployDir, parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			entries = append(entries, filepath.Join("deploy", parent, d.Name()))
		}
	}
	for _, entry := range entries {
		t.Run(strings.ReplaceAll(entry, "/", "_"), func(t *testing.T) {
			// Each in a fresh copy: an edit in deploy/base shows in
			// everything built on it.
			dir := filepath.Join(setImageTree(t), entry)
			before := renderedContainers(t, dir)
			if len(before) == 0 {
				if entry == "deploy/examples/cilium" {
					t.Skipf("%s renders no container: a policy only", entry)
				}
				t.Fatalf("%s renders no container", entry)
			}
			cmd := exec.Command(kustomize, "edit", "set", "image", arg)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cd %s && kustomize edit set image %s: %v\n%s", entry, arg, err, out)
			}
			after := renderedContainers(t, dir)
			if len(after) != len(before) {
				t.Fatalf("%d containers after set image, %d before", len(after), len(before))
			}
			ours := 0
			for i, c := range after {
				want := before[i].image
				if before[i].image == renderedImage {
					want = image
					ours++
				}
				if c.where != before[i].where || c.image != want {
					t.Errorf("%s: image %q (before: %s %q), want %q", c.where, c.image, before[i].where, before[i].image, want)
				}
			}
			// The node agent, the node-local stage, the cluster DNS and the
			// webhook; base/ and the overlays have them all.
			if ours < 4 {
				t.Errorf("%d dnsconfigurer containers rendered, want at least 4", ours)
			}
		})
	}
}

// container is one container of a rendered workload.
type container struct{ where, image string }

// renderedContainers renders dir with kubectl kustomize and lists the
// containers and init containers of its Deployments and DaemonSets (none
// for a kustomization of other objects).
func renderedContainers(t *testing.T, dir string) []container {
	t.Helper()
	r, _ := renderObjects(t, dir)
	var cs []container
	for _, w := range r.workloads() {
		for _, c := range slices.Concat(w.spec.InitContainers, w.spec.Containers) {
			cs = append(cs, container{fmt.Sprintf("%s %s container %s", w.kind, w.name, c.Name), c.Image})
		}
	}
	return cs
}

// setImageTree copies deploy/ into a temporary directory and writes an
// operator's own kustomizations next to it, as in a checkout of the
// project: own-on-base (deploy/base with its own cluster settings),
// own-on-deploy and own-on-side-by-side. It returns the directory.
func setImageTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	copied := filepath.Join(root, "deploy")
	if err := os.CopyFS(copied, os.DirFS(deployDir)); err != nil {
		t.Fatal(err)
	}
	settings, err := os.ReadFile(filepath.Join(deployDir, "cluster-settings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]string{
		"own-on-base":         "resources:\n- ../deploy/base\n- cluster-settings.yaml\ncomponents:\n- ../deploy/components/cluster-settings\n",
		"own-on-deploy":       "resources:\n- ../deploy\n",
		"own-on-side-by-side": "resources:\n- ../deploy/overlays/side-by-side\n",
	}
	for dir, k := range own {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "cluster-settings.yaml"), settings, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	return root
}
