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
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
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
	// Platform is "linux/amd64" or "linux/arm64"; "" is linux and the
	// host's architecture.
	Platform string
	// Name is the image reference the archive carries, with a tag, e.g.
	// "dnsconfigurer:latest" or "registry.example/dnsconfigurer:v0.2.0";
	// "" is "dnsconfigurer:<Version>".
	Name string
	// Version and Revision are linked into the binary (see
	// internal/version) and labelled. "" takes them from git in Dir:
	// `git describe --tags --always --dirty` and `git rev-parse HEAD` (with
	// "-dirty" when the tree has local changes); outside a git tree they are
	// "devel" and "unknown".
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

// Result describes a built image.
type Result struct {
	// Name is the image name as given or defaulted (RepoTags), and Ref its
	// full form as containerd names it (io.containerd.image.name):
	// "dnsconfigurer:latest" and "docker.io/library/dnsconfigurer:latest".
	Name, Ref string
	// Platform is "linux/amd64" or "linux/arm64".
	Platform string
	// Version, Revision and Time are the values used.
	Version, Revision string
	Time              time.Time
	// Digest is the image manifest's digest ("sha256:...").
	Digest string
	// LayerSize is the compressed layer's size, BinarySize the binary's, in bytes.
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
	bin, err := compile(ctx, o)
	if err != nil {
		return Result{}, err
	}
	return o.write(w, bin, certs)
}

// BuildFile is Build into the file path, which appears complete or not at
// all (written to a temporary file beside it, then renamed).
func BuildFile(ctx context.Context, path string, opts Options) (Result, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return Result{}, fmt.Errorf("write image archive: %w", err)
	}
	defer os.Remove(tmp.Name())
	res, err := Build(ctx, tmp, opts)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write image archive: %w", cerr)
	}
	if err != nil {
		return Result{}, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return Result{}, fmt.Errorf("write image archive: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Result{}, fmt.Errorf("write image archive: %w", err)
	}
	return res, nil
}

// resolved are Options with every default filled in and checked (Dir
// absolute, Platform "linux/<arch>").
type resolved struct {
	Options
	arch     string // amd64 or arm64
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
	if o.arch, err = parsePlatform(o.Platform); err != nil {
		return o, err
	}
	o.Platform = "linux/" + o.arch
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
		o.Name = "dnsconfigurer:" + o.Version
	}
	if o.tag, o.ref, o.familiar, err = parseName(o.Name); err != nil {
		return o, err
	}
	return o, nil
}

// parsePlatform returns the architecture of "linux/amd64" or
// "linux/arm64"; "" is the host's.
func parsePlatform(p string) (string, error) {
	if p == "" {
		p = "linux/" + runtime.GOARCH
	}
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
	if v, ok := run("describe", "--tags", "--always", "--dirty"); ok && v != "" {
		f.version = v
	}
	f.revision = rev
	if strings.HasSuffix(f.version, "-dirty") {
		f.revision += "-dirty"
	}
	if ct, ok := run("log", "-1", "--format=%ct", "HEAD"); ok {
		if sec, err := strconv.ParseInt(ct, 10, 64); err == nil {
			f.time = time.Unix(sec, 0).UTC()
		}
	}
	return f
}

// LDFlags are the linker flags of the image's binary: stripped, with the
// version and revision set.
func LDFlags(version, revision string) string {
	return fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", VersionPackage, version, VersionPackage, revision)
}

// compile builds Package for o's platform and returns the binary. The
// environment is pinned where it would change the output: no cgo, the
// baseline instruction sets, and GOFLAGS replaced (so no -race, no VCS
// stamping).
func compile(ctx context.Context, o resolved) ([]byte, error) {
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
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.arch, "GOAMD64=v1", "GOARM64=v8.0",
		"GOFLAGS=-buildvcs=false")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build %s for %s: %w\n%s", Package, o.Platform, err, bytes.TrimSpace(stderr.Bytes()))
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", Package, err)
	}
	return bin, nil
}
