package imagebuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/semver"
)

// chartFile is the Helm chart whose appVersion is the image tag it deploys
// by default.
const chartFile = "../../charts/dnsconfigurer/Chart.yaml"

// chartVersions reads the chart's version and appVersion from dir's
// charts/dnsconfigurer/Chart.yaml.
func chartVersions(t *testing.T, path string) (version, appVersion string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c.Version, c.AppVersion
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// requireGit skips t outside a git checkout of the module.
func requireGit(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Run(); err != nil {
		t.Skipf("%s is not a git checkout: %v", root, err)
	}
	return root
}

// TestChartVersionRule checks the release rule on the checkout: the chart's
// appVersion is a release version vX.Y.Z, its version the same without the
// v, no older than the newest v* tag, and equal to the tag on HEAD when
// there is one. A release tag that forgot the chart fails here.
func TestChartVersionRule(t *testing.T) {
	version, appVersion := chartVersions(t, chartFile)
	if !semver.IsValid(appVersion) || semver.Canonical(appVersion) != appVersion || semver.Prerelease(appVersion) != "" {
		t.Fatalf("%s: appVersion %q, want a release version vX.Y.Z", chartFile, appVersion)
	}
	if version != strings.TrimPrefix(appVersion, "v") {
		t.Errorf("%s: version %q, want appVersion without the v: %q", chartFile, version, strings.TrimPrefix(appVersion, "v"))
	}
	root := requireGit(t)
	for _, tag := range strings.Fields(git(t, root, "tag", "--list", "v*")) {
		if semver.IsValid(tag) && semver.Compare(tag, appVersion) > 0 {
			t.Errorf("tag %s is newer than the chart's appVersion %s: set Chart.yaml's version and appVersion to the release", tag, appVersion)
		}
	}
	for _, tag := range strings.Fields(git(t, root, "tag", "--points-at", "HEAD", "--list", "v*")) {
		if semver.IsValid(tag) && semver.Build(tag) == "" && tag != appVersion {
			t.Errorf("HEAD is tagged %s but the chart's appVersion is %s", tag, appVersion)
		}
	}
}

// TestReleaseVersionAgrees tags a clone of HEAD as the chart's appVersion,
// as a release does, and checks that every version agrees with the tag:
// GitVersion, hack/buildimage --print-version, the default image tag and
// `dnsconfigurer version` of a binary linked with LDFlags.
func TestReleaseVersionAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dnsconfigurer: skipped in -short mode")
	}
	root := requireGit(t)
	clone := filepath.Join(t.TempDir(), "release")
	// --shared reads root's objects: no copy, and a CI checkout works too.
	git(t, root, "clone", "-q", "--shared", "--no-checkout", root, clone)
	git(t, clone, "checkout", "-q", git(t, root, "rev-parse", "HEAD"))
	_, appVersion := chartVersions(t, filepath.Join(clone, "charts", "dnsconfigurer", "Chart.yaml"))
	git(t, clone, "tag", appVersion)

	ctx := context.Background()
	version, revision := GitVersion(ctx, clone)
	if version != appVersion || strings.HasSuffix(revision, "-dirty") {
		t.Errorf("GitVersion = %s %s, want %s and a clean revision", version, revision, appVersion)
	}
	o, err := Options{Dir: clone}.resolve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Name != "dnsconfigurer:"+appVersion {
		t.Errorf("hack/build-image names the image %s, want dnsconfigurer:%s (the chart's default image tag)", o.Name, appVersion)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = clone
		// compile's settings, so the build cache of an image build serves.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-buildvcs=false")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := strings.Fields(run("go", "run", "./hack/buildimage", "--print-version")); len(got) != 2 || got[0] != appVersion {
		t.Errorf("hack/buildimage --print-version prints %q, want %s REVISION", got, appVersion)
	}
	bin := filepath.Join(t.TempDir(), "dnsconfigurer")
	run("go", "build", "-trimpath", "-ldflags", LDFlags(version, revision), "-o", bin, Package)
	if got, want := run(bin, "version"), "dnsconfigurer "+appVersion+" (revision "+revision+", "; !strings.HasPrefix(got, want) {
		t.Errorf("dnsconfigurer version prints %q, want %q...", got, want)
	}
}
