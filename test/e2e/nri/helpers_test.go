package nri_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// The node every test uses: what kubelet's flags and the plugin's say (the
// same as test/e2e/shim's).
const (
	clusterDNS    = "10.96.0.10"
	clusterDomain = "cluster.local"
	nodeLocalDNS  = "169.254.20.10"
	hostResolv    = "nameserver 10.233.0.1\nnameserver 10.233.0.2\nsearch host.test corp.test\noptions timeout:2 attempts:3\n"
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

// nodeArgs are the node flags shared by render and nri.
func nodeArgs(resolvConf string) []string {
	return []string{"--cluster-dns", clusterDNS, "--cluster-domain", clusterDomain, "--resolv-conf", resolvConf, "--node-local-dns", nodeLocalDNS}
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
	mu       sync.Mutex
	log      bytes.Buffer
}

func (p *pluginProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

func (p *pluginProc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

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
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolv), 0o644); err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pluginProc{StateDir: filepath.Join(dir, "state"), Metrics: ml.Addr().String(), up: up}
	ml.Close()
	args := append([]string{"nri", "--socket", h.NRISocket, "--state-dir", p.StateDir, "--metrics-listen", p.Metrics, "--log-level", "debug"}, nodeArgs(resolv)...)
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
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, cmd := make(chan struct{}), p.cmd
	p.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for !p.up(p) {
		select {
		case <-p.exited:
			t.Fatalf("plugin exited: %s", p.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin not registered after 20s:\n%s", p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 10s); it does
// nothing when the plugin is not running.
func (p *pluginProc) stop(t testing.TB) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("plugin still running 10s after SIGTERM; killing it")
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

// connected reports dnsconfigurer_nri_connected 1 on /metrics: registered
// with the runtime, whatever the other readiness checks say.
func (p *pluginProc) connected() bool {
	resp, err := http.Get("http://" + p.Metrics + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return err == nil && bytes.Contains(b, []byte("\ndnsconfigurer_nri_connected 1\n"))
}

// ready reports /readyz OK: the plugin is registered with the runtime.
func (p *pluginProc) ready() bool {
	resp, err := http.Get("http://" + p.Metrics + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// rendered is `dnsconfigurer render -o json`.
type rendered struct {
	Nameservers []string `json:"nameservers"`
	Searches    []string `json:"searches"`
	Options     []string `json:"options"`
	Hostname    string   `json:"hostname"`
}

func (r rendered) dns() *runtimeapi.DNSConfig {
	return &runtimeapi.DNSConfig{Servers: r.Nameservers, Searches: r.Searches, Options: r.Options}
}

// render runs `dnsconfigurer render` on pod with the test node's settings
// (test/e2e/shim's approach: the command users run is the oracle).
func render(t testing.TB, pod *corev1.Pod) rendered {
	t.Helper()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolv), 0o644); err != nil {
		t.Fatal(err)
	}
	p := pod.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	manifest, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), buildbin.Dnsconfigurer(t), append([]string{"render", "-f", "-", "-o", "json"}, nodeArgs(resolv)...)...)
	cmd.Stdin = bytes.NewReader(manifest)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render %s: %v\n%s", pod.Name, err, stderr.String())
	}
	var r rendered
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r
}
