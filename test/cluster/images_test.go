package cluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/imagebuild"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

func TestImgNormalizeRef(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"busybox:1.36", "docker.io/library/busybox:1.36"},
		{"dnsconfigurer:latest", "docker.io/library/dnsconfigurer:latest"},
		{"dnsconfigurer", "docker.io/library/dnsconfigurer:latest"},
		{"docker.io/busybox", "docker.io/library/busybox:latest"},
		{"someone/tool:v1", "docker.io/someone/tool:v1"},
		{"localhost/tool", "localhost/tool:latest"},
		{"localhost:5000/tool:v1", "localhost:5000/tool:v1"},
		{"registry.k8s.io/pause:3.10.1", "registry.k8s.io/pause:3.10.1"},
		{AgnhostImage, AgnhostImage},
		{"registry.k8s.io/e2e-test-images/agnhost@sha256:00", "registry.k8s.io/e2e-test-images/agnhost@sha256:00"},
	} {
		if got := imgNormalizeRef(tc.in); got != tc.want {
			t.Errorf("imgNormalizeRef(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestImgToolsRootfs unpacks the tools root filesystem and runs its
// commands in a chroot: the shared-library closure must be complete.
func TestImgToolsRootfs(t *testing.T) {
	imgNeedRoot(t)
	files, err := imgToolsRootfs()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	img := imgUnpack(t, imgShell(t, "dnsconfigurer.test/tools:test", files), root)
	t.Logf("tools layer: %d files, %d MB uncompressed, %d MB compressed", len(files), img.layerSize>>20, img.blobSize>>20)
	if err := os.WriteFile(filepath.Join(root, "etc/hosts"), []byte("127.0.0.1 localhost\n192.0.2.7 from-hosts.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"/bin", "/usr/bin"} {
		for _, name := range imgTools {
			if _, err := os.Stat(filepath.Join(root, dir, name)); err != nil {
				t.Errorf("%s/%s: %v", dir, name, err)
			}
		}
	}
	for _, p := range []string{"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/etc/nsswitch.conf", "/etc/ssl/certs/ca-certificates.crt"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}

	port := imgDNSServer(t)
	imgChrootCases(t, root, []chrootCase{
		{"echo hello", "hello\n"},
		{"bash -c 'echo $((6*7))'", "42\n"},
		{"seq 1 3 | awk '{s += $1} END {print s}'", "6\n"},
		{"printf '%s\\n' b a b | sort | uniq | tr a-z A-Z | head -n 1", "A\n"},
		{"echo a.b.c | cut -d. -f2 | sed s/b/x/ | grep -c x", "1\n"},
		{"[ -x /bin/sh ] && test -d /tmp && echo yes", "yes\n"},
		{"getent hosts localhost", "127.0.0.1       localhost\n"},
		{"getent hosts from-hosts.test", "192.0.2.7       from-hosts.test\n"},
		{"getent passwd 65532 | cut -d: -f1", "nonroot\n"},
		{"id -un 65534", "nobody\n"},
		{"dig -v 2>&1 | cut -d' ' -f1", "DiG\n"},
		{"dig +short @127.0.0.1 -p " + port + " stand-in.test A", "192.0.2.53\n"},
		{"dig +tcp +short @127.0.0.1 -p " + port + " stand-in.test A", "192.0.2.53\n"},
		{"nslookup -port=" + port + " stand-in.test 127.0.0.1 | grep -c 192.0.2.53", "1\n"},
		{"host -p " + port + " stand-in.test 127.0.0.1 | grep -c 192.0.2.53", "1\n"},
		{"ip -V | cut -d' ' -f1-2", "ip utility,\n"},
		{"ip -o link show lo | cut -d' ' -f2", "lo:\n"},
		{"timeout 5 sleep 0 && env | grep -c '^PATH='", "1\n"},
		{"mkdir -p /tmp/x && touch /tmp/x/f && ls /tmp/x | wc -l && rm -r /tmp/x", "1\n"},
		{"hostname >/tmp/h && test -s /tmp/h && echo ok", "ok\n"},
	})
}

// TestBusyboxRootfs unpacks the busybox root filesystem (critest's
// stand-ins) and runs busybox in a chroot: applets are hard links of one
// executable file, the shell finds commands through $PATH (a masked
// /bin/ls is not run), and the extra host commands run.
func TestBusyboxRootfs(t *testing.T) {
	imgNeedRoot(t)
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Skipf("no busybox (test/e2e/setup.sh installs it): %v", err)
	}
	files, err := BusyboxRootfs(context.Background(), "ipcs", "pgrep")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	img := imgUnpack(t, imgShell(t, "dnsconfigurer.test/busybox:test", files), root)
	t.Logf("busybox layer: %d files, %d MB uncompressed", len(files), img.layerSize>>20)
	imgChrootCases(t, root, []chrootCase{
		{"echo hello", "hello\n"},
		{"[ /bin/ls -ef /usr/bin/busybox ] && [ -x /bin/ls ] && echo same", "same\n"},
		{"readlink /bin/sh || echo not a symlink", "not a symlink\n"},
		{"(PATH=/nonexistent; ls) 2>&1; echo $?", "/bin/sh: ls: not found\n127\n"},
		{"id -u www-data; id -u nobody", "33\n65534\n"},
		{"pgrep -x no-such-process; echo $?", "1\n"},
		{"ipcs -m | grep -c 'Shared Memory'", "1\n"},
	})
}

// TestStandInImages builds every stand-in image and checks what each
// holds. It needs agnhost and coredns in $DNSCONFIGURER_TESTBIN.
func TestStandInImages(t *testing.T) {
	imgNeedRoot(t)
	binDir := os.Getenv("DNSCONFIGURER_TESTBIN")
	if binDir == "" {
		t.Skip("DNSCONFIGURER_TESTBIN is not set (see test/testbin/build.sh)")
	}
	for _, b := range []string{"agnhost", "coredns"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			t.Skipf("no %s in DNSCONFIGURER_TESTBIN: %v", b, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()

	start := time.Now()
	tars, err := standInImages(ctx, dir, binDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	again, err := standInImages(ctx, dir, binDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rebuilt in %v", time.Since(start).Round(time.Millisecond))
	for ref, p := range tars {
		if again[ref] != p {
			t.Errorf("%s: second call gave %s, first %s", ref, again[ref], p)
		}
	}

	want := map[string]struct {
		name            string
		entrypoint, cmd []string
	}{
		AgnhostImage:   {AgnhostImage, []string{"/agnhost"}, []string{"pause"}},
		DnsutilsImage:  {DnsutilsImage, nil, []string{"bash"}},
		BusyboxImage:   {BusyboxImage, nil, []string{"sh"}},
		PauseImage:     {PauseImage, []string{"/pause"}, nil},
		CoreDNSImage:   {CoreDNSImage, []string{"/coredns"}, nil},
		NodeCacheImage: {NodeCacheImage, nil, []string{"sh"}},
	}
	if len(tars) != len(want)+len(prevReleaseImages) {
		t.Errorf("got %d images, want %d and %d under the oldest release's names", len(tars), len(want), len(prevReleaseImages))
	}
	roots := map[string]string{}
	layers := map[string]string{}
	for ref, w := range want {
		p, ok := tars[ref]
		if !ok {
			t.Errorf("no image %s", ref)
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		roots[ref] = t.TempDir()
		img := imgUnpack(t, data, roots[ref])
		t.Logf("%-52s %4d MB tarball, %4d MB unpacked", ref, len(data)>>20, img.layerSize>>20)
		layers[ref] = img.layerDigest
		if img.name != w.name {
			t.Errorf("%s: named %q, want %q", ref, img.name, w.name)
		}
		if fmt.Sprint(img.entrypoint) != fmt.Sprint(w.entrypoint) || fmt.Sprint(img.cmd) != fmt.Sprint(w.cmd) {
			t.Errorf("%s: entrypoint %q cmd %q, want %q %q", ref, img.entrypoint, img.cmd, w.entrypoint, w.cmd)
		}
	}
	if layers[DnsutilsImage] != layers[BusyboxImage] {
		t.Errorf("the tools images have different layers: %v", layers)
	}
	// The oldest release's names carry the same layer under their own name.
	for old, cur := range prevReleaseImages {
		p, ok := tars[old]
		if !ok {
			t.Errorf("no image %s (the oldest release's name for %s)", old, cur)
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		img := imgUnpack(t, data, t.TempDir())
		if img.name != imgNormalizeRef(old) {
			t.Errorf("%s: named %q, want %q", old, img.name, imgNormalizeRef(old))
		}
		if img.layerDigest != layers[cur] {
			t.Errorf("%s: layer %s, want %s's %s", old, img.layerDigest, cur, layers[cur])
		}
	}

	for _, tc := range []struct{ ref, cmd, want string }{
		{AgnhostImage, "/agnhost --help >/tmp/out 2>&1; grep -c -m1 netexec /tmp/out", "1\n"},
		{AgnhostImage, "/agnhost-2 --help >/tmp/out 2>&1; grep -c -m1 netexec /tmp/out", "1\n"},
		{AgnhostImage, "/coredns -version | grep -c CoreDNS", "1\n"},
		{AgnhostImage, "dig -v 2>&1 | cut -d' ' -f1", "DiG\n"},
		{AgnhostImage, "id -u user-defined-in-image; test -d /uploads && echo uploads", "1000\nuploads\n"},
		{DnsutilsImage, "dig -v 2>&1 | cut -d' ' -f1", "DiG\n"},
		{NodeCacheImage, "/coredns -version | grep -c CoreDNS", "1\n"},
	} {
		out, err := imgChroot(roots[tc.ref], tc.cmd)
		if err != nil {
			t.Errorf("%s: %s: %v\n%s", tc.ref, tc.cmd, err, out)
			continue
		}
		if out != tc.want {
			t.Errorf("%s: %s: got %q, want %q", tc.ref, tc.cmd, out, tc.want)
		}
	}

	// The pause image holds its binary and /etc, no shell.
	imgCheckFiles(t, roots[PauseImage], "/pause", "/etc/passwd", "/etc/group")
}

// TestProductImage builds ProductImage as the cluster imports it (the
// image hack/build-image builds) and runs its binary in a chroot as the
// image's user.
func TestProductImage(t *testing.T) {
	imgNeedRoot(t)
	if testing.Short() {
		t.Skip("builds dnsconfigurer: skipped in -short mode")
	}
	if _, err := os.Stat(imagebuild.DefaultCACerts); err != nil {
		t.Skipf("no CA bundle to build the image with (apt-get install ca-certificates): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	p, err := productImage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	img := imgUnpack(t, data, root)
	t.Logf("%s: %.1f MiB tarball, %.1f MiB unpacked, built in %v", ProductImage, float64(len(data))/(1<<20),
		float64(img.layerSize)/(1<<20), time.Since(start).Round(100*time.Millisecond))
	if img.name != "docker.io/library/dnsconfigurer:latest" {
		t.Errorf("named %q, want docker.io/library/dnsconfigurer:latest", img.name)
	}
	if fmt.Sprint(img.entrypoint) != fmt.Sprint([]string{imagebuild.BinaryPath}) || img.cmd != nil || img.user != "65532:65532" {
		t.Errorf("entrypoint %q cmd %q user %q, want [%s] [] 65532:65532", img.entrypoint, img.cmd, img.user, imagebuild.BinaryPath)
	}
	imgCheckFiles(t, root, imagebuild.BinaryPath, "/etc/passwd", "/etc/group", "/etc/ssl/certs/ca-certificates.crt")
	cmd := exec.Command("chroot", "--userspec=65532:65532", root, imagebuild.BinaryPath, "help")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "usage: dnsconfigurer") {
		t.Errorf("%s help: %v\n%s", imagebuild.BinaryPath, err, out)
	}
	if out, err := exec.Command("chroot", root, "/bin/sh", "-c", "true").CombinedOutput(); err == nil {
		t.Errorf("the product image has a shell:\n%s", out)
	}
}

// imgCheckFiles checks that the unpacked image at root holds exactly
// the files want (besides directories).
func imgCheckFiles(t *testing.T, root string, want ...string) {
	t.Helper()
	var got []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			got = append(got, strings.TrimPrefix(p, root))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != strings.Join(slices.Sorted(slices.Values(want)), " ") {
		t.Errorf("%s holds %v, want %v", root, got, want)
	}
}

func imgNeedRoot(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("stand-in images are linux/amd64")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for chroot")
	}
	if _, err := exec.LookPath("chroot"); err != nil {
		t.Skip("no chroot command")
	}
}

// imgChroot runs cmd with the image's /bin/sh chrooted into root and
// returns its standard output (and standard error on failure).
func imgChroot(root, cmd string) (string, error) {
	c := exec.Command("chroot", root, "/bin/sh", "-c", cmd)
	c.Env = append([]string{"HOME=/root"}, imgEnv...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// imgDNSServer serves A 192.0.2.53 for every name on 127.0.0.1, over UDP
// and TCP on the same port, and returns the port.
func imgDNSServer(t *testing.T) string {
	t.Helper()
	up := testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, m *dns.Msg) {
		m.Authoritative = true
		if q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, testkit.A(q.Name, 30, "192.0.2.53"))
		}
	}))
	_, port, _ := net.SplitHostPort(up.Addr)
	return port
}

// chrootCase is a shell command run in an unpacked image and its output.
type chrootCase struct{ cmd, want string }

// imgChrootCases runs each case's command in root with imgChroot.
func imgChrootCases(t *testing.T, root string, cases []chrootCase) {
	t.Helper()
	for _, tc := range cases {
		out, err := imgChroot(root, tc.cmd)
		if err != nil {
			t.Errorf("%s: %v\n%s", tc.cmd, err, out)
			continue
		}
		if out != tc.want {
			t.Errorf("%s: got %q, want %q", tc.cmd, out, tc.want)
		}
	}
}

// imgShell is the image tarball of files named ref, with sh as its
// command.
func imgShell(t *testing.T, ref string, files []containerd.ImageFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := containerd.WriteImage(&buf, containerd.Image{Ref: ref, Files: files, Cmd: []string{"sh"}}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// imgUnpacked is what imgUnpack read from an image tarball.
type imgUnpacked struct {
	name            string // io.containerd.image.name
	entrypoint, cmd []string
	user            string
	layerDigest     string
	layerSize       int64 // uncompressed
	blobSize        int64 // compressed
}

// imgUnpack reads an OCI image tarball (written by containerd.WriteImage,
// or internal/imagebuild for one platform) and extracts its only layer
// into root.
func imgUnpack(t *testing.T, tarball []byte, root string) imgUnpacked {
	t.Helper()
	blobs := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			blobs[hdr.Name] = b
		}
	}
	blob := func(digest string, v any) []byte {
		b, ok := blobs["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		if !ok {
			t.Fatalf("no blob %s", digest)
		}
		if v != nil {
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	type desc struct {
		Digest      string
		Annotations map[string]string
	}
	var index struct{ Manifests []desc }
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests", err, len(index.Manifests))
	}
	var manifest struct {
		MediaType string
		Manifests []desc // an image index (internal/imagebuild's) of one platform
		Config    desc
		Layers    []desc
	}
	blob(index.Manifests[0].Digest, &manifest)
	if manifest.MediaType == "application/vnd.oci.image.index.v1+json" {
		if len(manifest.Manifests) != 1 {
			t.Fatalf("image index of %d images, want the host's only", len(manifest.Manifests))
		}
		blob(manifest.Manifests[0].Digest, &manifest)
	}
	var config struct {
		Config struct {
			Entrypoint, Cmd []string
			User            string
		}
	}
	blob(manifest.Config.Digest, &config)
	if len(manifest.Layers) != 1 {
		t.Fatalf("%d layers", len(manifest.Layers))
	}
	layer := blob(manifest.Layers[0].Digest, nil)
	u := imgUnpacked{
		name:        index.Manifests[0].Annotations["io.containerd.image.name"],
		entrypoint:  config.Config.Entrypoint,
		cmd:         config.Config.Cmd,
		user:        config.Config.User,
		layerDigest: manifest.Layers[0].Digest,
		blobSize:    int64(len(layer)),
	}
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	tr = tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.Clean("/"+hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, os.FileMode(hdr.Mode).Perm())
			if err == nil {
				err = os.Chmod(p, imgTarMode(hdr.Mode))
			}
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, p)
		case tar.TypeLink:
			// As containerd unpacks one: link, then chmod to the
			// header's mode (a mode of 0 would lock the file).
			err = os.Link(filepath.Join(root, filepath.Clean("/"+hdr.Linkname)), p)
			if err == nil {
				err = os.Chmod(p, os.FileMode(hdr.Mode).Perm())
			}
		case tar.TypeReg:
			var f *os.File
			f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(hdr.Mode).Perm())
			if err == nil {
				var n int64
				n, err = io.Copy(f, tr)
				u.layerSize += n
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		default:
			err = fmt.Errorf("unexpected type %q", hdr.Typeflag)
		}
		if err != nil {
			t.Fatalf("unpack %s: %v", hdr.Name, err)
		}
	}
	return u
}

func imgTarMode(m int64) os.FileMode {
	mode := os.FileMode(m).Perm()
	if m&0o1000 != 0 {
		mode |= os.ModeSticky
	}
	return mode
}
