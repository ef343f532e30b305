package deploy

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/gendeploy"
)

// TestGenerated: deploy/'s resource files are what hack/gendeploy makes of
// charts/dnsconfigurer, byte for byte, and a hand edit is caught.
func TestGenerated(t *testing.T) {
	files, err := gendeploy.Generate(t.Context(), helmBin(t), "../..")
	if err != nil {
		t.Fatalf("%s: %v", gendeploy.Command, err)
	}
	t.Run("up to date", func(t *testing.T) {
		// What `go run ./hack/gendeploy -out DIR` writes, read back.
		out := t.TempDir()
		if err := gendeploy.Write(out, files); err != nil {
			t.Fatal(err)
		}
		written := readTree(t, out)
		if len(written) != len(files) {
			t.Fatalf("wrote %d files, generated %d", len(written), len(files))
		}
		drifts, err := gendeploy.Compare(deployDir, written)
		if err != nil {
			t.Fatal(err)
		}
		if msg := gendeploy.Error(drifts); msg != "" {
			t.Error(msg)
		}
		t.Logf("%d generated files up to date", len(written))
	})
	t.Run("hand edit caught", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(deployDir)); err != nil {
			t.Fatal(err)
		}
		// One line of a rendered file changed, a byte-for-byte copy with a
		// trailing space, a generated file deleted, and a file claiming to
		// be generated that no longer is.
		edited := "dnsserver/service.yaml"
		b := files[edited]
		line := 1 + bytes.Count(b[:bytes.Index(b, []byte("  - name: dns-tcp\n"))], []byte("\n"))
		writeFile(t, filepath.Join(dir, "dnsserver"), "service.yaml", bytes.Replace(b, []byte("  - name: dns-tcp\n"), []byte("  - name: dns-tcp2\n"), 1))
		writeFile(t, filepath.Join(dir, "monitoring"), "dashboard.json", append(bytes.Clone(files["monitoring/dashboard.json"]), ' '))
		if err := os.Remove(filepath.Join(dir, "nodelocal", "rbac.yaml")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "shim"), "configmap.yaml", []byte(gendeploy.Header+"apiVersion: v1\nkind: ConfigMap\n"))

		drifts, err := gendeploy.Compare(dir, files)
		if err != nil {
			t.Fatal(err)
		}
		msg := gendeploy.Error(drifts)
		t.Logf("the failure reads:\n%s", msg)
		for _, want := range []string{
			"deploy/" + edited + ":" + strconv.Itoa(line) + `: have "  - name: dns-tcp2", want "  - name: dns-tcp"`,
			"deploy/monitoring/dashboard.json:",
			"deploy/nodelocal/rbac.yaml: missing",
			"deploy/shim/configmap.yaml: has the generated header",
			"regenerate: " + gendeploy.Command,
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("the failure does not say %q", want)
			}
		}
		if len(drifts) != 4 {
			t.Errorf("%d drifts, want 4", len(drifts))
		}
	})
}

// readTree reads every file under dir by its slash path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, p))
		files[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
