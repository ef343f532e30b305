package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// testOptions are options that need no git, no go and no CA bundle on the
// machine: write takes the binary and the bundle as bytes.
func testOptions(t *testing.T, platforms ...string) resolved {
	t.Helper()
	o, err := Options{
		Dir: "../..", Platforms: platforms, Name: "dnsconfigurer:test",
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

// readTar is files as entries and their contents by name; it fails t for
// an entry with an owner name.
func readTar(t *testing.T, files []testkit.TarFile) ([]entry, map[string][]byte) {
	t.Helper()
	var entries []entry
	data := map[string][]byte{}
	for _, f := range files {
		if f.Uname != "" || f.Gname != "" {
			t.Errorf("%s: owner names %q %q, want none", f.Name, f.Uname, f.Gname)
		}
		entries = append(entries, entry{f.Name, f.Typeflag, f.Mode, f.Uid, f.Gid, f.Size, f.ModTime.Unix()})
		data[f.Name] = f.Data
	}
	return entries, data
}

// testBinaries are hack/buildimage built for linux/amd64 and linux/arm64:
// real Go binaries with build info and dependencies, as the SBOM needs.
var testBinaries = sync.OnceValues(func() ([][]byte, error) {
	var bins [][]byte
	dir, err := os.MkdirTemp("", "imagebuild-test-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, arch := range []string{"amd64", "arm64"} {
		out := filepath.Join(dir, arch)
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, "../../hack/buildimage")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build for %s: %v\n%s", arch, err, msg)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		bins = append(bins, b)
	}
	return bins, nil
})

// TestArchive writes the image index of two stand-in binaries and reads it
// back with go-containerregistry's OCI layout reader and its `docker save`
// reader, as ctr and docker would.
func TestArchive(t *testing.T) {
	bins, err := testBinaries()
	if err != nil {
		t.Fatal(err)
	}
	certs := []byte("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")
	o := testOptions(t, "linux/amd64", "linux/arm64")
	var buf bytes.Buffer
	res, err := o.write(&buf, bins, certs)
	if err != nil {
		t.Fatal(err)
	}
	mtime := o.Time.Unix()

	// The archive: sorted, fixed owners, modes and times, and every blob
	// named by its digest.
	entries, files := readTar(t, testkit.ReadTar(t, bytes.NewReader(buf.Bytes())))
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
	// Two platforms: a manifest, a config and a layer each, and the index.
	if !slices.IsSorted(names) || len(names) != 12 || names[0] != "blobs/" || names[1] != "blobs/sha256/" ||
		!reflect.DeepEqual(names[9:], []string{"index.json", "manifest.json", "oci-layout"}) {
		t.Errorf("archive holds %q, want blobs/, blobs/sha256/, 7 blobs, index.json, manifest.json, oci-layout", names)
	}

	// The OCI layout, as ctr reads it: index.json names one image index,
	// which holds one image per platform.
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
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("index.json: %+v, want one image index", tm.Manifests)
	}
	desc := tm.Manifests[0]
	wantAnn := map[string]string{
		"io.containerd.image.name":          "docker.io/library/dnsconfigurer:test",
		"org.opencontainers.image.ref.name": "test",
	}
	if !reflect.DeepEqual(desc.Annotations, wantAnn) {
		t.Errorf("index annotations %v, want %v", desc.Annotations, wantAnn)
	}
	if desc.Digest.String() != res.Digest {
		t.Errorf("index.json names index %s, Build says %s", desc.Digest, res.Digest)
	}
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 || len(res.Images) != 2 {
		t.Fatalf("image index: %d images, Build says %d; want 2", len(im.Manifests), len(res.Images))
	}
	for i, arch := range []string{"amd64", "arm64"} {
		d := im.Manifests[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch {
			t.Errorf("image %d: platform %+v, want linux/%s", i, d.Platform, arch)
		}
		if got := res.Images[i]; d.Digest.String() != got.Digest || got.Platform != "linux/"+arch || got.BinarySize != int64(len(bins[i])) {
			t.Errorf("image %d: %s in the index, Build says %+v", i, d.Digest, got)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, arch, o, bins[i], certs)

		// manifest.json, as docker load reads it: the same config, the
		// first platform also under the image's own name.
		tags := []string{"dnsconfigurer:test-" + arch}
		if i == 0 {
			tags = []string{"dnsconfigurer:test", "dnsconfigurer:test-amd64"}
		}
		if !reflect.DeepEqual(res.Images[i].Tags, tags) {
			t.Errorf("image %d: tags %q, want %q", i, res.Images[i].Tags, tags)
		}
		tag, err := name.NewTag(tags[len(tags)-1])
		if err != nil {
			t.Fatal(err)
		}
		dimg, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil }, &tag)
		if err != nil {
			t.Fatalf("docker load of %s: %v", tag, err)
		}
		checkImage(t, dimg, arch, o, bins[i], certs)
		ociConfig, err1 := img.ConfigName()
		dockerConfig, err2 := dimg.ConfigName()
		if err1 != nil || err2 != nil || ociConfig != dockerConfig {
			t.Errorf("%s: manifest.json's config %s (%v), the index's %s (%v)", arch, dockerConfig, err2, ociConfig, err1)
		}
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil || len(m) != 2 || !reflect.DeepEqual(m[0].RepoTags, res.Images[0].Tags) || !reflect.DeepEqual(m[1].RepoTags, res.Images[1].Tags) {
		t.Errorf("manifest.json = %+v (%v), want the two images with their tags", m, err)
	}

	// The same inputs give the same bytes, SBOM included; another time
	// does not.
	var again bytes.Buffer
	res2, err := o.write(&again, bins, certs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) || !bytes.Equal(res.SBOM, res2.SBOM) {
		t.Error("two writes of the same inputs differ")
	}
	later := o
	later.Time = o.Time.Add(time.Second)
	again.Reset()
	if _, err := later.write(&again, bins, certs); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("another time gives the same bytes")
	}
}

// TestSBOM: the SBOM is SPDX 2.3 that tools-golang reads back, and lists
// under each platform's binary exactly the modules `go version -m` lists
// for it (the main module with the image's version), plus the standard
// library.
func TestSBOM(t *testing.T) {
	bins, err := testBinaries()
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, "linux/amd64", "linux/arm64")
	res, err := o.write(io.Discard, bins, []byte("certs"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := spdxjson.Read(bytes.NewReader(res.SBOM))
	if err != nil {
		t.Fatalf("tools-golang reads the SBOM: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo == nil || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("document: version %q, creation %+v", doc.SPDXVersion, doc.CreationInfo)
	}
	byID := map[string]*spdx.Package{}
	for _, p := range doc.Packages {
		byID[string(p.PackageSPDXIdentifier)] = p
	}
	deps := map[string][]string{} // binary ID -> "path@version"
	for _, r := range doc.Relationships {
		if r.Relationship == "DEPENDS_ON" {
			p := byID[string(r.RefB.ElementRefID)]
			deps[string(r.RefA.ElementRefID)] = append(deps[string(r.RefA.ElementRefID)], p.PackageName+"@"+p.PackageVersion)
		}
	}
	for i, arch := range []string{"amd64", "arm64"} {
		want := testkit.GoVersionM(t, bins[i], "v0.0.0-test")
		got := deps["Binary-linux-"+arch]
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("linux/%s: SBOM modules\n%q\ngo version -m (and stdlib)\n%q", arch, got, want)
		}
		if len(got) < 5 {
			t.Errorf("linux/%s: only %d modules", arch, len(got))
		}
		bin := byID["Binary-linux-"+arch]
		sum := sha256.Sum256(bins[i])
		if bin == nil || len(bin.PackageChecksums) != 1 || bin.PackageChecksums[0].Value != hex.EncodeToString(sum[:]) {
			t.Errorf("linux/%s: binary package %+v, want its sha256 %x", arch, bin, sum)
		}
	}
	img := byID["Image"]
	if img == nil || len(img.PackageChecksums) != 1 || "sha256:"+img.PackageChecksums[0].Value != res.Digest {
		t.Errorf("image package %+v, want the index digest %s", img, res.Digest)
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
	entries, data := readTar(t, testkit.ImageLayer(t, img))
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
		{"s390x", Options{Dir: "../..", Platforms: []string{"linux/amd64", "linux/s390x"}}, `platform "linux/s390x": must be linux/amd64 or linux/arm64`},
		{"windows", Options{Dir: "../..", Platforms: []string{"windows/amd64"}}, "must be linux/amd64 or linux/arm64"},
		{"twice", Options{Dir: "../..", Platforms: []string{"linux/arm64", "linux/arm64"}}, `platform "linux/arm64": named twice`},
		{"empty", Options{Dir: "../..", Platforms: []string{""}}, `platform "": must be`},
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
	o, err := Options{Dir: "../..", Version: "v9.9.9+dirty", Revision: "abc"}.resolve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Name != "dnsconfigurer:v9.9.9_dirty" || o.ref != "docker.io/library/dnsconfigurer:v9.9.9_dirty" ||
		!slices.Equal(o.arches, []string{"amd64", "arm64"}) || o.CACerts != DefaultCACerts {
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

// TestGoVersion: the version is the go command's: the highest semver tag
// on HEAD (pre-releases count), else a pseudo-version after the latest tag, "+dirty" for local
// changes.
func TestGoVersion(t *testing.T) {
	at := time.Date(2026, 11, 24, 21, 32, 59, 0, time.UTC)
	const rev = "921e49540f88aaaabbbbccccddddeeeeffff0000"
	for _, tc := range []struct {
		name   string
		onHead []string
		latest string
		dirty  bool
		want   string
	}{
		{"no tag", nil, "", false, "v0.0.0-20261124213259-921e49540f88"},
		{"no tag, dirty", nil, "", true, "v0.0.0-20261124213259-921e49540f88+dirty"},
		{"tag on HEAD", []string{"v0.3.0"}, "v0.3.0", false, "v0.3.0"},
		{"two tags on HEAD", []string{"v0.3.0", "v0.3.1-rc.1", "v0.2.9"}, "v0.3.1-rc.1", false, "v0.3.1-rc.1"},
		{"tag on HEAD, dirty", []string{"v0.3.0"}, "v0.3.0", true, "v0.3.0+dirty"},
		{"after a release", nil, "v0.3.0", false, "v0.3.1-0.20261124213259-921e49540f88"},
		{"after a pre-release", nil, "v0.4.0-rc.1", false, "v0.4.0-rc.1.0.20261124213259-921e49540f88"},
		{"after v2", nil, "v2.1.0", false, "v2.1.1-0.20261124213259-921e49540f88"},
		{"not semver", []string{"vnext"}, "vnext", false, "v0.0.0-20261124213259-921e49540f88"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := goVersion(tc.onHead, tc.latest, at, rev, tc.dirty); got != tc.want {
				t.Errorf("goVersion = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGitVersionAsGo: in a git repository of a small module, untagged,
// tagged, tagged with local changes and one commit after the tag,
// GitVersion says what the go command stamps into a build of it.
func TestGitVersionAsGo(t *testing.T) {
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	sh := func(args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/stamp\n\ngo 1.22\n")
	write("main.go", "package main\n\nfunc main() {}\n")
	sh("git", "init", "-q")
	sh("git", "add", ".")
	sh("git", "commit", "-q", "-m", "one")
	check := func(state string) {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "stamp")
		cmd := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		got, rev := GitVersion(context.Background(), dir)
		if got != bi.Main.Version {
			t.Errorf("%s: GitVersion %q, the go command stamped %q", state, got, bi.Main.Version)
		}
		var wantRev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				wantRev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if modified == "true" {
			wantRev += "-dirty"
		}
		if rev != wantRev {
			t.Errorf("%s: revision %q, want %q", state, rev, wantRev)
		}
		t.Logf("%s: %s", state, got)
	}
	check("untagged")
	sh("git", "tag", "v1.2.3")
	check("tagged")
	write("main.go", "package main\n\nfunc main() { println() }\n")
	check("tagged, a local change")
	sh("git", "commit", "-q", "-am", "two")
	check("a commit after the tag")
}
