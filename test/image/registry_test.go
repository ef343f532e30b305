package image

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
	"github.com/dnsconfigurer/dnsconfigurer/test/registry"
)

// archiveIndex is the image index of an archive as its bytes say: the
// index's digest and raw manifest, and each platform's manifest and
// config digest.
type archiveIndex struct {
	digest    v1.Hash
	raw       []byte
	platforms []string           // in index order
	manifests map[string][]byte  // platform -> raw manifest
	configs   map[string]v1.Hash // platform -> config digest
}

// readArchiveIndex reads the index out of the archive's tar, without the
// library that pushes it.
func readArchiveIndex(t *testing.T, path string) archiveIndex {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blobs := map[string][]byte{}
	for _, e := range testkit.ReadTar(t, f) {
		blobs[e.Name] = e.Data
	}
	var top, idx v1.IndexManifest
	if err := json.Unmarshal(blobs["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests", err, len(top.Manifests))
	}
	a := archiveIndex{digest: top.Manifests[0].Digest, manifests: map[string][]byte{}, configs: map[string]v1.Hash{}}
	a.raw = blobs["blobs/sha256/"+a.digest.Hex]
	if err := json.Unmarshal(a.raw, &idx); err != nil {
		t.Fatal(err)
	}
	for _, m := range idx.Manifests {
		p := m.Platform.String()
		a.platforms = append(a.platforms, p)
		a.manifests[p] = blobs["blobs/sha256/"+m.Digest.Hex]
		var im v1.Manifest
		if err := json.Unmarshal(a.manifests[p], &im); err != nil {
			t.Fatal(err)
		}
		a.configs[p] = im.Config.Digest
	}
	return a
}

// TestPushToRegistry pushes the image with hack/push-image to a
// distribution registry with TLS on loopback and reads it back: the same
// index, manifests and layers, byte for byte. Then, as root with
// containerd, it pushes to a registry in the harness's network namespace
// and pulls the image by tag through the CRI, trusting the registry's CA
// through hosts.toml.
func TestPushToRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image: skipped in -short mode")
	}
	registry.Binary(t) // skip before the slow build
	needBuildTools(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	archive := sharedArchive(t, root)
	want := readArchiveIndex(t, archive)
	if !slices.Equal(want.platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("the archive's index has %q", want.platforms)
	}

	reg := registry.Start(t, "127.0.0.23", registry.Options{})
	ref := reg.Ref("dnsconfigurer:pushed")
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "hack", "push-image"), archive, ref, "--ca", reg.CAFile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/push-image: %v\n%s%s\nregistry log:\n%s", err, stdout.String(), stderr.String(), reg.Log())
	}
	t.Logf("hack/push-image (%v, with its go build):\n%s%s", time.Since(start).Round(100*time.Millisecond), stdout.String(), stderr.String())
	wantOut := reg.Host + "/dnsconfigurer@" + want.digest.String() + "\n"
	for _, p := range want.platforms {
		d, _, _ := v1.SHA256(bytes.NewReader(want.manifests[p]))
		wantOut += "  " + p + " " + d.String() + "\n"
	}
	if stdout.String() != wantOut {
		t.Errorf("hack/push-image printed\n%s\nwant\n%s", stdout.String(), wantOut)
	}
	checkRegistry(t, reg, ref, want)

	t.Run("containerd", func(t *testing.T) {
		if _, ok := want.manifests["linux/"+runtime.GOARCH]; !ok {
			t.Skipf("no image for the host's architecture %s", runtime.GOARCH)
		}
		pullWithContainerd(t, archive, want)
	})
}

// checkRegistry reads ref back: the index and every platform's manifest are
// the archive's bytes, and each layer is there at its size.
func checkRegistry(t *testing.T, reg *registry.Registry, ref string, want archiveIndex) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag, reg.RemoteOptions(ctx)...)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := idx.RawManifest()
	if err != nil || !bytes.Equal(raw, want.raw) {
		t.Fatalf("the registry's index of %s differs from the archive's (%v):\n%s\nwant\n%s", ref, err, raw, want.raw)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, d := range im.Manifests {
		p := d.Platform.String()
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.RawManifest()
		if err != nil || !bytes.Equal(m, want.manifests[p]) {
			t.Errorf("%s: the registry's manifest differs from the archive's (%v)", p, err)
		}
		if cfg, err := img.ConfigName(); err != nil || cfg != want.configs[p] {
			t.Errorf("%s: config %s (%v), want %s", p, cfg, err, want.configs[p])
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			size, _ := l.Size()
			rc, err := l.Compressed() // verifies the digest as it reads
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			n, err = bytes.NewBuffer(nil).ReadFrom(rc)
			rc.Close()
			if err != nil || n != size {
				t.Errorf("%s: layer of %d bytes (%v), want %d", p, n, err, size)
			}
			total += n
		}
	}
	t.Logf("read back %s: index %s, %d platforms, %.1f MiB of layers, the archive's bytes", ref, want.digest, len(im.Manifests), float64(total)/(1<<20))
}

// pullWithContainerd runs a registry in a containerd harness's network
// namespace on its bridge address, pushes the archive there, and pulls it
// by tag through the CRI: refused without the CA, then pulled with the
// hosts.toml that names it.
func pullWithContainerd(t *testing.T, archive string, want archiveIndex) {
	hostsDir := t.TempDir()
	h := containerd.Start(t, containerd.Options{RegistryConfigDir: hostsDir})
	t.Logf("%s started in %v", h.ContainerdVersion, h.Started.Round(time.Millisecond))
	reg := registry.Start(t, h.BridgeAddr.String(), registry.Options{NetNS: h.NetNS})
	pushed := reg.Push(t, archive, "dnsconfigurer:pulled")
	if pushed.Digest != want.digest.String() {
		t.Fatalf("pushed %s, the archive's index is %s", pushed.Digest, want.digest)
	}
	t.Logf("pushed to %s in the harness's namespace in %v (%.1f MiB)", reg.Host, pushed.Took.Round(time.Millisecond), float64(pushed.Bytes)/(1<<20))
	ref := reg.Ref("dnsconfigurer:pulled")
	c := h.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pull := func() (*runtimeapi.PullImageResponse, error) {
		return c.Images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	}

	// Without hosts.toml containerd knows no CA for the registry.
	if _, err := pull(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("pull %s without the CA: %v, want a certificate error", ref, err)
	}
	reg.WriteHostsTOML(t, hostsDir)
	start := time.Now()
	resp, err := pull()
	if err != nil {
		t.Fatalf("pull %s with hosts.toml:\n%s\n%v%s", ref, reg.HostsTOML(), err, h.ContainerdLog())
	}
	st, err := c.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus(%s) = %v, %v", ref, st, err)
	}
	img := st.GetImage()
	config := want.configs["linux/"+runtime.GOARCH]
	wantDigest := reg.Host + "/dnsconfigurer@" + want.digest.String()
	if img.GetId() != config.String() || resp.GetImageRef() != config.String() {
		t.Errorf("pulled image id %s (PullImage said %s), want linux/%s's config %s", img.GetId(), resp.GetImageRef(), runtime.GOARCH, config)
	}
	if !slices.Contains(img.GetRepoDigests(), wantDigest) || !slices.Contains(img.GetRepoTags(), ref) {
		t.Errorf("pulled image tags %q digests %q, want %s and %s", img.GetRepoTags(), img.GetRepoDigests(), ref, wantDigest)
	}
	if uid := img.GetUid(); uid == nil || uid.Value != 65532 {
		t.Errorf("the pulled image's uid is %v, want 65532", uid)
	}
	t.Logf("%s pulled %s through the CRI in %v: id %s, digest %s", h.ContainerdVersion, ref, time.Since(start).Round(time.Millisecond), img.GetId(), wantDigest)
}
