package imagebuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// The image's layout and config. The Dockerfile repeats them; its test
// checks that it does.
const (
	// BinaryPath is where the image holds the dnsconfigurer binary, and
	// its entrypoint.
	BinaryPath = "/usr/local/bin/dnsconfigurer"
	// CACertsPath is the image's CA bundle, named by SSL_CERT_FILE.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// User is the image's user and group: distroless' nonroot.
	User = "65532:65532"
	// Source is the org.opencontainers.image.source label.
	Source = "https://github.com/dnsconfigurer/dnsconfigurer"
	// Package is the command the image holds, relative to the module root.
	Package = "./cmd/dnsconfigurer"
	// VersionPackage holds the variables -ldflags -X sets: version and
	// revision.
	VersionPackage = "github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

// DefaultCACerts is the build machine's CA bundle, from Debian's
// ca-certificates package.
const DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"

// Options say what to build. The zero value builds the current directory's
// module for the host's architecture, named and versioned from git.
type Options struct {
	// Dir is the module's root directory (the one holding go.mod); "" is
	// the current directory.
	Dir string
	// Platforms are the image index's platforms, each "linux/amd64" or
	// "linux/arm64"; empty is DefaultPlatforms.
	Platforms []string
	// Name is the image reference the archive carries, with a tag, e.g.
	// "dnsconfigurer:latest" or "registry.example/dnsconfigurer:v0.2.0";
	// "" is "dnsconfigurer:<Version>", with "+" as "_" (a tag holds no "+").
	Name string
	// Version and Revision are linked into the binary (see
	// internal/version) and labelled. "" takes them from git in Dir, as the
	// go command stamps a build: the semver tag on HEAD, else a Go
	// pseudo-version after the latest semver tag (with "+dirty" when the
	// tree has local changes), and `git rev-parse HEAD` (with "-dirty");
	// outside a git tree they are "devel" and "unknown".
	Version, Revision string
	// Time is every timestamp in the image and the archive. The zero value
	// is $SOURCE_DATE_EPOCH when set, else the HEAD commit's time, else the
	// Unix epoch.
	Time time.Time
	// CACerts is the CA bundle copied into the image; "" is
	// DefaultCACerts. It must exist.
	CACerts string
	// Go is the go command; "" is "go" from $PATH.
	Go string
}

// DefaultPlatforms are the platforms an image is built for when Options
// name none.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Result describes a built image.
type Result struct {
	// Name is the image name as given or defaulted, and Ref its full form
	// as containerd names it (io.containerd.image.name):
	// "dnsconfigurer:latest" and "docker.io/library/dnsconfigurer:latest".
	Name, Ref string
	// Version, Revision and Time are the values used.
	Version, Revision string
	Time              time.Time
	// Digest is the image index's digest ("sha256:..."): the image's
	// digest in a registry.
	Digest string
	// Images are the index's images, one per platform, in Options order.
	Images []PlatformImage
	// SBOM is the SPDX 2.3 JSON document of the binaries' Go modules.
	SBOM []byte
}

// PlatformImage is one platform's image in the index.
type PlatformImage struct {
	// Platform is "linux/amd64" or "linux/arm64".
	Platform string
	// Digest is the image manifest's digest ("sha256:...").
	Digest string
	// Tags are the names `docker load` gives it (manifest.json's
	// RepoTags): the first platform's image has Name too.
	Tags []string
	// LayerSize is the compressed layer's size, BinarySize the binary's,
	// in bytes.
	LayerSize, BinarySize int64
}

// Build compiles the binary, assembles the image and writes its archive to
// w. Nothing is written to w when an earlier step fails.
func Build(ctx context.Context, w io.Writer, opts Options) (Result, error) {
	o, err := opts.resolve(ctx)
	if err != nil {
		return Result{}, err
	}
	certs, err := os.ReadFile(o.CACerts)
	if errors.Is(err, fs.ErrNotExist) {
		return Result{}, fmt.Errorf("ca certificates: %s does not exist: install Debian's ca-certificates package (apt-get install ca-certificates) or name another bundle: %w", o.CACerts, err)
	}
	if err != nil {
		return Result{}, fmt.Errorf("ca certificates: %w", err)
	}
	if len(certs) == 0 {
		return Result{}, fmt.Errorf("ca certificates: %s is empty", o.CACerts)
	}
	bins := make([][]byte, len(o.arches))
	for i, arch := range o.arches {
		if bins[i], err = compile(ctx, o, arch); err != nil {
			return Result{}, err
		}
	}
	return o.write(w, bins, certs)
}

// SBOMPath is where BuildFile writes the SBOM of the archive at path:
// beside it, ".tar" replaced by ".spdx.json".
func SBOMPath(path string) string {
	return strings.TrimSuffix(path, ".tar") + ".spdx.json"
}

// BuildFile is Build into the file path, with the SBOM at SBOMPath(path).
// Each appears complete or not at all (written to a temporary file beside
// it, then renamed).
func BuildFile(ctx context.Context, path string, opts Options) (Result, error) {
	var res Result
	err := writeFile(path, "image archive", func(w io.Writer) (err error) {
		res, err = Build(ctx, w, opts)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	err = writeFile(SBOMPath(path), "sbom", func(w io.Writer) error {
		_, err := w.Write(res.SBOM)
		return err
	})
	return res, err
}

// writeFile writes path through a temporary file beside it, renamed into
// place when fill succeeded.
func writeFile(path, what string, fill func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	defer os.Remove(tmp.Name())
	err = fill(tmp)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", what, cerr)
	}
	if err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

// resolved are Options with every default filled in and checked (Dir
// absolute, Platforms "linux/<arch>" without repeats).
type resolved struct {
	Options
	arches   []string // amd64 or arm64, one per platform
	tag      name.Tag
	ref      string // containerd's full name
	familiar string // docker's short name, for RepoTags
}

// resolve fills in the defaults and checks the options.
func (opts Options) resolve(ctx context.Context) (resolved, error) {
	o := resolved{Options: opts}
	if o.Dir == "" {
		o.Dir = "."
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return o, fmt.Errorf("module directory: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return o, fmt.Errorf("module directory %q: %w", o.Dir, err)
	}
	o.Dir = dir
	if len(o.Platforms) == 0 {
		o.Platforms = DefaultPlatforms
	}
	o.Platforms = slices.Clone(o.Platforms)
	for _, p := range o.Platforms {
		arch, err := parsePlatform(p)
		if err != nil {
			return o, err
		}
		if slices.Contains(o.arches, arch) {
			return o, fmt.Errorf("platform %q: named twice", p)
		}
		o.arches = append(o.arches, arch)
	}
	if o.CACerts == "" {
		o.CACerts = DefaultCACerts
	}
	if o.Go == "" {
		o.Go = "go"
	}
	git := gitFacts{version: "devel", revision: "unknown"}
	if o.Version == "" || o.Revision == "" || o.Time.IsZero() && os.Getenv("SOURCE_DATE_EPOCH") == "" {
		git = gitInfo(ctx, o.Dir)
	}
	if o.Version == "" {
		o.Version = git.version
	}
	if o.Revision == "" {
		o.Revision = git.revision
	}
	for _, v := range []struct{ what, val string }{{"version", o.Version}, {"revision", o.Revision}} {
		if v.val == "" || strings.ContainsFunc(v.val, func(r rune) bool { return unicode.IsSpace(r) || r == '"' || r == '\'' }) {
			return o, fmt.Errorf("%s %q: must be non-empty, without spaces or quotes", v.what, v.val)
		}
	}
	if o.Time.IsZero() {
		if o.Time, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"), git.time); err != nil {
			return o, err
		}
	}
	o.Time = o.Time.UTC().Truncate(time.Second)
	if o.Name == "" {
		o.Name = "dnsconfigurer:" + strings.ReplaceAll(o.Version, "+", "_")
	}
	if o.tag, o.ref, o.familiar, err = parseName(o.Name); err != nil {
		return o, err
	}
	return o, nil
}

// parsePlatform returns the architecture of "linux/amd64" or
// "linux/arm64".
func parsePlatform(p string) (string, error) {
	switch p {
	case "linux/amd64", "linux/arm64":
		return strings.TrimPrefix(p, "linux/"), nil
	}
	return "", fmt.Errorf("platform %q: must be linux/amd64 or linux/arm64", p)
}

// parseName checks that s is an image reference with a tag (added as
// "latest" when missing) and returns it with containerd's full name
// ("docker.io/library/dnsconfigurer:latest") and docker's familiar one
// ("dnsconfigurer:latest").
func parseName(s string) (name.Tag, string, string, error) {
	tag, err := name.NewTag(s)
	if err != nil {
		return name.Tag{}, "", "", fmt.Errorf("image name %q: want NAME[:TAG]: %w", s, err)
	}
	reg, repo := tag.RegistryStr(), tag.RepositoryStr()
	if reg != name.DefaultRegistry {
		return tag, reg + "/" + repo + ":" + tag.TagStr(), reg + "/" + repo + ":" + tag.TagStr(), nil
	}
	familiar := repo
	if short, ok := strings.CutPrefix(repo, "library/"); ok && !strings.Contains(short, "/") {
		familiar = short
	}
	return tag, "docker.io/" + repo + ":" + tag.TagStr(), familiar + ":" + tag.TagStr(), nil
}

// sourceDateEpoch is the image's time: env ($SOURCE_DATE_EPOCH, seconds)
// when set, else commit, else the Unix epoch.
func sourceDateEpoch(env string, commit time.Time) (time.Time, error) {
	if env != "" {
		sec, err := strconv.ParseInt(env, 10, 64)
		if err != nil || sec < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since the Unix epoch", env)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	if !commit.IsZero() {
		return commit.UTC(), nil
	}
	return time.Unix(0, 0).UTC(), nil
}

// gitFacts is what git says about a source tree.
type gitFacts struct {
	version, revision string
	time              time.Time
}

// gitInfo asks git about dir. Outside a git tree (or without git) the
// version is "devel", the revision "unknown" and the time zero.
func gitInfo(ctx context.Context, dir string) gitFacts {
	f := gitFacts{version: "devel", revision: "unknown"}
	run := func(args ...string) (string, bool) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		cmd.Stderr = io.Discard
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	rev, ok := run("rev-parse", "HEAD")
	if !ok || rev == "" {
		return f
	}
	f.revision = rev
	if ct, ok := run("log", "-1", "--format=%ct", "HEAD"); ok {
		if sec, err := strconv.ParseInt(ct, 10, 64); err == nil {
			f.time = time.Unix(sec, 0).UTC()
		}
	}
	status, _ := run("status", "--porcelain") // the go command's vcs.modified rule
	exact, _ := run("tag", "--points-at", "HEAD", "--list", "v*")
	latest, _ := run("describe", "--tags", "--abbrev=0", "--match", "v*")
	f.version = goVersion(strings.Fields(exact), latest, f.time, rev, status != "")
	if status != "" {
		f.revision += "-dirty"
	}
	return f
}

// GitVersion is the version and revision Build takes from git for the
// source tree at dir when Options name none ("devel" and "unknown" outside
// a git tree).
func GitVersion(ctx context.Context, dir string) (version, revision string) {
	f := gitInfo(ctx, dir)
	return f.version, f.revision
}

// goVersion is the version the go command stamps into a build of a module
// at commit rev (committed at t): the highest semver tag on it, else a
// pseudo-version after the latest semver tag before it, with "+dirty" for
// a tree with local changes.
func goVersion(tagsOnHead []string, latest string, t time.Time, rev string, dirty bool) string {
	var v string
	for _, tag := range tagsOnHead {
		if semver.IsValid(tag) && semver.Build(tag) == "" && (v == "" || semver.Compare(tag, v) > 0) {
			v = tag
		}
	}
	if v == "" {
		major, older := "v0", ""
		if semver.IsValid(latest) && semver.Build(latest) == "" {
			major, older = semver.Major(latest), latest
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v = module.PseudoVersion(major, older, t, rev)
	}
	if dirty {
		v += "+dirty"
	}
	return v
}

// LDFlags are the linker flags of the image's binary: stripped, with the
// version and revision set.
func LDFlags(version, revision string) string {
	return fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", VersionPackage, version, VersionPackage, revision)
}

// compile builds Package for linux/arch and returns the binary. The
// environment is pinned where it would change the output: no cgo, the
// baseline instruction sets, and GOFLAGS replaced (so no -race, no VCS
// stamping).
func compile(ctx context.Context, o resolved, arch string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "dnsconfigurer-image-")
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", Package, err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "dnsconfigurer")
	cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", LDFlags(o.Version, o.Revision), "-o", out, Package)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOAMD64=v1", "GOARM64=v8.0",
		"GOFLAGS=-buildvcs=false")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build %s for linux/%s: %w\n%s", Package, arch, err, bytes.TrimSpace(stderr.Bytes()))
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", Package, err)
	}
	return bin, nil
}
