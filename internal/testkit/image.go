package testkit

import (
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
