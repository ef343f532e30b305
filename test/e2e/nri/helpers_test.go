package nri_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// requireNRI skips t unless containerd 2.x can be run: as root, with
// $DNSCONFIGURER_CONTAINERD_BIN naming its binaries.
func requireNRI(t testing.TB) {
	t.Helper()
	if os.Getenv(containerd.RuntimeEnv) == "" {
		t.Skipf("nri e2e: needs containerd 2.x with NRI; set $%s to its binaries (test/e2e/containerd2.sh builds them)", containerd.RuntimeEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("nri e2e: needs root (the NRI socket is root's; run as root after test/e2e/setup.sh)")
	}
}

// pluginProc is a running `dnsconfigurer nri`; stop and start run it
// again with the same flags, state dir and metrics address.
type pluginProc struct {
	StateDir string
	Metrics  string
	args     []string
	up       func(*pluginProc) bool // start waits for it
	cmd      *exec.Cmd
	exited   chan struct{}
	log      testkit.Buffer
}

func (p *pluginProc) Log() string { return p.log.String() }

// startPlugin runs the plugin binary on h's NRI socket with the node's
// resolver config in a file of its own, and waits until /readyz says it
// is registered.
func startPlugin(t testing.TB, h *containerd.Harness, extra ...string) *pluginProc {
	t.Helper()
	return startPluginUntil(t, h, (*pluginProc).ready, extra...)
}

// startPluginUntil is startPlugin waiting for up instead of /readyz.
func startPluginUntil(t testing.TB, h *containerd.Harness, up func(*pluginProc) bool, extra ...string) *pluginProc {
	t.Helper()
	if h.NRISocket == "" {
		t.Skipf("nri e2e: containerd %s has no NRI socket (needs 2.x)", h.ContainerdVersion)
	}
	dir := t.TempDir()
	resolv := testkit.WriteHostResolvConf(t, dir)
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pluginProc{StateDir: filepath.Join(dir, "state"), Metrics: ml.Addr().String(), up: up}
	ml.Close()
	args := append([]string{"nri", "--socket", h.NRISocket, "--state-dir", p.StateDir, "--metrics-listen", p.Metrics, "--log-level", "debug"}, testkit.NodeFlags(resolv)...)
	p.args = append(args, extra...)
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("plugin log:\n%s", p.Log())
		}
	})
	p.start(t)
	return p
}

// start runs the plugin and waits until p.up (/readyz: registered).
func (p *pluginProc) start(t testing.TB) {
	t.Helper()
	p.cmd = exec.Command(buildbin.Dnsconfigurer(t), p.args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, cmd := make(chan struct{}), p.cmd
	p.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	testkit.WaitFor(t, 20*time.Second, func() error {
		select {
		case <-p.exited:
			t.Fatalf("plugin exited: %s", p.Log())
		default:
		}
		if !p.up(p) {
			return fmt.Errorf("plugin not registered:\n%s", p.Log())
		}
		return nil
	})
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 10s); it does
// nothing when the plugin is not running.
func (p *pluginProc) stop(t testing.TB) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	if buildbin.Terminate(p.cmd.Process, p.exited, 10*time.Second) {
		t.Errorf("plugin still running 10s after SIGTERM; killed it")
	}
	p.cmd = nil
}

// connected reports dnsconfigurer_nri_connected 1 on /metrics: registered
// with the runtime, whatever the other readiness checks say.
func (p *pluginProc) connected() bool {
	m, err := testkit.Scrape(nil, "http://"+p.Metrics+"/metrics")
	return err == nil && m["dnsconfigurer_nri_connected"] == 1
}

// ready reports /readyz OK: the plugin is registered with the runtime.
func (p *pluginProc) ready() bool { return testkit.GetOK(nil, "http://"+p.Metrics+"/readyz") == nil }

// render runs `dnsconfigurer render` on pod on the standard node
// (test/e2e/shim's approach: the command users run is the oracle).
func render(t testing.TB, pod *corev1.Pod) buildbin.Rendered {
	t.Helper()
	return buildbin.Render(t, pod, testkit.NodeFlags(testkit.WriteHostResolvConf(t, t.TempDir()))...)
}

// adjusted is the file the plugin gives pod's containers: its header and
// the rendered config.
func adjusted(t testing.TB, pod *corev1.Pod) string {
	t.Helper()
	return nriplugin.Header(pod.Namespace, pod.Name) + containerd.ResolvConfFor(render(t, pod).DNSConfig())
}

// nriRun is the frame of a plugin test: containerd 2.x with the standard
// node's resolv.conf, its client, and a context bounded at 4 minutes.
type nriRun struct {
	h   *containerd.Harness
	c   *containerd.Client
	ctx context.Context
}

func startNRI(t *testing.T) *nriRun {
	t.Helper()
	requireNRI(t)
	h := containerd.Start(t, containerd.Options{HostResolvConf: testkit.HostResolvConf})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return &nriRun{h: h, c: h.Client(), ctx: ctx}
}

// runPod runs pod's sandbox, removed when t ends.
func (r *nriRun) runPod(t *testing.T, pod *corev1.Pod) *containerd.Pod {
	t.Helper()
	sb, err := r.c.RunPod(r.ctx, sandboxSpec(t, pod))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.c.RemovePod(context.Background(), sb.ID); err != nil {
			t.Error(err)
		}
	})
	return sb
}

// check fails t unless container id's /etc/resolv.conf is want.
func (r *nriRun) check(t *testing.T, what, id, want string) {
	t.Helper()
	got, err := r.c.ResolvConf(r.ctx, id)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Errorf("%s: /etc/resolv.conf =\n%s\nwant\n%s", what, got, want)
	}
}

// waitResolv waits until container id's /etc/resolv.conf is want.
func (r *nriRun) waitResolv(t *testing.T, what, id, want string) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, func() error {
		got, err := r.c.ResolvConf(r.ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got != want {
			return fmt.Errorf("%s: /etc/resolv.conf =\n%s\nwant\n%s", what, got, want)
		}
		return nil
	})
}
