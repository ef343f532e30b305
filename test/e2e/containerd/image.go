package containerd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// OCI media types and annotations used by WriteImage.
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	annotationRefName   = "org.opencontainers.image.ref.name"
	annotationImageName = "io.containerd.image.name"
)

// epoch is the modification time of every file in a packed layer, so the
// same inputs always give the same digests.
var epoch = time.Unix(0, 0).UTC()

// Image describes a single-layer linux/amd64 OCI image to pack.
type Image struct {
	// Ref is the full image reference, e.g. "dnsconfigurer.test/pause:e2e".
	// `ctr images import` names the image after it.
	Ref string
	// Files make up the only layer. Parent directories are added as needed.
	Files []ImageFile
	// Entrypoint, Cmd and Env go into the image config.
	Entrypoint []string
	Cmd        []string
	Env        []string
}

// ImageFile is one entry of an image layer: a regular file, or a symbolic
// link when Link is set, or an empty directory when Mode has fs.ModeDir.
type ImageFile struct {
	Path string      // absolute path inside the image, e.g. "/pause"
	Mode fs.FileMode // permission bits, plus fs.ModeDir for a directory, fs.ModeSetuid for a set-user-ID file
	Data []byte
	// Link, when set, makes the entry a symbolic link with this target
	// (e.g. "usr/bin" for "/bin"); Mode and Data are then ignored.
	Link string
	// HardLink, when set, makes the entry a hard link to the regular file
	// at this image path (busybox's applets are hard links to it, so
	// masking one masks no other); Mode and Data are then ignored.
	HardLink string
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Entrypoint []string `json:"Entrypoint,omitempty"`
		Cmd        []string `json:"Cmd,omitempty"`
		Env        []string `json:"Env,omitempty"`
		WorkingDir string   `json:"WorkingDir,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// blob is a piece of content addressed by its digest.
type blob struct {
	desc descriptor
	data []byte
}

func newBlob(mediaType string, data []byte) blob {
	return blob{desc: descriptor{MediaType: mediaType, Digest: digest(data), Size: int64(len(data))}, data: data}
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// WriteImage writes img to w as an OCI image layout tarball (oci-layout,
// index.json and blobs/sha256/...), the format `ctr images import` reads.
// The manifest in index.json carries both io.containerd.image.name (the
// full reference, which containerd uses as the image name) and
// org.opencontainers.image.ref.name (the tag, as the OCI spec suggests).
func WriteImage(w io.Writer, img Image) error {
	if img.Ref == "" {
		return fmt.Errorf("pack image: empty reference")
	}
	layerTar, err := layerTar(img.Files)
	if err != nil {
		return fmt.Errorf("pack image %q: %w", img.Ref, err)
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		return fmt.Errorf("pack image %q: %w", img.Ref, err)
	}
	if _, err := zw.Write(layerTar); err != nil {
		return fmt.Errorf("pack image %q: compress layer: %w", img.Ref, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("pack image %q: compress layer: %w", img.Ref, err)
	}
	layer := newBlob(mediaTypeLayer, gz.Bytes())

	var cfg imageConfig
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.Entrypoint, cfg.Config.Cmd, cfg.Config.Env = img.Entrypoint, img.Cmd, img.Env
	cfg.Config.WorkingDir = "/"
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{digest(layerTar)}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("pack image %q: %w", img.Ref, err)
	}
	config := newBlob(mediaTypeConfig, cfgJSON)

	manJSON, err := json.Marshal(manifest{
		SchemaVersion: 2,
		MediaType:     mediaTypeManifest,
		Config:        config.desc,
		Layers:        []descriptor{layer.desc},
	})
	if err != nil {
		return fmt.Errorf("pack image %q: %w", img.Ref, err)
	}
	man := newBlob(mediaTypeManifest, manJSON)
	manDesc := man.desc
	manDesc.Platform = &platform{Architecture: "amd64", OS: "linux"}
	manDesc.Annotations = map[string]string{
		annotationImageName: img.Ref,
		annotationRefName:   refTag(img.Ref),
	}
	idxJSON, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaTypeIndex, Manifests: []descriptor{manDesc}})
	if err != nil {
		return fmt.Errorf("pack image %q: %w", img.Ref, err)
	}

	tw := tar.NewWriter(w)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idxJSON},
	}
	for _, b := range []blob{man, config, layer} {
		entries = append(entries, struct {
			name string
			data []byte
		}{"blobs/sha256/" + strings.TrimPrefix(b.desc.Digest, "sha256:"), b.data})
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch}); err != nil {
			return fmt.Errorf("pack image %q: %w", img.Ref, err)
		}
	}
	for _, e := range entries {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("pack image %q: %w", img.Ref, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("pack image %q: %w", img.Ref, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("pack image %q: %w", img.Ref, err)
	}
	return nil
}

// refTag returns the tag of ref ("e2e" for "dnsconfigurer.test/pause:e2e"),
// or "latest" when it has none.
func refTag(ref string) string {
	name := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(name, ":"); i >= 0 {
		return name[i+1:]
	}
	return "latest"
}

// layerTar returns the uncompressed layer: the files, their parent
// directories, and the directories a container runtime expects to exist.
func layerTar(files []ImageFile) ([]byte, error) {
	dirs := map[string]fs.FileMode{"etc": 0o755, "tmp": fs.ModeSticky | 0o777, "proc": 0o755, "sys": 0o755, "dev": 0o755}
	parents := map[string]bool{}
	regs := map[string]ImageFile{}
	seen := map[string]bool{}
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" {
			return nil, fmt.Errorf("bad file path %q", f.Path)
		}
		if seen[p] {
			return nil, fmt.Errorf("duplicate file %q", f.Path)
		}
		seen[p] = true
		if f.Link == "" && f.Mode.IsDir() {
			dirs[p] = f.Mode & (fs.ModePerm | fs.ModeSticky)
		} else {
			regs[p] = f
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			parents[d] = true
		}
	}
	for d := range parents {
		if _, ok := regs[d]; ok {
			return nil, fmt.Errorf("%q is a parent directory of other files", "/"+d)
		}
		if _, ok := dirs[d]; !ok {
			dirs[d] = 0o755
		}
	}
	var names []string
	for d := range dirs {
		if _, ok := regs[d]; !ok {
			names = append(names, d)
		}
	}
	var hardLinks []string
	for p, f := range regs {
		if f.Link == "" && f.HardLink != "" {
			target := strings.TrimPrefix(path.Clean("/"+f.HardLink), "/")
			if t, ok := regs[target]; !ok || t.Link != "" || t.HardLink != "" {
				return nil, fmt.Errorf("%q: hard link target %q is not a regular file of the image", f.Path, f.HardLink)
			}
			hardLinks = append(hardLinks, p)
			continue
		}
		names = append(names, p)
	}
	// Sorting puts every directory before its contents; hard links come
	// last, after the files they name.
	sort.Strings(names)
	sort.Strings(hardLinks)
	names = append(names, hardLinks...)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f, ok := regs[n]
		switch {
		case ok && f.Link == "" && f.HardLink != "":
			target := strings.TrimPrefix(path.Clean("/"+f.HardLink), "/")
			// The target's mode, as tar writes it: extractors chmod the
			// link (that is, the file) to the header's mode.
			mode := int64(regs[target].Mode.Perm())
			if regs[target].Mode&fs.ModeSetuid != 0 {
				mode |= 0o4000
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: n, Linkname: target, Mode: mode, ModTime: epoch}); err != nil {
				return nil, err
			}
		case ok && f.Link != "":
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: n, Linkname: f.Link, Mode: 0o777, ModTime: epoch}); err != nil {
				return nil, err
			}
		case ok:
			mode := int64(f.Mode.Perm())
			if f.Mode&fs.ModeSetuid != 0 {
				mode |= 0o4000
			}
			hdr := &tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: mode, Size: int64(len(f.Data)), ModTime: epoch}
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		default:
			mode := int64(dirs[n].Perm())
			if dirs[n]&fs.ModeSticky != 0 {
				mode |= 0o1000
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n + "/", Mode: mode, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// LayerTar returns the uncompressed layer WriteImage packs for files (their
// parent directories and /etc, /tmp, /proc, /sys and /dev included), for
// tests that serve images from a registry instead of importing them.
func LayerTar(files []ImageFile) ([]byte, error) { return layerTar(files) }
