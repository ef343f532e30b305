package shim_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

func TestMain(m *testing.M) {
	if listen, target, ok := strings.Cut(os.Getenv(bareRelayEnv), "="); ok {
		os.Exit(bareRelay(listen, target)) // this process is BenchmarkShimOverhead's bare relay
	}
	os.Exit(buildbin.Main(m))
}

// shimProc is a running `dnsconfigurer shim`.
type shimProc struct {
	*buildbin.Proc
	Socket  string
	Metrics string
}

// Kill kills the shim with SIGKILL, leaving its socket behind, and waits
// for it to exit.
func (s *shimProc) Kill() {
	_ = s.Cmd.Process.Kill()
	<-s.Exited()
}

func (s *shimProc) Log() string { return s.Output.String() }

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
	resolv := testkit.WriteHostResolvConf(t, dir)
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &shimProc{Socket: filepath.Join(dir, "shim.sock"), Metrics: ml.Addr().String()}
	ml.Close()
	args := append([]string{"shim", "--listen", s.Socket, "--runtime-endpoint", h.Endpoint, "--metrics-listen", s.Metrics}, testkit.NodeFlags(resolv)...)
	args = append(args, extra...)
	cmd := exec.Command(buildbin.Dnsconfigurer(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.Proc = buildbin.StartCommand(t, "shim", cmd, 10*time.Second)
	c, err := containerd.Dial(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testkit.WaitFor(t, 20*time.Second, func() error {
		if s.HasExited() {
			t.Fatalf("shim exited: %s", s.Log())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := c.Runtime.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
			return fmt.Errorf("shim not answering: %v\n%s", err, s.Log())
		}
		return nil
	})
	return s
}

// metrics reads the shim's /metrics.
func (s *shimProc) metrics(t testing.TB) testkit.Metrics {
	t.Helper()
	m, err := testkit.Scrape(nil, "http://"+s.Metrics+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// render runs `dnsconfigurer render` on pod on the standard node.
func render(t testing.TB, pod *corev1.Pod) buildbin.Rendered {
	t.Helper()
	return buildbin.Render(t, pod, testkit.NodeFlags(testkit.WriteHostResolvConf(t, t.TempDir()))...)
}
