package critest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/cluster"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// CritestEnv names the critest binary (test/e2e/critest.sh prints it).
const CritestEnv = "DNSCONFIGURER_CRITEST"

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// skipped are the specs that fail straight against the harness's
// containerd offline, each with why; TestCritest's direct run shows they
// do. Each is a regular expression on the spec's full text.
var skipped = []struct{ spec, why string }{
	{`should support pull image with digest`, "pulls gcr.io/k8s-staging-cri-tools/test-image-digest@sha256:9700f9a2…: an image with that exact digest cannot be made offline"},
}

// TestCritest runs critest straight against containerd, through the shim,
// and with the NRI plugin (containerd 2.x), and wants every spec that is
// not skipped to pass each way.
func TestCritest(t *testing.T) {
	bin := os.Getenv(CritestEnv)
	if bin == "" {
		t.Skipf("critest e2e: set $%s to a critest binary (test/e2e/critest.sh builds cri-tools v1.36.0's)", CritestEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("critest e2e: needs root (containerd, network namespaces)")
	}
	regDir := t.TempDir()
	h := containerd.Start(t, containerd.Options{RegistryConfigDir: regDir})
	serveImages(t, h, regDir)

	direct := runCritest(t, h, bin, h.Endpoint)
	t.Logf("direct to containerd %s: %s", h.ContainerdVersion, direct)
	want := direct.Ran
	if !direct.ok() {
		t.Errorf("direct to containerd: %s; failed:\n%s", direct, strings.Join(direct.Failed, "\n"))
	}

	dir := t.TempDir()
	shim := startShim(t, h, dir)
	viaShim := runCritest(t, h, bin, "unix://"+shim.socket)
	t.Logf("through the shim: %s", viaShim)
	if !viaShim.ok() || viaShim.Ran != want {
		t.Errorf("through the shim: %s (direct ran %d); failed:\n%s\nshim log:\n%s", viaShim, want, strings.Join(viaShim.Failed, "\n"), shim.tail())
	}

	if h.NRISocket == "" {
		t.Logf("NRI: containerd %s has no NRI socket (2.x only); not run", h.ContainerdVersion)
		return
	}
	startNRI(t, h, dir)
	viaNRI := runCritest(t, h, bin, h.Endpoint)
	t.Logf("with the NRI plugin: %s", viaNRI)
	if !viaNRI.ok() || viaNRI.Ran != want {
		t.Errorf("with the NRI plugin: %s (direct ran %d); failed:\n%s", viaNRI, want, strings.Join(viaNRI.Failed, "\n"))
	}
}

// result is what a critest run reports.
type result struct {
	Ran, Total, Passed, FailedN int
	Failed                      []string
	Took                        time.Duration
}

func (r result) ok() bool { return r.Ran > 0 && r.FailedN == 0 && r.Passed == r.Ran }

func (r result) String() string {
	return fmt.Sprintf("ran %d of %d specs: %d passed, %d failed, %d skipped, in %s",
		r.Ran, r.Total, r.Passed, r.FailedN, len(skipped), r.Took.Round(time.Second))
}

var (
	ranRE    = regexp.MustCompile(`(?m)^Ran (\d+) of (\d+) Specs`)
	passedRE = regexp.MustCompile(`(?m)(\d+) Passed \| (\d+) Failed`)
	failRE   = regexp.MustCompile(`(?m)^\s*\[FAIL\] (.*)$`)
)

// runCritest runs critest in h's network namespace (its web-server specs
// fetch pod IPs; its registry is there) against endpoint.
func runCritest(t *testing.T, h *containerd.Harness, bin, endpoint string) result {
	t.Helper()
	skip := make([]string, len(skipped))
	for i, s := range skipped {
		skip[i] = s.spec
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	args := []string{"-runtime-endpoint", endpoint, "-image-endpoint", endpoint,
		"-config", "/dev/null", "-ginkgo.no-color", "-ginkgo.skip", strings.Join(skip, "|")}
	cmd := h.Command(ctx, bin, args...)
	cmd.Dir = t.TempDir() // critest writes nothing else, but keep it off the tree
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	begin := time.Now()
	err := cmd.Run()
	r := result{Took: time.Since(begin)}
	text := out.String()
	m := ranRE.FindStringSubmatch(text)
	p := passedRE.FindStringSubmatch(text)
	if m == nil || p == nil {
		t.Fatalf("critest %s: no summary (%v):\n%s", strings.Join(args, " "), err, tail(text, 8000))
	}
	r.Ran, _ = strconv.Atoi(m[1])
	r.Total, _ = strconv.Atoi(m[2])
	r.Passed, _ = strconv.Atoi(p[1])
	r.FailedN, _ = strconv.Atoi(p[2])
	for _, f := range failRE.FindAllStringSubmatch(text, -1) {
		r.Failed = append(r.Failed, f[1])
	}
	if (err != nil) != (r.FailedN > 0) {
		t.Errorf("critest exit %v with %d failed", err, r.FailedN)
	}
	if r.FailedN > 0 {
		p := filepath.Join(os.TempDir(), fmt.Sprintf("critest-%d.log", time.Now().UnixNano()))
		_ = os.WriteFile(p, out.Bytes(), 0o644)
		t.Logf("critest output: %s", p)
	}
	return r
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// mirrored are the registries critest pulls from; h's containerd pulls
// them from the stand-in registry instead (hosts.toml mirrors).
var mirrored = []string{"registry.k8s.io", "gcr.io", "k8s.gcr.io"}

// serveImages builds critest's images, serves them from an in-memory
// registry on 127.0.0.1 in h's network namespace, and makes it the mirror
// (plain HTTP) of every registry critest names, in regDir.
func serveImages(t *testing.T, h *containerd.Harness, regDir string) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var l net.Listener
	if err := h.Do(func() (err error) { l, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: reg, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	mirror := l.Addr().String()
	for _, host := range mirrored {
		if err := os.MkdirAll(filepath.Join(regDir, host), 0o755); err != nil {
			t.Fatal(err)
		}
		toml := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "https://"+host, "http://"+mirror)
		if err := os.WriteFile(filepath.Join(regDir, host, "hosts.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The same registry on the test's own loopback, to push to.
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(pl) }()
	pushTo := pl.Addr().String()

	tools, err := cluster.ToolsRootfs()
	if err != nil {
		t.Fatal(err)
	}
	base := withFiles(tools, busyboxExtras...)
	push := func(ref string, files []containerd.ImageFile, cfg v1.Config) {
		t.Helper()
		if err := pushImage(pushTo+"/"+ref, files, cfg); err != nil {
			t.Fatalf("image %s: %v", ref, err)
		}
	}
	sh := v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	user := func(u string) v1.Config { c := sh; c.User = u; return c }
	push("e2e-test-images/busybox:1.29-2", base, sh)
	web := sh
	web.Cmd = []string{"/usr/local/bin/webserver", "80"}
	push("e2e-test-images/nginx:1.14-2", base, web)
	hostWeb := sh
	hostWeb.Cmd = []string{"/usr/local/bin/webserver", "12003"}
	push("k8s-staging-cri-tools/hostnet-nginx-amd64:latest", base, hostWeb)
	for _, ref := range []string{"test-image-latest:latest", "test-image-tag:test", "test-image-tag:all",
		"test-image-tags:1", "test-image-tags:2", "test-image-tags:3"} {
		push("k8s-staging-cri-tools/"+ref, base, sh)
	}
	for i := 1; i <= 3; i++ { // different images under different names
		push(fmt.Sprintf("k8s-staging-cri-tools/test-image-%d:latest", i),
			withFiles(base, containerd.ImageFile{Path: "/image", Mode: 0o644, Data: []byte(strconv.Itoa(i))}), sh)
	}
	push("k8s-staging-cri-tools/test-image-user-uid:latest", base, user("1002"))
	push("k8s-staging-cri-tools/test-image-user-username:latest", base, user("www-data"))
	push("k8s-staging-cri-tools/test-image-user-uid-group:latest", base, user("1003:1004"))
	push("k8s-staging-cri-tools/test-image-user-username-group:latest", base, user("www-data:1004"))
	push("k8s-staging-cri-tools/test-image-predefined-group:latest", base, user("1000"))
	push("pause:3.9", base, v1.Config{Cmd: []string{"/usr/local/bin/top"}})
}

// busyboxExtras make the tools root filesystem busybox enough for
// critest: `top` (the containers' default command) runs until SIGTERM,
// `webserver PORT` answers HTTP with nc (nginx's stand-in), and the users
// and groups of cri-tools' images/ exist (www-data 33; default-user 1000 in
// group-defined-in-image 50000).
var busyboxExtras = []containerd.ImageFile{
	{Path: "/usr/local/bin/top", Mode: 0o755, Data: []byte("#!/bin/sh\ntrap 'exit 0' TERM INT\nwhile :; do sleep 1 & wait $!; done\n")},
	{Path: "/usr/local/bin/webserver", Mode: 0o755, Data: []byte("#!/bin/sh\ntrap 'exit 0' TERM INT\n" +
		"while :; do printf 'HTTP/1.1 200 OK\\r\\nContent-Type: text/html\\r\\nContent-Length: 20\\r\\nConnection: close\\r\\n\\r\\nWelcome to nginx!\\n\\n\\n' | nc -N -l \"$1\" >/dev/null & wait $!; done\n")},
	{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
		"www-data:x:33:33:www-data:/var/www:/bin/sh\n" +
		"default-user:x:1000:1000::/home/default-user:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")},
	{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nwww-data:x:33:\ndefault-user:x:1000:\n" +
		"group-defined-in-image:x:50000:default-user\nnogroup:x:65534:\n")},
}

// withFiles returns files with extra replacing those of the same path.
func withFiles(files []containerd.ImageFile, extra ...containerd.ImageFile) []containerd.ImageFile {
	out := make([]containerd.ImageFile, 0, len(files)+len(extra))
	for _, f := range files {
		keep := true
		for _, e := range extra {
			keep = keep && e.Path != f.Path
		}
		if keep {
			out = append(out, f)
		}
	}
	return append(out, extra...)
}

// pushImage writes a single-layer linux/amd64 image to the registry
// at ref.
func pushImage(ref string, files []containerd.ImageFile, cfg v1.Config) error {
	layerData, err := containerd.LayerTar(files)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerData)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Config = "amd64", "linux", cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(r, img)
}

// proc is a running dnsconfigurer process.
type proc struct {
	socket string
	mu     sync.Mutex
	log    bytes.Buffer
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return tail(p.log.String(), 4000)
}

// start runs dnsconfigurer with args until the test ends.
func (p *proc) start(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(buildbin.Dnsconfigurer(t), args...)
	cmd.Stdout, cmd.Stderr = p, p
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
}

// node flags shared by the shim and the plugin: test/e2e/shim's node.
func nodeArgs(t *testing.T, dir string) []string {
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 10.233.0.1\nsearch host.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--cluster-dns", "10.96.0.10", "--cluster-domain", "cluster.local", "--resolv-conf", resolv}
}

// startShim runs the shim in front of h's containerd and waits until it
// relays a Version call.
func startShim(t *testing.T, h *containerd.Harness, dir string) *proc {
	t.Helper()
	p := &proc{socket: filepath.Join(dir, "shim.sock")}
	p.start(t, append([]string{"shim", "--listen", p.socket, "--runtime-endpoint", h.Endpoint}, nodeArgs(t, dir)...)...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := containerd.Dial(p.socket)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = c.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
			cancel()
			c.Close()
			if err == nil {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("shim not serving: %v\n%s", err, p.tail())
		}
		time.Sleep(50 * time.Millisecond) // poll: the shim has no readiness signal on its socket
	}
}

// startNRI attaches the NRI plugin to h's containerd and waits until
// /readyz says it registered.
func startNRI(t *testing.T, h *containerd.Harness, dir string) *proc {
	t.Helper()
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := ml.Addr().String()
	ml.Close()
	p := &proc{}
	p.start(t, append([]string{"nri", "--socket", h.NRISocket, "--state-dir", filepath.Join(dir, "nri-state"), "--metrics-listen", metrics}, nodeArgs(t, dir)...)...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("NRI plugin not ready: %v\n%s", err, p.tail())
		}
		time.Sleep(50 * time.Millisecond) // poll /readyz
	}
}
