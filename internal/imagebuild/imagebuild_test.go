package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testOptions are options that need no git, no go and no CA bundle on the
// machine: write takes the binary and the bundle as bytes.
func testOptions(t *testing.T, platform string) resolved {
	t.Helper()
	o, err := Options{
		Dir: "../..", Platform: platform, Name: "dnsconfigurer:test",
		Version: "v0.0.0-test", Revision: "0123abc", Time: time.Unix(1700000000, 0),
	}.resolve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// entry is a tar header as the tests compare it.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	Uid, Gid int
	Size     int64
	ModTime  int64
}

func readTar(t *testing.T, r io.Reader) ([]entry, map[string][]byte) {
	t.Helper()
	var entries []entry
	data := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, data
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: owner names %q %q, want none", hdr.Name, hdr.Uname, hdr.Gname)
		}
		entries = append(entries, entry{hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Size, hdr.ModTime.Unix()})
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		data[hdr.Name] = b
	}
}

// TestArchive writes the image of a stand-in binary for both platforms
// and reads it back with go-containerregistry's OCI layout reader and its
// `docker save` reader, as ctr and docker would.
func TestArchive(t *testing.T) {
	bin := []byte("\x7fELF stand-in binary")
	certs := []byte("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			o := testOptions(t, "linux/"+arch)
			var buf bytes.Buffer
			res, err := o.write(&buf, bin, certs)
			if err != nil {
				t.Fatal(err)
			}
			mtime := o.Time.Unix()

			// The archive: sorted, fixed owners, modes and times, and
			// every blob named by its digest.
			entries, files := readTar(t, bytes.NewReader(buf.Bytes()))
			var names []string
			for _, e := range entries {
				names = append(names, e.Name)
				wantMode, wantType := int64(0o644), byte(tar.TypeReg)
				if strings.HasSuffix(e.Name, "/") {
					wantMode, wantType = 0o755, tar.TypeDir
				}
				if e.Mode != wantMode || e.Type != wantType || e.Uid != 0 || e.Gid != 0 || e.ModTime != mtime {
					t.Errorf("archive entry %+v: want mode %o, uid/gid 0, mtime %d", e, wantMode, mtime)
				}
				if blob, ok := strings.CutPrefix(e.Name, "blobs/sha256/"); ok && blob != "" {
					sum := sha256.Sum256(files[e.Name])
					if hex.EncodeToString(sum[:]) != blob {
						t.Errorf("blob %s has digest %x", e.Name, sum)
					}
				}
			}
			if !slices.IsSorted(names) || len(names) != 8 || names[0] != "blobs/" || names[1] != "blobs/sha256/" ||
				!reflect.DeepEqual(names[5:], []string{"index.json", "manifest.json", "oci-layout"}) {
				t.Errorf("archive holds %q, want blobs/, blobs/sha256/, 3 blobs, index.json, manifest.json, oci-layout", names)
			}

			// The OCI layout, as ctr reads it.
			dir := t.TempDir()
			for name, b := range files {
				if strings.HasSuffix(name, "/") {
					continue
				}
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			idx, err := layout.ImageIndexFromPath(dir)
			if err != nil {
				t.Fatal(err)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if len(im.Manifests) != 1 {
				t.Fatalf("index.json has %d manifests, want 1", len(im.Manifests))
			}
			desc := im.Manifests[0]
			wantAnn := map[string]string{
				"io.containerd.image.name":          "docker.io/library/dnsconfigurer:test",
				"org.opencontainers.image.ref.name": "test",
			}
			if !reflect.DeepEqual(desc.Annotations, wantAnn) {
				t.Errorf("index annotations %v, want %v", desc.Annotations, wantAnn)
			}
			if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != arch {
				t.Errorf("index platform %+v, want linux/%s", desc.Platform, arch)
			}
			if desc.Digest.String() != res.Digest {
				t.Errorf("index names manifest %s, Build says %s", desc.Digest, res.Digest)
			}
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, img, arch, o, bin, certs)

			// manifest.json, as docker load reads it.
			var m tarball.Manifest
			if m, err = tarball.LoadManifest(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil }); err != nil {
				t.Fatal(err)
			}
			if len(m) != 1 || !reflect.DeepEqual(m[0].RepoTags, []string{"dnsconfigurer:test"}) {
				t.Errorf("manifest.json = %+v, want one image tagged dnsconfigurer:test", m)
			}
			dimg, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil }, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, dimg, arch, o, bin, certs)
			ociConfig, err1 := img.ConfigName()
			dockerConfig, err2 := dimg.ConfigName()
			if err1 != nil || err2 != nil || ociConfig != dockerConfig {
				t.Errorf("manifest.json's config %s (%v), index.json's %s (%v)", dockerConfig, err2, ociConfig, err1)
			}

			// The same inputs give the same bytes; another time does not.
			var again bytes.Buffer
			if _, err := o.write(&again, bin, certs); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), again.Bytes()) {
				t.Error("two writes of the same inputs differ")
			}
			later := o
			later.Time = o.Time.Add(time.Second)
			again.Reset()
			if _, err := later.write(&again, bin, certs); err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(buf.Bytes(), again.Bytes()) {
				t.Error("another time gives the same bytes")
			}
		})
	}
}

// checkImage checks an image's config and its only layer.
func checkImage(t *testing.T, img v1.Image, arch string, o resolved, bin, certs []byte) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != arch || !cf.Created.Time.Equal(o.Time) {
		t.Errorf("config: %s/%s created %v, want linux/%s created %v", cf.OS, cf.Architecture, cf.Created, arch, o.Time)
	}
	want := v1.Config{
		Entrypoint: []string{"/usr/local/bin/dnsconfigurer"},
		User:       "65532:65532",
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		Labels: map[string]string{
			"org.opencontainers.image.version":  "v0.0.0-test",
			"org.opencontainers.image.revision": "0123abc",
			"org.opencontainers.image.source":   "https://github.com/dnsconfigurer/dnsconfigurer",
		},
	}
	if !reflect.DeepEqual(cf.Config, want) {
		t.Errorf("config:\n got %+v\nwant %+v", cf.Config, want)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries, data := readTar(t, rc)
	m := o.Time.Unix()
	wantEntries := []entry{
		{"etc/", tar.TypeDir, 0o755, 0, 0, 0, m},
		{"etc/group", tar.TypeReg, 0o644, 0, 0, int64(len(group)), m},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0, int64(len(passwd)), m},
		{"etc/ssl/", tar.TypeDir, 0o755, 0, 0, 0, m},
		{"etc/ssl/certs/", tar.TypeDir, 0o755, 0, 0, 0, m},
		{"etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, 0, 0, int64(len(certs)), m},
		{"home/", tar.TypeDir, 0o755, 0, 0, 0, m},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532, 0, m},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0, 0, m},
		{"usr/", tar.TypeDir, 0o755, 0, 0, 0, m},
		{"usr/local/", tar.TypeDir, 0o755, 0, 0, 0, m},
		{"usr/local/bin/", tar.TypeDir, 0o755, 0, 0, 0, m},
		{"usr/local/bin/dnsconfigurer", tar.TypeReg, 0o755, 0, 0, int64(len(bin)), m},
	}
	if !reflect.DeepEqual(entries, wantEntries) {
		t.Errorf("layer:\n got %+v\nwant %+v", entries, wantEntries)
	}
	if !bytes.Equal(data["usr/local/bin/dnsconfigurer"], bin) || !bytes.Equal(data["etc/ssl/certs/ca-certificates.crt"], certs) {
		t.Error("layer: the binary or the CA bundle differ from the input")
	}
	if !strings.Contains(string(data["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(data["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("layer: no nonroot 65532 in\n%s%s", data["etc/passwd"], data["etc/group"])
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct{ in, ref, familiar, tag, err string }{
		{in: "dnsconfigurer:latest", ref: "docker.io/library/dnsconfigurer:latest", familiar: "dnsconfigurer:latest", tag: "latest"},
		{in: "dnsconfigurer", ref: "docker.io/library/dnsconfigurer:latest", familiar: "dnsconfigurer:latest", tag: "latest"},
		{in: "dnsconfigurer:v0.1.0-3-gabc1234-dirty", ref: "docker.io/library/dnsconfigurer:v0.1.0-3-gabc1234-dirty", familiar: "dnsconfigurer:v0.1.0-3-gabc1234-dirty", tag: "v0.1.0-3-gabc1234-dirty"},
		{in: "docker.io/dnsconfigurer:v1", ref: "docker.io/library/dnsconfigurer:v1", familiar: "dnsconfigurer:v1", tag: "v1"},
		{in: "someone/dnsconfigurer:v1", ref: "docker.io/someone/dnsconfigurer:v1", familiar: "someone/dnsconfigurer:v1", tag: "v1"},
		{in: "ghcr.io/dnsconfigurer/dnsconfigurer:v1", ref: "ghcr.io/dnsconfigurer/dnsconfigurer:v1", familiar: "ghcr.io/dnsconfigurer/dnsconfigurer:v1", tag: "v1"},
		{in: "localhost:5000/dnsconfigurer:dev", ref: "localhost:5000/dnsconfigurer:dev", familiar: "localhost:5000/dnsconfigurer:dev", tag: "dev"},
		{in: "dnsconfigurer@sha256:" + strings.Repeat("0", 64), err: "want NAME[:TAG]"},
		{in: "Upper:case", err: "want NAME[:TAG]"},
		{in: "", err: "want NAME[:TAG]"},
	} {
		tag, ref, familiar, err := parseName(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseName(%q) = %q, %v; want an error with %q", tc.in, ref, err, tc.err)
			}
			continue
		}
		if err != nil || ref != tc.ref || familiar != tc.familiar || tag.TagStr() != tc.tag {
			t.Errorf("parseName(%q) = %q %q %q, %v; want %q %q %q", tc.in, ref, familiar, tag.TagStr(), err, tc.ref, tc.familiar, tc.tag)
		}
	}
}

func TestSourceDateEpoch(t *testing.T) {
	commit := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name, env string
		commit    time.Time
		want      time.Time
		err       bool
	}{
		{name: "SOURCE_DATE_EPOCH wins", env: "1700000000", commit: commit, want: time.Unix(1700000000, 0)},
		{name: "zero is the epoch", env: "0", commit: commit, want: time.Unix(0, 0)},
		{name: "the commit", commit: commit, want: commit},
		{name: "neither", want: time.Unix(0, 0)},
		{name: "not a number", env: "yesterday", err: true},
		{name: "negative", env: "-1", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sourceDateEpoch(tc.env, tc.commit)
			if tc.err {
				if err == nil {
					t.Errorf("got %v, want an error", got)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) || got.Location() != time.UTC {
				t.Errorf("got %v, %v; want %v in UTC", got, err, tc.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts Options
		err  string
	}{
		{"s390x", Options{Dir: "../..", Platform: "linux/s390x"}, `platform "linux/s390x": must be linux/amd64 or linux/arm64`},
		{"windows", Options{Dir: "../..", Platform: "windows/amd64"}, "must be linux/amd64 or linux/arm64"},
		{"not the module", Options{Dir: "."}, "module directory"},
		{"a space in the version", Options{Dir: "../..", Version: "v1 beta"}, `version "v1 beta": must be non-empty`},
		{"a bad name", Options{Dir: "../..", Version: "v1", Name: "a b"}, `image name "a b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.opts.resolve(ctx); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("resolve: %v, want an error with %q", err, tc.err)
			}
		})
	}
	o, err := Options{Dir: "../..", Platform: "linux/arm64", Version: "v9.9.9", Revision: "abc"}.resolve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Name != "dnsconfigurer:v9.9.9" || o.ref != "docker.io/library/dnsconfigurer:v9.9.9" || o.arch != "arm64" || o.CACerts != DefaultCACerts {
		t.Errorf("defaults: %+v", o)
	}
}

// TestMissingCACerts: without the bundle Build says what to install, and
// fails before it compiles anything.
func TestMissingCACerts(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ca-certificates.crt")
	var buf bytes.Buffer
	_, err := Build(context.Background(), &buf, Options{Dir: "../..", Version: "v1", Revision: "r", CACerts: missing, Go: "/nonexistent/go"})
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "apt-get install ca-certificates") {
		t.Errorf("Build without a CA bundle: %v", err)
	}
	if buf.Len() != 0 {
		t.Errorf("Build wrote %d bytes", buf.Len())
	}
}

func TestLDFlags(t *testing.T) {
	got := LDFlags("v1.2.3", "abc-dirty")
	want := "-s -w -X github.com/dnsconfigurer/dnsconfigurer/internal/version.version=v1.2.3 -X github.com/dnsconfigurer/dnsconfigurer/internal/version.revision=abc-dirty"
	if got != want {
		t.Errorf("LDFlags = %q, want %q", got, want)
	}
}
