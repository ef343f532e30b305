package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ImageLayer reads the only layer of img, uncompressed; it fails t when
// img has another number of layers.
func ImageLayer(t testing.TB, img v1.Image) []TarFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return ReadTar(t, rc)
}

// GoVersionM is what `go version -m` lists for bin, as path@version
// sorted: stdlib at the binary's Go version, the main module at version,
// each dependency at its version (or its replacement's).
func GoVersionM(t testing.TB, bin []byte, version string) []string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "version", "-m", p).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var mods []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && strings.HasSuffix(f[0], ":"): // the first line: "PATH: go1.x"
			mods = append(mods, "stdlib@"+f[1])
		case len(f) >= 2 && f[0] == "mod":
			mods = append(mods, f[1]+"@"+version)
		case len(f) >= 3 && f[0] == "dep":
			mods = append(mods, f[1]+"@"+f[2])
		case len(f) >= 3 && f[0] == "=>": // the replacement of the dep before
			mods[len(mods)-1] = f[1] + "@" + f[2]
		}
	}
	slices.Sort(mods)
	return mods
}
