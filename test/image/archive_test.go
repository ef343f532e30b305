package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestMain removes the archive the tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// shared is the archive sharedArchive builds once per test binary: a build
// takes minutes on two cores.
var shared struct {
	once sync.Once
	dir  string
	ok   bool
}

// sharedArchive is an archive hack/build-image wrote with IMAGE=imageName,
// built at the first call. It fails t when that build failed.
func sharedArchive(t *testing.T, root string) string {
	t.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "dnsconfigurer-image-test-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = dir
		buildArchive(t, root, filepath.Join(dir, "dc.tar"))
		shared.ok = true
	})
	if !shared.ok {
		t.Fatal("the shared archive failed to build (see the first test that asked for it)")
	}
	return filepath.Join(shared.dir, "dc.tar")
}

// needBuildTools skips t when hack/build-image cannot run here: no go,
// bash or git, or no CA bundle to copy into the image.
func needBuildTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"go", "bash", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s command: %v", tool, err)
		}
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err != nil {
		t.Skipf("no CA bundle to build the image with (apt-get install ca-certificates): %v", err)
	}
}

// buildArchive runs hack/build-image OUT with IMAGE=imageName.
func buildArchive(t *testing.T, root, out string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "hack", "build-image"), out)
	cmd.Dir = filepath.Dir(out) // OUT is relative to the caller, not to the module
	cmd.Env = append(os.Environ(), "IMAGE="+imageName)
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/build-image: %v\n%s", err, msg)
	}
	t.Logf("%s(%v)", msg, time.Since(start).Round(100*time.Millisecond))
}
