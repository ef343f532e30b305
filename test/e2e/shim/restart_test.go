package shim_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestShimRestart kills the shim (SIGKILL, socket left behind) under a
// connected client, as kubelet is: calls fail with Unavailable at once,
// a new shim replaces the stale socket, and the same client carries on,
// with containers started before the restart still there.
func TestShimRestart(t *testing.T) {
	h := containerd.Start(t, containerd.Options{HostResolvConf: testkit.HostResolvConf})
	dir := t.TempDir()
	s := startShimIn(t, h, dir)
	c := h.Dial(s.Socket)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod, err := c.RunPod(ctx, containerd.PodSpec{Name: "survivor", Hostname: "survivor", DNS: &runtimeapi.DNSConfig{Servers: []string{"10.233.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartContainer(ctx, pod, "main"); err != nil {
		t.Fatal(err)
	}

	t.Logf("harness up after %v", h.Started.Round(time.Millisecond))
	s.Kill()
	if _, err := os.Stat(s.Socket); err != nil {
		t.Fatalf("SIGKILL left no socket: %v", err)
	}
	for range 3 {
		begin := time.Now()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Runtime.Version(cctx, &runtimeapi.VersionRequest{})
		ccancel()
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("Version with the shim down = %v, want Unavailable", err)
		}
		if d := time.Since(begin); d > 3*time.Second {
			t.Errorf("Version with the shim down took %v", d)
		}
	}

	restarted := time.Now()
	s2 := startShimIn(t, h, dir)
	if s2.Socket != s.Socket {
		t.Fatalf("socket moved: %s", s2.Socket)
	}
	var list *runtimeapi.ListContainersResponse
	testkit.WaitFor(t, 30*time.Second, func() error {
		var err error
		list, err = c.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: pod.ID}})
		if err != nil {
			return fmt.Errorf("client did not reconnect: %v", err)
		}
		return nil
	})
	if len(list.Containers) != 1 {
		t.Errorf("containers after the restart = %v", list.Containers)
	}
	t.Logf("the client was back %v after the new shim started", time.Since(restarted).Round(time.Millisecond))
	if err := c.RemovePod(ctx, pod.ID); err != nil {
		t.Fatal(err)
	}
}
