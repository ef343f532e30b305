package shim_test

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
	"strings"
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

// The node every test uses: what kubelet's flags and the shim's say.
const (
	clusterDNS    = "10.96.0.10"
	clusterDomain = "cluster.local"
	nodeLocalDNS  = "169.254.20.10"
	hostResolv    = "nameserver 10.233.0.1\nnameserver 10.233.0.2\nsearch host.test corp.test\noptions timeout:2 attempts:3\n"
)

func TestMain(m *testing.M) {
	if listen, target, ok := strings.Cut(os.Getenv(bareRelayEnv), "="); ok {
		os.Exit(bareRelay(listen, target)) // this process is BenchmarkShimOverhead's bare relay
	}
	os.Exit(buildbin.Main(m))
}

// nodeArgs are the node flags shared by render and shim.
func nodeArgs(resolvConf string) []string {
	return []string{"--cluster-dns", clusterDNS, "--cluster-domain", clusterDomain, "--resolv-conf", resolvConf, "--node-local-dns", nodeLocalDNS}
}

// shimProc is a running `dnsconfigurer shim`.
type shimProc struct {
	Socket  string
	Metrics string
	cmd     *exec.Cmd
	exited  chan struct{}
	log     *bytes.Buffer
	mu      *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// Kill kills the shim with SIGKILL, leaving its socket behind, and waits
// for it to exit.
func (s *shimProc) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

func (s *shimProc) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// startShim runs the shim binary in front of h's containerd, with the
// node's resolver config in a file of its own, and waits until it answers.
func startShim(t testing.TB, h *containerd.Harness, extra ...string) *shimProc {
	t.Helper()
	dir, err := os.MkdirTemp("", "dnscfg-shim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return startShimIn(t, h, dir, extra...)
}

// startShimIn is startShim with the socket and resolver file in dir.
func startShimIn(t testing.TB, h *containerd.Harness, dir string, extra ...string) *shimProc {
	t.Helper()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolv), 0o644); err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &shimProc{Socket: filepath.Join(dir, "shim.sock"), Metrics: ml.Addr().String(), log: &bytes.Buffer{}, mu: &sync.Mutex{}}
	ml.Close()
	args := append([]string{"shim", "--listen", s.Socket, "--runtime-endpoint", h.Endpoint, "--metrics-listen", s.Metrics}, nodeArgs(resolv)...)
	args = append(args, extra...)
	s.cmd = exec.Command(buildbin.Dnsconfigurer(t), args...)
	s.cmd.Stdout, s.cmd.Stderr = lockedWriter{s.mu, s.log}, lockedWriter{s.mu, s.log}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func() { _ = s.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("shim log:\n%s", s.Log())
		}
	})
	c, err := containerd.Dial(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			return s
		}
		select {
		case <-exited:
			t.Fatalf("shim exited: %s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("shim not answering: %v\n%s", err, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric returns the value of one sample line of the shim's /metrics.
func (s *shimProc) metric(t testing.TB, series string) string {
	t.Helper()
	resp, err := http.Get("http://" + s.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// rendered is `dnsconfigurer render -o json`.
type rendered struct {
	Nameservers []string `json:"nameservers"`
	Searches    []string `json:"searches"`
	Options     []string `json:"options"`
	Hostname    string   `json:"hostname"`
	FQDN        string   `json:"fqdn"`
}

func (r rendered) dns() *runtimeapi.DNSConfig {
	return &runtimeapi.DNSConfig{Servers: r.Nameservers, Searches: r.Searches, Options: r.Options}
}

// render runs `dnsconfigurer render` on pod with the test node's settings.
func render(t testing.TB, pod *corev1.Pod) rendered {
	t.Helper()
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolv), 0o644); err != nil {
		t.Fatal(err)
	}
	p := pod.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	manifest, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildbin.Dnsconfigurer(t), append([]string{"render", "-f", "-", "-o", "json"}, nodeArgs(resolv)...)...)
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
