package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// imageName is what the test calls the image ($IMAGE).
const imageName = "dnsconfigurer:e2e"

// TestImage builds the image index with hack/build-image twice (the
// archives and SBOMs must be byte-identical), checks the archive as ctr and
// docker read it, both platforms' images, the SBOM against `go version -m`
// of the image's binary and the version against the go command's own
// stamp, then runs the host's image in containerd and checks the other
// platform's in containerd's content store.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image twice: skipped in -short mode")
	}
	needBuildTools(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	version := goStampedVersion(t, root)
	revision := gitOr(t, root, "unknown", "rev-parse", "HEAD")
	if strings.HasSuffix(version, "+dirty") {
		revision += "-dirty"
	}

	first, second := sharedArchive(t, root), filepath.Join(t.TempDir(), "dc-again.tar")
	buildArchive(t, root, second)
	for _, pair := range [][2]string{{first, second}, {sbomPath(first), sbomPath(second)}} {
		if a, b := sha256File(t, pair[0]), sha256File(t, pair[1]); a != b {
			t.Errorf("two builds differ: %s sha256 %x, %s %x", pair[0], a, pair[1], b)
		}
	}
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("archive: %.1f MiB, sha256 %x; SBOM sha256 %x", float64(fi.Size())/(1<<20), sha256File(t, first), sha256File(t, sbomPath(first)))
	built := checkArchive(t, first, version, revision)

	t.Run("skopeo", func(t *testing.T) { checkSkopeo(t, first, built, version) })

	t.Run("containerd", func(t *testing.T) {
		if _, ok := built.images[runtime.GOARCH]; !ok {
			t.Skipf("no image was built for the host's architecture %s", runtime.GOARCH)
		}
		h := runInContainerd(t, root, first)
		// ctr imports every platform's content in a namespace of its own,
		// under the index's digest; each config is in the content store.
		ns := "dnsconfigurer-image-all"
		ctr := func(args ...string) string {
			t.Helper()
			out, err := exec.Command("ctr", append([]string{"--address", h.Socket, "--namespace", ns}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		ctr("images", "import", "--all-platforms", first)
		if out := ctr("images", "ls", "name==docker.io/library/"+imageName); !strings.Contains(out, built.index.String()) ||
			!strings.Contains(out, "linux/amd64") || !strings.Contains(out, "linux/arm64") {
			t.Errorf("ctr images ls:\n%s\nwant %s at %s for linux/amd64 and linux/arm64", out, imageName, built.index)
		}
		for arch, cfg := range built.images {
			var cf v1.ConfigFile
			if err := json.Unmarshal([]byte(ctr("content", "get", cfg.String())), &cf); err != nil {
				t.Fatalf("linux/%s config from containerd: %v", arch, err)
			}
			if cf.Architecture != arch || cf.OS != "linux" || !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/usr/local/bin/dnsconfigurer"}) {
				t.Errorf("linux/%s config in containerd: %s/%s entrypoint %q", arch, cf.OS, cf.Architecture, cf.Config.Entrypoint)
			}
		}
	})
}

// checkSkopeo reads the archive with skopeo (containers/image, another
// implementation of the formats): as a docker-save archive by each tag
// docker load would give (the platform's config, with the entrypoint and
// the version label), and as an OCI archive (the index, both platforms).
func checkSkopeo(t *testing.T, archive string, built builtImage, version string) {
	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		t.Skip("no skopeo (test/e2e/setup.sh installs Debian's)")
	}
	for tag, arch := range map[string]string{imageName: "amd64", imageName + "-amd64": "amd64", imageName + "-arm64": "arm64"} {
		out, err := exec.Command(skopeo, "inspect", "--config", "docker-archive:"+archive+":"+tag).Output()
		if err != nil {
			t.Fatalf("skopeo inspect --config docker-archive:…:%s: %v", tag, err)
		}
		var cf v1.ConfigFile
		if err := json.Unmarshal(out, &cf); err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != arch || !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/usr/local/bin/dnsconfigurer"}) ||
			cf.Config.Labels["org.opencontainers.image.version"] != version {
			t.Errorf("skopeo, docker-archive %s: %s, entrypoint %q, version %q; want %s", tag, cf.Architecture, cf.Config.Entrypoint, cf.Config.Labels["org.opencontainers.image.version"], arch)
		}
	}
	out, err := exec.Command(skopeo, "inspect", "--raw", "oci-archive:"+archive).Output()
	if err != nil {
		t.Fatalf("skopeo inspect --raw oci-archive: %v", err)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(out, &idx); err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range idx.Manifests {
		if m.Platform != nil {
			platforms = append(platforms, m.Platform.String())
		}
	}
	if !reflect.DeepEqual(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("skopeo, oci-archive: the index lists %q", platforms)
	}
	t.Logf("skopeo reads the archive as docker-archive (3 tags) and oci-archive (index %s)", built.index)
}

func sbomPath(archive string) string { return strings.TrimSuffix(archive, ".tar") + ".spdx.json" }

// goStampedVersion is the version the go command itself stamps into a
// build of the module at root (Main.Version of its build info), which the
// image's must equal.
func goStampedVersion(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stamped")
	cmd := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/dnsconfigurer")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		t.Skipf("the go command stamped no version (%q): not a git checkout?", bi.Main.Version)
	}
	return bi.Main.Version
}

// gitOr returns git's output in dir, or def when git fails.
func gitOr(t *testing.T, dir, def string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if s := strings.TrimSpace(string(out)); err == nil && s != "" {
		return s
	}
	return def
}

func sha256File(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// builtImage is what checkArchive found: the index's digest and each
// platform's config digest.
type builtImage struct {
	index  v1.Hash
	images map[string]v1.Hash // arch -> config digest
}

// checkArchive lists the archive and checks the index ctr reads, the
// manifest.json docker reads, and each platform's image (its config,
// files and binary; on the host's architecture it runs the binary too)
// and its SBOM entry.
func checkArchive(t *testing.T, path, version, revision string) builtImage {
	t.Helper()
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	var names []string
	var index v1.IndexManifest
	blobs := map[string][]byte{}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, e := range testkit.ReadTar(t, f) {
		names = append(names, e.Name)
		blobs[e.Name] = e.Data
	}
	if len(names) != 12 || names[9] != "index.json" || names[10] != "manifest.json" || names[11] != "oci-layout" {
		t.Errorf("archive holds %q, want blobs/, blobs/sha256/, 7 blobs, index.json, manifest.json, oci-layout", names)
	}
	// index.json, which ctr reads: the name and the image index.
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests, want 1", err, len(index.Manifests))
	}
	desc := index.Manifests[0]
	if got := desc.Annotations["io.containerd.image.name"]; got != "docker.io/library/"+imageName {
		t.Errorf("index.json names the image %q, want docker.io/library/%s", got, imageName)
	}
	var inner v1.IndexManifest
	if err := json.Unmarshal(blobs["blobs/sha256/"+desc.Digest.Hex], &inner); err != nil || inner.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("the image index: %v, media type %q", err, inner.MediaType)
	}
	built := builtImage{index: desc.Digest, images: map[string]v1.Hash{}}
	var arches []string
	for _, m := range inner.Manifests {
		if m.Platform != nil {
			arches = append(arches, m.Platform.String())
		}
	}
	if !reflect.DeepEqual(arches, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("the image index has %q, want linux/amd64 and linux/arm64", arches)
	}
	// manifest.json, which docker load reads: one image per platform.
	m, err := tarball.LoadManifest(opener)
	if err != nil || len(m) != 2 || !reflect.DeepEqual(m[0].RepoTags, []string{imageName, imageName + "-amd64"}) ||
		!reflect.DeepEqual(m[1].RepoTags, []string{imageName + "-arm64"}) {
		t.Fatalf("manifest.json: %+v, %v; want %s and %s-amd64, then %s-arm64", m, err, imageName, imageName, imageName)
	}
	sbom := readSBOM(t, sbomPath(path))
	for _, arch := range []string{"amd64", "arm64"} {
		tag, err := name.NewTag(imageName + "-" + arch)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.Image(opener, &tag)
		if err != nil {
			t.Fatal(err)
		}
		if built.images[arch], err = img.ConfigName(); err != nil {
			t.Fatal(err)
		}
		bin := checkImage(t, img, arch, version, revision)
		got, want := sbom["Binary-linux-"+arch], testkit.GoVersionM(t, bin, version)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("linux/%s: the SBOM lists\n%q\ngo version -m of the image's binary (and stdlib)\n%q", arch, got, want)
		}
		t.Logf("linux/%s: config %s; the SBOM lists %d modules, as go version -m", arch, built.images[arch], len(got))
	}
	return built
}

// readSBOM reads the SPDX document and returns, per binary package ID, the
// path@version of the packages it DEPENDS_ON, sorted.
func readSBOM(t *testing.T, path string) map[string][]string {
	t.Helper()
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			ID      string `json:"SPDXID"`
			Name    string `json:"name"`
			Version string `json:"versionInfo"`
		} `json:"packages"`
		Relationships []struct {
			A    string `json:"spdxElementId"`
			B    string `json:"relatedSpdxElement"`
			Type string `json:"relationshipType"`
		} `json:"relationships"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.SPDXVersion != "SPDX-2.3" {
		t.Fatalf("%s: %v, version %q", path, err, doc.SPDXVersion)
	}
	pkgs := map[string]string{}
	for _, p := range doc.Packages {
		pkgs[p.ID] = p.Name + "@" + p.Version
	}
	deps := map[string][]string{}
	for _, r := range doc.Relationships {
		if r.Type == "DEPENDS_ON" {
			a := strings.TrimPrefix(r.A, "SPDXRef-")
			deps[a] = append(deps[a], pkgs[r.B])
		}
	}
	for _, d := range deps {
		sort.Strings(d)
	}
	return deps
}

// checkImage checks one platform's image: its config, its files, and its
// binary, which it returns.
func checkImage(t *testing.T, img v1.Image, arch, version, revision string) []byte {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := v1.Config{
		Entrypoint: []string{"/usr/local/bin/dnsconfigurer"},
		User:       "65532:65532",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		Labels: map[string]string{
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": revision,
			"org.opencontainers.image.source":   "https://github.com/dnsconfigurer/dnsconfigurer",
		},
	}
	if cf.OS != "linux" || cf.Architecture != arch || !reflect.DeepEqual(cf.Config, wantCfg) {
		t.Errorf("config %s/%s %+v\nwant linux/%s %+v", cf.OS, cf.Architecture, cf.Config, arch, wantCfg)
	}

	var files []string
	var bin []byte
	for _, e := range testkit.ImageLayer(t, img) {
		files = append(files, fmt.Sprintf("%s %o %d:%d", e.Name, e.Mode, e.Uid, e.Gid))
		if e.Name == "usr/local/bin/dnsconfigurer" {
			bin = e.Data
		}
	}
	wantFiles := []string{
		"etc/ 755 0:0", "etc/group 644 0:0", "etc/passwd 644 0:0", "etc/ssl/ 755 0:0", "etc/ssl/certs/ 755 0:0",
		"etc/ssl/certs/ca-certificates.crt 644 0:0", "home/ 755 0:0", "home/nonroot/ 700 65532:65532", "tmp/ 1777 0:0",
		"usr/ 755 0:0", "usr/local/ 755 0:0", "usr/local/bin/ 755 0:0", "usr/local/bin/dnsconfigurer 755 0:0",
	}
	if !reflect.DeepEqual(files, wantFiles) {
		t.Errorf("layer holds\n%q\nwant\n%q", files, wantFiles)
	}
	checkBinary(t, bin, arch, version, revision)
	return bin
}

// checkBinary checks that bin is a static, stripped Linux executable for
// arch and, when the host can run it, that it reports version and revision.
func checkBinary(t *testing.T, bin []byte, arch, version, revision string) {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("the binary: %v", err)
	}
	defer ef.Close()
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if ef.Machine != wantMachine || ef.OSABI != elf.ELFOSABI_NONE && ef.OSABI != elf.ELFOSABI_LINUX {
		t.Errorf("the binary is for %v/%v, want %v", ef.Machine, ef.OSABI, wantMachine)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary is dynamically linked (%v)", p.Type)
		}
	}
	if ef.Section(".symtab") != nil {
		t.Error("the binary has a symbol table (-s missing)")
	}
	if arch != runtime.GOARCH || runtime.GOOS != "linux" {
		return
	}
	p := filepath.Join(t.TempDir(), "dnsconfigurer")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p, "--version").CombinedOutput()
	want := fmt.Sprintf("dnsconfigurer %s (revision %s, ", version, revision)
	if err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("dnsconfigurer --version: %v: %q, want %q...", err, out, want)
	}
}

// runInContainerd imports the archive into a harness containerd with `ctr
// images import` and runs dnsconfigurer render in a container of it.
func runInContainerd(t *testing.T, root, archive string) *containerd.Harness {
	h := containerd.Start(t, containerd.Options{Images: map[string]string{imageName: archive}})
	t.Logf("%s started and imported %s in %v", h.ContainerdVersion, imageName, h.Started.Round(time.Millisecond))
	c := h.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The CRI plugin knows the image by the name the archive gives it,
	// and its user.
	st, err := c.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: imageName}})
	if err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus(%s) = %v, %v", imageName, st, err)
	}
	if tags := st.GetImage().GetRepoTags(); !reflect.DeepEqual(tags, []string{"docker.io/library/" + imageName}) {
		t.Errorf("the image is tagged %q, want docker.io/library/%s", tags, imageName)
	}
	if uid := st.GetImage().GetUid(); uid == nil || uid.Value != 65532 {
		t.Errorf("the image's uid is %v, want 65532", uid)
	}

	// The example pod and node resolv.conf, mounted read-only, and a file
	// only root may read.
	examples := t.TempDir()
	if err := os.Chmod(examples, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pod.yaml", "node-resolv.conf"} {
		b, err := os.ReadFile(filepath.Join(root, "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(examples, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if name == "pod.yaml" {
			if err := os.WriteFile(filepath.Join(examples, "root-only.yaml"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	pod, err := c.RunPod(ctx, containerd.PodSpec{Name: "image"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) (int32, string, string) {
		t.Helper()
		cfg := &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: imageName},
			Args:     args, // after the image's entrypoint
			Mounts:   []*runtimeapi.Mount{{ContainerPath: "/examples", HostPath: examples, Readonly: true}},
			LogPath:  name + "_0.log",
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: pod.Config.GetLinux().GetSecurityContext().GetNamespaceOptions(),
			}},
		}
		resp, err := c.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: pod.ID, Config: cfg, SandboxConfig: pod.Config})
		if err != nil {
			t.Fatalf("create container %s: %v", name, err)
		}
		if _, err := c.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
			t.Fatalf("start container %s: %v", name, err)
		}
		code, err := c.WaitExit(ctx, resp.ContainerId)
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := c.Logs(&containerd.Container{ID: resp.ContainerId, LogPath: filepath.Join(pod.Config.LogDirectory, cfg.LogPath)})
		if err != nil {
			t.Fatal(err)
		}
		return code, stdout, stderr
	}

	// kubelet's rules for a ClusterFirst pod in namespace prod with
	// ndots:2 and edns0, on a node whose resolv.conf searches two domains.
	const want = "search prod.svc.cluster.local svc.cluster.local cluster.local corp.example.com lab.example.com\n" +
		"nameserver 10.96.0.10\n" +
		"options ndots:2 edns0\n"
	code, stdout, stderr := run("render", "render", "-f", "/examples/pod.yaml", "--resolv-conf", "/examples/node-resolv.conf")
	t.Logf("dnsconfigurer render in a container of %s: exit %d\n%s", imageName, code, stdout)
	if code != 0 || stdout != want {
		t.Errorf("dnsconfigurer render in the image: exit %d\nstdout %q\nstderr %q\nwant stdout %q", code, stdout, stderr, want)
	}
	// Root could read the file; the image's user cannot.
	code, stdout, stderr = run("nonroot", "render", "-f", "/examples/root-only.yaml")
	t.Logf("as the image's user: exit %d: %s", code, strings.TrimSpace(stderr))
	if code != 2 || !strings.Contains(stderr, "permission denied") {
		t.Errorf("render of a root-only file: exit %d, stdout %q, stderr %q; want exit 2 and permission denied (the image runs as 65532)", code, stdout, stderr)
	}
	return h
}
