package testkit

import (
	"os"
	"testing"
)

// WriteAtomic replaces path with content by a rename of a file written
// beside it, as kubelet updates a mounted file and a resolv.conf manager
// writes: a reader sees the old file or the new one.
func WriteAtomic(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
