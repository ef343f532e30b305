package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// imageName is what the test calls the image ($IMAGE).
const imageName = "dnsconfigurer:e2e"

// TestImage builds the image with hack/build-image for both platforms,
// checks each archive, and runs the host's in containerd.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image four times: skipped in -short mode")
	}
	for _, tool := range []string{"go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s command: %v", tool, err)
		}
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err != nil {
		t.Skipf("no CA bundle to build the image with (apt-get install ca-certificates): %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	version := gitOr(t, root, "devel", "describe", "--tags", "--always", "--dirty")
	revision := gitOr(t, root, "unknown", "rev-parse", "HEAD")
	if strings.HasSuffix(version, "-dirty") {
		revision += "-dirty"
	}

	dir := t.TempDir()
	type built struct {
		path   string
		digest v1.Hash
	}
	archives := map[string]built{}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run("build/"+arch, func(t *testing.T) {
			first := filepath.Join(dir, arch+".tar")
			second := filepath.Join(dir, arch+"-again.tar")
			for _, out := range []string{first, second} {
				start := time.Now()
				cmd := exec.Command(filepath.Join(root, "hack", "build-image"), out, "--platform", "linux/"+arch)
				cmd.Dir = dir // OUT is relative to the caller, not to the module
				cmd.Env = append(os.Environ(), "IMAGE="+imageName)
				msg, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("hack/build-image: %v\n%s", err, msg)
				}
				t.Logf("%s(%v)", msg, time.Since(start).Round(100*time.Millisecond))
			}
			a, b := sha256File(t, first), sha256File(t, second)
			if a != b {
				t.Errorf("two builds differ: sha256 %x and %x", a, b)
			}
			fi, err := os.Stat(first)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("linux/%s archive: %.1f MiB, sha256 %x", arch, float64(fi.Size())/(1<<20), a)
			archives[arch] = built{first, checkArchive(t, first, arch, version, revision)}
		})
	}

	t.Run("containerd", func(t *testing.T) {
		host, ok := archives[runtime.GOARCH]
		if !ok {
			t.Skipf("no image was built for the host's architecture %s", runtime.GOARCH)
		}
		h := runInContainerd(t, root, host.path)
		// ctr imports the other platform's archive too (not to run it).
		for arch, b := range archives {
			if arch == runtime.GOARCH {
				continue
			}
			out, err := exec.Command("ctr", "--address", h.Socket, "--namespace", "dnsconfigurer-image-"+arch,
				"images", "import", "--platform", "linux/"+arch, b.path).CombinedOutput()
			if err != nil {
				t.Fatalf("ctr images import --platform linux/%s: %v\n%s", arch, err, out)
			}
			out, err = exec.Command("ctr", "--address", h.Socket, "--namespace", "dnsconfigurer-image-"+arch,
				"images", "ls", "name==docker.io/library/"+imageName).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "docker.io/library/"+imageName) || !strings.Contains(string(out), b.digest.String()) {
				t.Errorf("ctr images ls after importing linux/%s: %v:\n%s\nwant %s at %s", arch, err, out, imageName, b.digest)
			}
		}
	})
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

// checkArchive lists the archive and checks the image's name, config,
// files and binary (on the host's architecture it runs the binary too). It
// returns the digest of the manifest index.json names.
func checkArchive(t *testing.T, path, arch, version, revision string) v1.Hash {
	t.Helper()
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	var names []string
	var index v1.IndexManifest
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Name == "index.json" {
			if err := json.NewDecoder(tr).Decode(&index); err != nil {
				t.Fatalf("index.json: %v", err)
			}
		}
	}
	if len(names) != 8 || names[5] != "index.json" || names[6] != "manifest.json" || names[7] != "oci-layout" {
		t.Errorf("archive holds %q, want blobs/, blobs/sha256/, 3 blobs, index.json, manifest.json, oci-layout", names)
	}
	// index.json, which ctr reads: the name, the platform, the manifest.
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(index.Manifests))
	}
	desc := index.Manifests[0]
	if got := desc.Annotations["io.containerd.image.name"]; got != "docker.io/library/"+imageName {
		t.Errorf("index.json names the image %q, want docker.io/library/%s", got, imageName)
	}
	if desc.Platform == nil || desc.Platform.String() != "linux/"+arch {
		t.Errorf("index.json's platform is %v, want linux/%s", desc.Platform, arch)
	}
	// manifest.json, which docker load reads.
	m, err := tarball.LoadManifest(opener)
	if err != nil || len(m) != 1 || !reflect.DeepEqual(m[0].RepoTags, []string{imageName}) {
		t.Fatalf("manifest.json: %+v, %v; want one image tagged %s", m, err, imageName)
	}
	img, err := tarball.Image(opener, nil)
	if err != nil {
		t.Fatal(err)
	}
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

	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []string
	var bin []byte
	lr := tar.NewReader(rc)
	for {
		hdr, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fmt.Sprintf("%s %o %d:%d", hdr.Name, hdr.Mode, hdr.Uid, hdr.Gid))
		if hdr.Name == "usr/local/bin/dnsconfigurer" {
			if bin, err = io.ReadAll(lr); err != nil {
				t.Fatal(err)
			}
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
	return desc.Digest
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
