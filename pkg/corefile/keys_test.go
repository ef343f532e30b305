package corefile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// TestKeysFS: a ConfigMap's keys but Corefile are the files of a root, as
// the kubelet mounts them; a key that is no file name is an error.
func TestKeysFS(t *testing.T) {
	data := map[string]string{"Corefile": ".:53 {\n}\n", "a.server": "a.example {\n}\n", "b.server": "", "NodeHosts": "10.0.0.1 a\n"}
	fsys, err := KeysFS(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(fsys, "a.server", "b.server", "NodeHosts"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fsys, "Corefile"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Corefile is a file: %v", err)
	}
	for pattern, want := range map[string][]string{"*.server": {"a.server", "b.server"}, "a.server": {"a.server"}, "Corefile": nil, "*": {"NodeHosts", "a.server", "b.server"}, "x*": nil} {
		if got, err := fs.Glob(fsys, pattern); err != nil || !slices.Equal(got, want) {
			t.Errorf("Glob(%q) = %v, %v; want %v", pattern, got, err, want)
		}
	}
	for _, key := range []string{"../etc", `a\b`, ".", "..", ""} {
		if _, err := KeysFS(map[string]string{key: "x"}); err == nil || !strings.Contains(err.Error(), "not a file name") {
			t.Errorf("key %q: %v, want not a file name", key, err)
		}
	}
}

// TestConfigMapImportsInMemory: a ConfigMap's imports read its keys from
// KeysFS: findings, a block's key line and caddy's errors name the key and
// its line; nothing is read from the working directory.
func TestConfigMapImportsInMemory(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("a.server", []byte("disk.example {\n forward . 10.9.9.9\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	corefile := ".:53 {\n forward . 10.0.0.1\n}\nimport /etc/coredns/custom/*.server\n"
	for _, tc := range []struct {
		name     string
		data     map[string]string
		finding  []string
		err      string
		notFound string
	}{
		{name: "keys", data: map[string]string{"a.server": "\n# a comment\nkey.example {\n forward . 10.0.0.2\n}\n", "b.txt": "not imported"},
			finding: []string{"Corefile:4 import: /etc/coredns/custom/*.server: a.server", "a.server:3 server: key.example: its names", "a.server:4 forward: route key.example"}, notFound: "10.9.9.9"},
		{name: "a caddy error in a key", data: map[string]string{"a.server": "x.example {\n forwardd . 10.0.0.2\n}\n"},
			err: "a.server:2: Error during parsing: Unknown directive 'forwardd'"},
		{name: "a key with a byte order mark", data: map[string]string{"a.server": "\uFEFFbom.example {\n forward . 10.0.0.2\n}\n"},
			finding: []string{"a.server:1 server: bom.example: its names"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.data["Corefile"] = corefile
			keys, err := KeysFS(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(corefile), Imports: keys}, &ConfigMapKeys{Data: tc.data})
			if !testkit.WantErr(t, err, tc.err) {
				return
			}
			var all []string
			for _, f := range r.Findings {
				all = append(all, f.Where+" "+f.Plugin+": "+f.Reason)
			}
			for _, want := range tc.finding {
				if !slices.ContainsFunc(all, func(s string) bool { return strings.HasPrefix(s, want) }) {
					t.Errorf("no finding %q in:\n%s", want, strings.Join(all, "\n"))
				}
			}
			if tc.notFound != "" && strings.Contains(strings.Join(all, "\n"), tc.notFound) {
				t.Errorf("%s, of the working directory's a.server, is in the findings", tc.notFound)
			}
		})
	}
}

// TestImportTokens: caddy opens no file for an import the line rules do
// not see: a quoted "import", a snippet imported before it is defined; a
// snippet's body is checked where it is imported, as caddy expands it.
func TestImportTokens(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("secret-token forward\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, text, err string
	}{
		{name: "quoted import", text: ".:53 {\n  \"import\" " + secret + "\n}\n", err: "Corefile:2: import " + secret + ": not a snippet defined above it"},
		{name: "snippet used before it is defined", text: ".:53 {\n  import s\n}\n(s) {\n  forward . 10.0.0.1\n}\n", err: "Corefile:2: import s: not a snippet defined above it"},
		{name: "snippet in a snippet, defined before the use", text: "(a) {\n  import b\n}\n(b) {\n  forward . 10.0.0.1\n}\n.:53 {\n  import a\n}\n"},
		{name: "snippet in a snippet, never defined", text: "(a) {\n  \"import\" b\n}\n.:53 {\n  import a\n  forward . 10.0.0.1\n}\n", err: "Corefile:2: import b: not a snippet defined above it"},
		{name: "snippet defined", text: "(s) {\n  forward . 10.0.0.1\n}\n.:53 {\n  import s\n}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(t.Context(), Input{Name: filepath.Join(dir, "Corefile"), Text: []byte(tc.text)}, nil)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Config.Forward) == 0 {
					t.Errorf("no forward route: %+v", r.Config)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Errorf("the file was read: %v", err)
			}
		})
	}
}

// TestStopsWithContext: ReadSource and Run end with ctx's error once ctx
// has ended.
func TestStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := ReadSource(ctx, "in.yaml", []byte(cmCoreDNS)); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadSource: %v, want context.Canceled", err)
	}
	if _, err := Run(ctx, Input{Name: "Corefile", Text: []byte(".:53 {\n forward . 10.0.0.1\n}\n")}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
}

// TestInputBounds: an input over MaxInputBytes, and a Corefile with more
// than maxImports import lines, are refused with the bound.
func TestInputBounds(t *testing.T) {
	big := make([]byte, MaxInputBytes+1)
	if _, err := ReadSource(t.Context(), "in.yaml", big); err == nil || !strings.Contains(err.Error(), "over 16 MiB: convert reads at most 16 MiB") {
		t.Errorf("ReadSource: %v", err)
	}
	text := ".:53 {\n forward . 10.0.0.1\n}\n" + strings.Repeat("import *.none\n", maxImports+1)
	if _, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(text), Imports: fstest.MapFS{}}, nil); err == nil || !strings.Contains(err.Error(), "more than 64 imports") {
		t.Errorf("Run: %v", err)
	}
}
