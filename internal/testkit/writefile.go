package testkit

import (
	"os"
	"testing"
)

// WriteFile writes content to path (mode 0644) in place, as an editor that
// truncates and writes does; it fails t on error. WriteAtomic replaces a
// file by a rename instead.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
