package shim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

var metricsAddr = regexp.MustCompile(`msg="serving metrics" listen=(\S+)`)

// shimCommand is the built `dnsconfigurer shim` in front of a fakeRuntime.
type shimCommand struct {
	client  runtimeapi.RuntimeServiceClient // on the shim's socket
	runtime *fakeRuntime
	logs    *testkit.Buffer
	cmd     *exec.Cmd
	exited  chan error
	stopped bool
}

// startShimCommand builds and runs `dnsconfigurer shim --kubeconfig
// kubeconfig --node-name node` in front of a fresh fakeRuntime and waits
// until it is Ready: runtime connected and the pod informer synced, which
// needs list and watch on pods. It is killed when the test ends, and its
// log is printed if the test failed.
func startShimCommand(t *testing.T, kubeconfig string) *shimCommand {
	t.Helper()
	bin := buildbin.Dnsconfigurer(t)
	dir := socketDir(t)
	rt, rtPath := startRuntime(t, dir)
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "shim.sock")

	s := &shimCommand{runtime: rt, logs: &testkit.Buffer{}, exited: make(chan error, 1)}
	s.cmd = exec.Command(bin, "shim",
		"--listen", sock, "--runtime-endpoint", "unix://"+rtPath,
		"--kubeconfig", kubeconfig, "--node-name", node,
		"--cluster-dns", strings.Join(testNode.ClusterDNS, ","), "--cluster-domain", testNode.ClusterDomain,
		"--node-local-dns", strings.Join(testNode.NodeLocalDNS, ","), "--resolv-conf", resolv,
		"--limits", "trim", "--pod-lookup-timeout", waitBound.String(),
		"--metrics-listen", "127.0.0.1:0", "--log-level", "debug")
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start shim: %v", err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		if !s.stopped {
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("shim log:\n%s", s.logs.String())
		}
	})

	var addr string
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	testkit.WaitFor(t, waitBound, func() error {
		select {
		case err := <-s.exited:
			s.stopped = true
			t.Fatalf("shim exited: %v", err)
		default:
		}
		if addr == "" {
			m := metricsAddr.FindStringSubmatch(s.logs.String())
			if m == nil {
				return errors.New("shim not ready: no metrics address logged")
			}
			addr = m[1]
		}
		resp, err := hc.Get("http://" + addr + "/readyz")
		if err != nil {
			return fmt.Errorf("shim not ready: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("shim not ready: %s /readyz %d", addr, resp.StatusCode)
		}
		return nil
	})
	s.client = dialShim(t, sock)
	return s
}

// stop sends SIGTERM and waits for a clean exit, then checks that the log
// has no forbidden request and no error.
func (s *shimCommand) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case err := <-s.exited:
		s.stopped = true
		if err != nil {
			t.Errorf("shim exit after SIGTERM: %v", err)
		}
	case <-time.After(waitBound):
		t.Fatalf("shim still running %v after SIGTERM", waitBound)
	}
	out := s.logs.String()
	for _, bad := range []string{"forbidden", "Forbidden", "level=ERROR"} {
		if strings.Contains(out, bad) {
			t.Errorf("shim log has %q", bad)
		}
	}
}

// TestShimCommand runs the built `dnsconfigurer shim` with a kubeconfig for
// the ServiceAccount of deploy/shim/rbac.yaml, bound to exactly its
// ClusterRole, in front of a fake runtime: the informer syncs (list, watch),
// a pod is found by UID, and trimmed configs post Events that are counted
// again on a retry (create, patch). Nothing is forbidden along the way.
func TestShimCommand(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	ns := cp.Namespace(t)
	checkGoroutines(t)
	admin := newClient(t, cp.Config())
	r := apiserver.LoadRBAC(t, rbacFile)
	r.Apply(t, admin)
	saCfg, err := cp.ServiceAccountConfig(context.Background(), r.Account.Namespace, r.Account.Name)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := apiserver.WriteKubeconfig(kubeconfig, saCfg); err != nil {
		t.Fatal(err)
	}
	s := startShimCommand(t, kubeconfig)
	checkShimCommand(t, s, admin, ns)
	s.stop(t)
}

// checkShimCommand: a pod in ns is found by UID, and a trimmed config
// posts Events that are counted again on a retry (create, patch).
func checkShimCommand(t *testing.T, s *shimCommand, admin kubernetes.Interface, ns string) {
	t.Helper()
	eng := newEngine(t)

	// Found by UID.
	pod := createPod(t, admin, ns, apiPods(ns)[0].pod)
	req := kubeletSandbox(t, eng, pod)
	want, other := apiAndSandbox(t, eng, pod, req)
	if got := sandboxGot(t, s.client, s.runtime, req, pod.Name); got != want {
		t.Errorf("runtime got %s\nwant (API pod) %s\nsandbox config alone gives %s", got, want, other)
	}

	// Events, created and then patched.
	big := createPod(t, admin, ns, overLimitPod("big"))
	req = kubeletSandbox(t, eng, big)
	for attempt := range 2 {
		req.Config.Metadata.Attempt = uint32(attempt)
		if err := runSandbox(s.client, req); err != nil {
			t.Fatalf("RunPodSandbox, attempt %d: %v", attempt, err)
		}
		checkTrimEvents(t, admin, big, int32(attempt+1), waitBound)
	}
}
