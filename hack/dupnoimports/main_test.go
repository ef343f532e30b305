package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBlankImports(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"block", "package p\n\nimport (\n\t\"fmt\"\n\n\tx \"os\"\n)\n\nvar _ = fmt.Sprint\n", "package p\n\n\n\n\n\n\n\nvar _ = fmt.Sprint\n"},
		{"single", "package p\n\nimport \"fmt\"\n\nvar v = 1\n", "package p\n\n\n\nvar v = 1\n"},
		{"a paren in code", "package p\n\nfunc f() {\n\tg(\n\t)\n}\n", "package p\n\nfunc f() {\n\tg(\n\t)\n}\n"},
	} {
		if got := string(blankImports([]byte(tc.in))); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCopyFileLinks: a tracked link to a folder (test/testbin has them)
// is left out, not read, and a regular file is copied with its imports
// blanked.
func TestCopyFileLinks(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(src, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dir", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a.go"), []byte("package p\n\nimport \"fmt\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(filepath.Join(src, "link"), filepath.Join(dst, "link")); err != nil {
		t.Fatalf("link: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "link")); !os.IsNotExist(err) {
		t.Errorf("link copied: %v", err)
	}
	if err := copyFile(filepath.Join(src, "a.go"), filepath.Join(dst, "a.go")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a.go")); err != nil || string(b) != "package p\n\n\n" {
		t.Errorf("a.go: %q, %v", b, err)
	}
}
