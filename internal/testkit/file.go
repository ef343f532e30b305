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

// EnvBin is the program $env names, when it is set: a file that is not
// there fails t (CI sets the variable so that a lost binary fails, not
// skips). ok is false when env is unset, for the caller's own search.
func EnvBin(t testing.TB, env string) (path string, ok bool) {
	t.Helper()
	path = os.Getenv(env)
	if path == "" {
		return "", false
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("$%s: %v", env, err)
	}
	return path, true
}
