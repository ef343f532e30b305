package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Env is the image's environment: distroless' PATH and the CA bundle for
// Go's crypto/x509 (which finds it there anyway; other code may not).
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=" + CACertsPath,
}

// The users and groups of the image, as gcr.io/distroless/static has them.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"tty:x:5:\n" +
		"staff:x:50:\n" +
		"nonroot:x:65532:\n"
)

// Annotations of the index's manifest descriptor, as `docker save` writes
// them: containerd names the image after the first, the OCI spec's
// reference name is the tag.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// file is one entry of the layer: a regular file, or a directory when mode
// has fs.ModeDir.
type file struct {
	path     string // without the leading slash
	mode     fs.FileMode
	uid, gid int
	data     []byte
}

// layerFiles are the image's files: the binary, the CA bundle, passwd and
// group, /tmp, nonroot's home, and the parent directories.
func layerFiles(bin, certs []byte) []file {
	files := []file{
		{path: strings.TrimPrefix(BinaryPath, "/"), mode: 0o755, data: bin},
		{path: strings.TrimPrefix(CACertsPath, "/"), mode: 0o644, data: certs},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "tmp", mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{path: "home/nonroot", mode: fs.ModeDir | 0o700, uid: 65532, gid: 65532},
	}
	have := map[string]bool{}
	for _, f := range files {
		have[f.path] = true
	}
	for _, f := range files {
		for d := path.Dir(f.path); d != "."; d = path.Dir(d) {
			if !have[d] {
				have[d] = true
				files = append(files, file{path: d, mode: fs.ModeDir | 0o755})
			}
		}
	}
	// Sorted, every directory comes before what it holds.
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files
}

// layerTar is the uncompressed layer: files in order, every entry with
// mtime t and no user or group names.
func layerTar(files []file, t time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Name: f.path, Mode: int64(f.mode.Perm()), Uid: f.uid, Gid: f.gid,
			ModTime: t, Typeflag: tar.TypeReg, Size: int64(len(f.data)),
		}
		if f.mode&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		if f.mode.IsDir() {
			hdr.Name += "/"
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer %s: %w", f.path, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("layer %s: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// image assembles linux/arch's OCI image from its binary and the CA
// bundle.
func (o resolved) image(arch string, bin, certs []byte) (v1.Image, error) {
	lt, err := layerTar(layerFiles(bin, certs), o.Time)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(lt)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: o.Time}, CreatedBy: "hack/build-image linux/" + arch},
	})
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: o.Time}
	cf.Config = v1.Config{
		Entrypoint: []string{BinaryPath},
		User:       User,
		Env:        Env,
		Labels: map[string]string{
			"org.opencontainers.image.version":  o.Version,
			"org.opencontainers.image.revision": o.Revision,
			"org.opencontainers.image.source":   Source,
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

// platformTags are the names `docker load` gives the image of arch: the
// first platform's image has the image's own name too.
func (o resolved) platformTags(i int) []string {
	own := o.familiar + "-" + o.arches[i]
	if i == 0 {
		return []string{o.familiar, own}
	}
	return []string{own}
}

// write assembles one image per platform (bins in o.arches order) under an
// image index and writes the archive to w: an OCI image layout whose
// index.json names the index, with a docker-save manifest.json beside it
// (one entry per platform), entries sorted, each with mtime o.Time, uid
// and gid 0 and mode 0644 (directories 0755).
func (o resolved) write(w io.Writer, bins [][]byte, certs []byte) (Result, error) {
	res := Result{Name: o.Name, Ref: o.ref, Version: o.Version, Revision: o.Revision, Time: o.Time}
	blobs := map[string][]byte{}
	var docker tarball.Manifest
	var adds []mutate.IndexAddendum
	for i, arch := range o.arches {
		img, err := o.image(arch, bins[i], certs)
		if err != nil {
			return Result{}, err
		}
		pi, desc, err := addImage(blobs, img)
		if err != nil {
			return Result{}, fmt.Errorf("linux/%s: %w", arch, err)
		}
		pi.Platform, pi.BinarySize, pi.Tags = "linux/"+arch, int64(len(bins[i])), o.platformTags(i)
		desc.RepoTags = pi.Tags
		docker = append(docker, desc)
		res.Images = append(res.Images, pi)
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	rawIdx, err := idx.RawManifest()
	if err != nil {
		return Result{}, fmt.Errorf("image index: %w", err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return Result{}, fmt.Errorf("image index: %w", err)
	}
	blobs[blobPath(digest)] = rawIdx
	res.Digest = digest.String()
	top, err := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add:        idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{annotationImageName: o.ref, annotationRefName: o.tag.TagStr()}},
	}).RawManifest()
	if err != nil {
		return Result{}, fmt.Errorf("index.json: %w", err)
	}
	dockerJSON, err := json.Marshal(docker)
	if err != nil {
		return Result{}, fmt.Errorf("manifest.json: %w", err)
	}
	if res.SBOM, err = o.sbom(bins, res); err != nil {
		return Result{}, err
	}

	files := map[string][]byte{
		"oci-layout":    []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json":    top,
		"manifest.json": dockerJSON,
	}
	for p, b := range blobs {
		files[p] = b
	}
	names := []string{"blobs/", "blobs/sha256/"}
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n])), ModTime: o.Time}
		if strings.HasSuffix(n, "/") {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return Result{}, fmt.Errorf("write image archive: %w", err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			return Result{}, fmt.Errorf("write image archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return Result{}, fmt.Errorf("write image archive: %w", err)
	}
	return res, nil
}

// addImage puts img's manifest, config and layers into blobs and returns
// what it knows of the image and its docker-save entry (without tags).
func addImage(blobs map[string][]byte, img v1.Image) (PlatformImage, tarball.Descriptor, error) {
	var pi PlatformImage
	manifest, err := img.RawManifest()
	if err != nil {
		return pi, tarball.Descriptor{}, fmt.Errorf("image manifest: %w", err)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return pi, tarball.Descriptor{}, fmt.Errorf("image config: %w", err)
	}
	// Each blob is named by the digest of the bytes stored (what
	// img.Digest and img.ConfigName compute again); reading a
	// bytes.Reader does not fail.
	digest, _, _ := v1.SHA256(bytes.NewReader(manifest))
	configName, _, _ := v1.SHA256(bytes.NewReader(config))
	blobs[blobPath(digest)], blobs[blobPath(configName)] = manifest, config
	pi.Digest = digest.String()
	desc := tarball.Descriptor{Config: blobPath(configName)}
	layers, err := img.Layers()
	if err != nil {
		return pi, desc, fmt.Errorf("image layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return pi, desc, fmt.Errorf("layer: %w", err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return pi, desc, fmt.Errorf("layer: %w", err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return pi, desc, fmt.Errorf("layer: %w", err)
		}
		blobs[blobPath(d)] = data
		desc.Layers = append(desc.Layers, blobPath(d))
		pi.LayerSize += int64(len(data))
	}
	return pi, desc, nil
}

// blobPath is where the layout holds the blob h.
func blobPath(h v1.Hash) string {
	return "blobs/" + h.Algorithm + "/" + h.Hex
}
