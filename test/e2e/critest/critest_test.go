package critest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
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

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/cluster"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// CritestEnv names the critest binary (test/e2e/critest.sh prints it).
const CritestEnv = "DNSCONFIGURER_CRITEST"

// FocusEnv, when set, is passed to critest as -ginkgo.focus, to rerun a
// few specs while working on them; the skip list checks then only hold
// for the specs it selects.
const FocusEnv = "DNSCONFIGURER_CRITEST_FOCUS"

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// skipped are the specs that fail straight against the harness's
// containerd, each with why: a regular expression on the spec's text and,
// when it fails on some versions only, the containerd major versions it
// fails on. TestCritest's direct run runs them too and wants exactly
// these to fail; the runs through the shim and with the NRI plugin skip
// them.
var skipped = []struct {
	spec, why string
	majors    []int // nil: every version
}{
	{spec: `public image with digest should be pulled and removed`,
		why: "pulls gcr.io/k8s-staging-cri-tools/test-image-digest@sha256:9700f9a2…: an image under that exact digest cannot be made offline"},
	{spec: `Idempotence StopPodSandbox should not return an error if not found`, majors: []int{1},
		why: "containerd 1.6 answers StopPodSandbox of an unknown sandbox with NotFound (2.x answers OK, as the CRI asks: the 2.x run has no such entry)"},
	{spec: `Idempotence StopContainer should not return an error if not found`, majors: []int{1},
		why: "containerd 1.6 answers StopContainer of an unknown container with NotFound (2.x answers OK, as the CRI asks: the 2.x run has no such entry)"},
}

// racy are specs that race inside the runtime, not in what is tested: a
// run where one fails reruns it alone, up to twice, and only a spec that
// fails every time counts as failed. Each passes most runs.
var racy = []struct{ spec, why string }{
	{spec: `should terminate with exitCode 137 and reason OOMKilled`,
		why: "the container's exit and its OOM event race in containerd's CRI: the reason is Error when the exit is handled first " +
			"(containerd/containerd#8180 and #12260; containerd's own critest job skips the spec on systemd cgroups, #12819). " +
			"Seen on containerd 1.6 with cgroup v1 on a loaded 2-core machine, straight and through the shim alike."},
}

// racyRetries is how many times a failed racy spec is rerun alone.
const racyRetries = 2

// skips returns the skip list entries for containerd major version major.
func skips(major int) (specs []string) {
	for _, s := range skipped {
		if s.majors == nil || slices.Contains(s.majors, major) {
			specs = append(specs, s.spec)
		}
	}
	return specs
}

// TestCritest runs critest straight against containerd, through the shim,
// and with the NRI plugin (containerd 2.x). Straight, every spec runs and
// exactly the skip list fails; the other ways skip those and want every
// other spec to pass.
func TestCritest(t *testing.T) {
	bin := os.Getenv(CritestEnv)
	if bin == "" {
		t.Skipf("critest e2e: set $%s to a critest binary (test/e2e/critest.sh builds cri-tools v1.36.0's)", CritestEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("critest e2e: needs root (containerd, network namespaces)")
	}
	regDir := t.TempDir()
	h := containerd.Start(t, containerd.Options{RegistryConfigDir: regDir, SharedRoot: true, HostPorts: true})
	serveImages(t, h, regDir)
	skip := skips(h.ContainerdMajor)

	direct := runCritest(t, h, bin, h.Endpoint, nil)
	t.Logf("direct to containerd %s: %s", h.ContainerdVersion, direct)
	// Exactly the skip list fails straight to containerd.
	matched := make([]bool, len(skip))
	for _, f := range direct.Failed {
		known := false
		for i, re := range skip {
			if regexp.MustCompile(re).MatchString(specText(f)) {
				known, matched[i] = true, true
			}
		}
		if !known {
			t.Errorf("direct to containerd: %q failed and is not on the skip list", f)
		}
	}
	for i, re := range skip {
		if !matched[i] && os.Getenv(FocusEnv) == "" {
			t.Errorf("direct to containerd: skip list entry %q did not fail: take it off the list", re)
		}
	}
	if direct.Ran == 0 || direct.Passed+direct.FailedN != direct.Ran {
		t.Errorf("direct to containerd: %s", direct)
	}
	want := direct.Ran - direct.FailedN

	dir := t.TempDir()
	shim := startShim(t, h, dir)
	viaShim := runCritest(t, h, bin, "unix://"+shim.socket, skip)
	t.Logf("through the shim: %s", viaShim)
	if !viaShim.ok() || viaShim.Ran != want {
		t.Errorf("through the shim: %s (direct passed %d); failed:\n%s\nshim log:\n%s", viaShim, want, strings.Join(viaShim.Failed, "\n"), shim.tail())
	}

	if h.NRISocket == "" {
		t.Logf("NRI: containerd %s has no NRI socket (2.x only); not run", h.ContainerdVersion)
		return
	}
	startNRI(t, h, dir)
	viaNRI := runCritest(t, h, bin, h.Endpoint, skip)
	t.Logf("with the NRI plugin: %s", viaNRI)
	if !viaNRI.ok() || viaNRI.Ran != want {
		t.Errorf("with the NRI plugin: %s (direct passed %d); failed:\n%s", viaNRI, want, strings.Join(viaNRI.Failed, "\n"))
	}
}

// specText is a spec's text as -ginkgo.skip matches it: the [FAIL] line
// without the node markers ("[It] ", "[BeforeEach] ").
var nodeRE = regexp.MustCompile(`\[(It|BeforeEach|AfterEach|JustBeforeEach|BeforeAll|AfterAll)\] `)

func specText(fail string) string { return nodeRE.ReplaceAllString(fail, "") }

// result is what a critest run reports.
type result struct {
	Ran, Total, Passed, FailedN, Skipped int
	Failed                               []string
	Took                                 time.Duration
}

func (r result) ok() bool { return r.Ran > 0 && r.FailedN == 0 && r.Passed == r.Ran }

func (r result) String() string {
	return fmt.Sprintf("ran %d of %d specs: %d passed, %d failed, %d skip list entries skipped, in %s",
		r.Ran, r.Total, r.Passed, r.FailedN, r.Skipped, r.Took.Round(time.Second))
}

var (
	ranRE    = regexp.MustCompile(`(?m)^Ran (\d+) of (\d+) Specs`)
	passedRE = regexp.MustCompile(`(?m)(\d+) Passed \| (\d+) Failed`)
	failRE   = regexp.MustCompile(`(?m)^\s*\[FAIL\] (.*)$`)
)

// runCritest runs critest against endpoint as a process of the harness's
// node (NodeCommand: its web-server specs fetch pod IPs and host ports, its
// mount propagation specs mount on the node, its host-PID specs look at
// the node's processes), skipping the specs skip matches.
func runCritest(t *testing.T, h *containerd.Harness, bin, endpoint string, skip []string) result {
	t.Helper()
	return retryRacy(t, h, bin, endpoint, critestRun(t, h, bin, endpoint, skip, os.Getenv(FocusEnv)))
}

// runCritestFocus runs only the specs focus matches.
func runCritestFocus(t *testing.T, h *containerd.Harness, bin, endpoint, focus string) result {
	t.Helper()
	return critestRun(t, h, bin, endpoint, nil, focus)
}

func critestRun(t *testing.T, h *containerd.Harness, bin, endpoint string, skip []string, focus string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	args := []string{"-runtime-endpoint", endpoint, "-image-endpoint", endpoint,
		"-config", "/dev/null", "-ginkgo.no-color"}
	if len(skip) > 0 {
		args = append(args, "-ginkgo.skip", strings.Join(skip, "|"))
	}
	if focus != "" {
		args = append(args, "-ginkgo.focus", focus)
	}
	cmd := h.NodeCommand(ctx, bin, args...)
	cmd.Dir = t.TempDir() // critest writes nothing else, but keep it off the tree
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	begin := time.Now()
	err := cmd.Run()
	r := result{Took: time.Since(begin), Skipped: len(skip)}
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
	if r.FailedN > 0 || focus != "" {
		p := filepath.Join(os.TempDir(), fmt.Sprintf("critest-%d.log", time.Now().UnixNano()))
		_ = os.WriteFile(p, out.Bytes(), 0o644)
		t.Logf("critest output: %s", p)
	}
	return r
}

// retryRacy reruns, alone, each racy spec that failed in r, up to
// racyRetries times, and counts it passed when a rerun passes.
func retryRacy(t *testing.T, h *containerd.Harness, bin, endpoint string, r result) result {
	t.Helper()
	var failed []string
	for _, f := range r.Failed {
		re := racySpec(f)
		if re == "" {
			failed = append(failed, f)
			continue
		}
		passed := false
		for try := 1; try <= racyRetries && !passed; try++ {
			again := runCritestFocus(t, h, bin, endpoint, re)
			passed = again.Ran == 1 && again.ok()
			t.Logf("racy spec %q failed; rerun %d alone: %s", specText(f), try, again)
		}
		if !passed {
			failed = append(failed, f)
			continue
		}
		r.FailedN--
		r.Passed++
	}
	r.Failed = failed
	return r
}

// racySpec returns the racy entry whose spec matches the failure f, or "".
func racySpec(f string) string {
	for _, s := range racy {
		if regexp.MustCompile(s.spec).MatchString(specText(f)) {
			return s.spec
		}
	}
	return ""
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

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base, err := cluster.BusyboxRootfs(ctx, busyboxMissing...)
	if err != nil {
		t.Fatal(err)
	}
	nnp := buildNNP(ctx, t)
	push := func(ref string, files []containerd.ImageFile, cfg v1.Config) {
		t.Helper()
		if err := pushImage(pushTo+"/"+ref, files, cfg); err != nil {
			t.Fatalf("image %s: %v", ref, err)
		}
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	sh := v1.Config{Cmd: []string{"sh"}, Env: env}
	user := func(u string) v1.Config { c := sh; c.User = u; return c }
	// Each test-image-* is busybox plus a file of its own name, as
	// cri-tools' images/image-test builds them: different names are
	// different images, test-image-tags:1, 2 and 3 one image.
	named := func(name string) []containerd.ImageFile {
		return withFiles(base, containerd.ImageFile{Path: "/" + name, Mode: 0o644, Data: []byte(name + "\n")})
	}

	push("e2e-test-images/busybox:1.29-2", base, sh)
	for _, ref := range []string{"test-image-latest:latest", "test-image-tag:test", "test-image-tag:all",
		"test-image-1:latest", "test-image-2:latest", "test-image-3:latest"} {
		push("k8s-staging-cri-tools/"+ref, named(strings.Split(ref, ":")[0]), sh)
	}
	for _, tag := range []string{"1", "2", "3"} {
		push("k8s-staging-cri-tools/test-image-tags:"+tag, named("test-image-tags"), sh)
	}
	push("k8s-staging-cri-tools/test-image-user-uid:latest", base, user("1002"))
	push("k8s-staging-cri-tools/test-image-user-username:latest", base, user("www-data"))
	push("k8s-staging-cri-tools/test-image-user-uid-group:latest", base, user("1003:1004"))
	push("k8s-staging-cri-tools/test-image-user-username-group:latest", base, user("www-data:1004"))
	push("k8s-staging-cri-tools/test-image-predefined-group:latest", withFiles(base, predefinedGroup...), user("1000"))

	nginx := func(port string) v1.Config {
		return v1.Config{Entrypoint: []string{"/usr/sbin/nginx"}, Cmd: []string{"-g", "daemon off;"},
			Env: append(slices.Clone(env), "NGINX_PORT="+port), StopSignal: "SIGQUIT"}
	}
	web := withFiles(base, nginxFiles...)
	push("e2e-test-images/nginx:1.14-2", web, nginx("80"))
	push("k8s-staging-cri-tools/hostnet-nginx-"+runtime.GOARCH+":latest", web, nginx("12003"))
	push("e2e-test-images/httpd:2.4.39-4", withFiles(base, httpdFiles...),
		v1.Config{Cmd: []string{"httpd-foreground"}, Env: env, StopSignal: "SIGWINCH"})
	push("e2e-test-images/nonewprivs:1.3", withFiles(base, containerd.ImageFile{Path: "/usr/local/bin/nnp", Mode: fs.ModeSetuid | 0o755, Data: nnp}),
		v1.Config{Cmd: []string{"/usr/local/bin/nnp"}, Env: env})
	push("pause:3.9", base, v1.Config{Cmd: []string{"sleep", "infinity"}, Env: env})
}

// busyboxMissing are the commands critest runs that Debian's busybox has
// no applet for; BusyboxRootfs copies the host's.
var busyboxMissing = []string{"ipcs", "pgrep"}

// predefinedGroup is what cri-tools' images/image-predefined-group adds to
// busybox: default-user (1000) in group-defined-in-image (50000).
var predefinedGroup = []containerd.ImageFile{
	{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
		"www-data:x:33:33:www-data:/var/www:/bin/false\n" +
		"nobody:x:65534:65534:nobody:/home:/bin/false\n" +
		"default-user:x:1000:1000:Linux User,,,:/home/default-user:/bin/sh\n")},
	{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nwww-data:x:33:\nnogroup:x:65534:\n" +
		"default-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n")},
	{Path: "/home/default-user", Mode: fs.ModeDir | 0o755},
}

// nginxFiles make busybox the nginx image's stand-in: /usr/sbin/nginx
// gives itself nginx's process title ("nginx: master process", which the
// PID namespace specs look for in /proc/1/cmdline), writes its PID to
// /var/run/nginx.pid as nginx does, and serves nginx's welcome page on
// $NGINX_PORT with busybox httpd until SIGQUIT or SIGTERM.
var nginxFiles = []containerd.ImageFile{
	{Path: "/usr/sbin/nginx", Mode: 0o755, Data: []byte(`#!/bin/sh
[ "$1" = "nginx: master process" ] || exec "$0" "nginx: master process" "$@"
echo $$ >/var/run/nginx.pid
httpd -f -p "${NGINX_PORT:-80}" -h /usr/share/nginx/html &
trap 'kill $!; rm -f /var/run/nginx.pid; exit 0' QUIT TERM INT
wait $!
`)},
	{Path: "/usr/share/nginx/html/index.html", Mode: 0o644, Data: []byte("<title>Welcome to nginx!</title>\n")},
	{Path: "/var/run", Mode: fs.ModeDir | 0o755},
}

// httpdFiles make busybox the httpd image's stand-in: httpd-foreground
// logs a line naming httpd (the multi-container specs look for it) and
// serves "It works!" on port 80 with busybox httpd.
var httpdFiles = []containerd.ImageFile{
	{Path: "/usr/local/bin/httpd-foreground", Mode: 0o755, Data: []byte(`#!/bin/sh
echo "httpd: serving /usr/local/apache2/htdocs on port 80" >&2
exec httpd -f -p 80 -h /usr/local/apache2/htdocs
`)},
	{Path: "/usr/local/apache2/htdocs/index.html", Mode: 0o644, Data: []byte("<html><body><h1>It works!</h1></body></html>\n")},
}

// nnpSource is Kubernetes' nonewprivs test program (the nonewprivs image
// runs it set-user-ID root): it prints the effective user ID it got.
const nnpSource = `package main

import (
	"fmt"
	"os"
)

func main() { fmt.Printf("Effective uid: %d\n", os.Geteuid()) }
`

// buildNNP builds nnpSource as a static binary.
func buildNNP(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"go.mod": "module nnp\n\ngo 1.21\n", "main.go": nnpSource} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", "nnp", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build nnp: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "nnp"))
	if err != nil {
		t.Fatal(err)
	}
	return data
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
	log    testkit.Buffer
}

func (p *proc) tail() string { return tail(p.log.String(), 4000) }

// start runs dnsconfigurer with args until the test ends.
func (p *proc) start(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(buildbin.Dnsconfigurer(t), args...)
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { buildbin.Terminate(cmd.Process, exited, 10*time.Second) })
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
	// The shim has no readiness signal on its socket: poll a Version call.
	testkit.WaitFor(t, 20*time.Second, func() error {
		c, err := containerd.Dial(p.socket)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = c.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
			cancel()
			c.Close()
		}
		if err != nil {
			return fmt.Errorf("shim not serving: %v\n%s", err, p.tail())
		}
		return nil
	})
	return p
}

// startNRI attaches the NRI plugin to h's containerd and waits until
// /readyz says it registered.
func startNRI(t *testing.T, h *containerd.Harness, dir string) *proc {
	t.Helper()
	metrics := testkit.FreeAddr(t, "127.0.0.1")
	p := &proc{}
	p.start(t, append([]string{"nri", "--socket", h.NRISocket, "--state-dir", filepath.Join(dir, "nri-state"), "--metrics-listen", metrics}, nodeArgs(t, dir)...)...)
	testkit.WaitFor(t, 20*time.Second, func() error {
		if err := testkit.GetOK(nil, "http://"+metrics+"/readyz"); err != nil {
			return fmt.Errorf("NRI plugin not ready: %v\n%s", err, p.tail())
		}
		return nil
	})
	return p
}
