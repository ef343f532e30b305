package containerd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

var (
	imagesOnce sync.Once
	imagesTars map[string][]byte
	imagesErr  error
	pauseBin   []byte
)

// PauseBinary returns the static pause binary (test/e2e/images/pause) that
// PauseImage holds, building it on first use, for other images that need
// one (test/cluster's stand-in of the upstream pause image).
func PauseBinary(ctx context.Context) ([]byte, error) {
	if _, err := buildImages(ctx); err != nil {
		return nil, err
	}
	return pauseBin, nil
}

// buildImages builds the pause and test binaries (static, CGO_ENABLED=0)
// from test/e2e/images and packs each as an OCI image tarball. It runs
// once per test process; the result maps image reference to tarball.
func buildImages(ctx context.Context) (map[string][]byte, error) {
	imagesOnce.Do(func() {
		imagesTars, imagesErr = buildImagesOnce(ctx)
	})
	return imagesTars, imagesErr
}

func buildImagesOnce(ctx context.Context) (map[string][]byte, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	out, err := os.MkdirTemp("", "dnscfg-e2e-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", out+"/",
		"./test/e2e/images/pause", "./test/e2e/images/testbin")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build e2e image binaries: %w: %s", err, b)
	}
	pause, err := os.ReadFile(filepath.Join(out, "pause"))
	if err != nil {
		return nil, err
	}
	pauseBin = pause
	testbin, err := os.ReadFile(filepath.Join(out, "testbin"))
	if err != nil {
		return nil, err
	}
	etc := []ImageFile{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/:" + TestBinary + "\nnobody:x:65534:65534:nobody:/:" + TestBinary + "\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	env := []string{"PATH=/"}
	imgs := []Image{
		{Ref: PauseImage, Files: append([]ImageFile{{Path: "/pause", Mode: 0o755, Data: pause}}, etc...), Entrypoint: []string{"/pause"}, Env: env},
		{Ref: TestImage, Files: append([]ImageFile{{Path: TestBinary, Mode: 0o755, Data: testbin}}, etc...), Entrypoint: []string{TestBinary}, Cmd: []string{"sleep"}, Env: env},
	}
	tars := map[string][]byte{}
	for _, img := range imgs {
		var buf bytes.Buffer
		if err := WriteImage(&buf, img); err != nil {
			return nil, err
		}
		tars[img.Ref] = buf.Bytes()
	}
	return tars, nil
}

// ModuleRoot finds the module's root directory from this source file's
// location (test/e2e/containerd/build.go).
func ModuleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("locate module root: no caller information")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("locate module root: %w", err)
	}
	return root, nil
}
