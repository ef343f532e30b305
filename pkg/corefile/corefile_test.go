package corefile

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// load converts an example directory as `dnsconfigurer convert` does: its
// Corefile, or its configmap.yaml with custom/ as the import directory;
// carry is --configmap.
func load(t *testing.T, dir string, carry bool) Result {
	t.Helper()
	if text, err := os.ReadFile(filepath.Join(dir, "Corefile")); err == nil {
		r, err := Run(t.Context(), Input{Name: filepath.Join(dir, "Corefile"), Text: text}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	text, err := os.ReadFile(filepath.Join(dir, "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, ok, err := ConfigMapData(text)
	if !ok || err != nil {
		t.Fatalf("configmap.yaml: ok %v, %v", ok, err)
	}
	if IsKubeDNS(data) {
		r, err := KubeDNS(data)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	imports, err := KeysFS(data)
	if err != nil {
		t.Fatal(err)
	}
	if custom := filepath.Join(dir, "custom"); dirExists(custom) {
		imports = os.DirFS(custom)
	}
	r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(data["Corefile"]), Imports: imports}, &ConfigMapKeys{Data: data, Carry: carry, CheckKey: checkKey})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update):\n%s", path, got)
	}
}

// TestExamples converts every example under testdata; the configuration
// must validate, and it and the report match their golden files. An
// example whose ConfigMap output (--configmap) carries a key has that
// ConfigMap and its report as golden files too.
func TestExamples(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, dir := range dirs {
		if filepath.Base(dir) == "fuzz" {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			r := load(t, dir, false)
			golden(t, filepath.Join(dir, "config.golden.yaml"), validConfig(t, r))
			golden(t, filepath.Join(dir, "report.golden.txt"), report(t, r))
			r = load(t, dir, true)
			if len(r.Files) == 0 {
				return
			}
			cm, err := r.ConfigMap("dnsconfigurer-dns", "kube-system", string(validConfig(t, r)))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join(dir, "configmap.golden.yaml"), cm)
			golden(t, filepath.Join(dir, "report.configmap.golden.txt"), report(t, r))
		})
	}
}

// validConfig returns r's configuration as YAML; it must validate.
func validConfig(t *testing.T, r Result) []byte {
	t.Helper()
	out, err := yaml.Marshal(r.Config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg v1alpha1.ServerConfiguration
	if err := yaml.UnmarshalStrict(out, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Errorf("the converted configuration does not validate: %v", err)
	}
	return out
}

func report(t *testing.T, r Result) []byte {
	t.Helper()
	var rep bytes.Buffer
	if err := WriteReport(&rep, r.Findings); err != nil {
		t.Fatal(err)
	}
	return rep.Bytes()
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"unknown plugin", ".:53 {\n  forwardd . 1.1.1.1\n}\n", "Corefile:2: Error during parsing: Unknown directive 'forwardd'"},
		{"open block", ".:53 {\n  errors\n", "Corefile:2"},
		{"missing import", ".:53 {\n  import nonexistent/file.conf\n}\n", "Corefile:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(tc.text)}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// dirExists reports a directory at path.
func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// dirFS is os.DirFS, or no file system for "".
func dirFS(dir string) fs.FS {
	if dir == "" {
		return nil
	}
	return os.DirFS(dir)
}
