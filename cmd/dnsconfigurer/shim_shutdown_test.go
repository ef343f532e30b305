package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stalledRuntime accepts connections, sends an HTTP/2 server preface that
// opens large flow-control windows (so kubelet's calls flow towards it)
// and never reads.
type stalledRuntime struct {
	l     net.Listener
	mu    sync.Mutex
	conns []*net.UnixConn
}

func (r *stalledRuntime) serve() {
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		fr := http2.NewFramer(c, nil)
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
		fr.WriteWindowUpdate(0, 1<<30)
		r.mu.Lock()
		r.conns = append(r.conns, c.(*net.UnixConn))
		r.mu.Unlock()
	}
}

// unread is the number of bytes waiting unread on the runtime's sockets.
func (r *stalledRuntime) unread() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0
	for _, c := range r.conns {
		rc, err := c.SyscallConn()
		if err != nil {
			continue
		}
		rc.Control(func(fd uintptr) {
			if n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
				total += n
			}
		})
	}
	return total
}

func (r *stalledRuntime) close() {
	r.l.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

// TestShimSIGTERMStalledRuntime runs `dnsconfigurer shim` (this test
// binary re-executed into main) in front of a runtime that stops reading,
// with RunPodSandbox calls and PullImage calls (passed through) of 1 MiB
// each in flight, sends SIGTERM and checks that the process exits within
// 10 seconds. A RunPodSandbox request of 1 MiB is over the relay's
// MaxHeldRequest (1 MiB of message): it is refused, not held; what the
// client had sent of it within its window still goes on to the runtime,
// and those writes stall.
func TestShimSIGTERMStalledRuntime(t *testing.T) {
	runChild()
	dir := t.TempDir()
	rtSock, shimSock := filepath.Join(dir, "rt.sock"), filepath.Join(dir, "shim.sock")
	resolv := filepath.Join(dir, "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver 192.0.2.53\n"), 0o644)
	rl, err := net.Listen("unix", rtSock)
	if err != nil {
		t.Fatal(err)
	}
	rt := &stalledRuntime{l: rl}
	go rt.serve()
	defer rt.close()

	c := startChild(t, "TestShimSIGTERMStalledRuntime", "shim", "--listen", shimSock, "--runtime-endpoint", "unix://"+rtSock, "--resolv-conf", resolv,
		"--cluster-dns", "10.96.0.10", "--log-level", "info")
	stderr, exited := c.stderr, c.exited

	conn, err := grpc.NewClient("unix://"+shimSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	big := strings.Repeat("x", 1<<20)
	rtc, imc := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	var calls sync.WaitGroup
	defer calls.Wait()
	defer cancel()
	// RunPodSandbox first: the relay answers ResourceExhausted to each one
	// whose first DATA frame it reads, and relays the rest of its DATA to
	// the runtime; those writes stall the connection's client-to-runtime
	// direction, and the calls whose frames wait behind them are neither
	// refused nor held until shutdown (one or two are refused in practice).
	for i := range 4 {
		calls.Add(1)
		go func() {
			defer calls.Done()
			rtc.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
				Metadata:    &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("p%d", i), Namespace: "team", Uid: fmt.Sprintf("u%d", i)},
				Annotations: map[string]string{"big": big},
				DnsConfig:   &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}},
			}}, grpc.WaitForReady(true))
		}()
	}
	// Wait until the runtime holds 64 KiB it has not read: the relay is
	// blocked writing the refused request's DATA.
	c.waitUntil(t, 20*time.Second, func() error {
		if n := rt.unread(); n < 64<<10 {
			return fmt.Errorf("runtime got %d unread bytes, want 64 KiB", n)
		}
		return nil
	})
	// Then calls that pass through, whose frames the relay copies as read.
	for range 4 {
		calls.Add(1)
		go func() {
			defer calls.Done()
			imc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "x"},
				Auth: &runtimeapi.AuthConfig{Password: big}}, grpc.WaitForReady(true))
		}()
	}
	begin := time.Now()
	if err := syscall.Kill(c.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		took := time.Since(begin)
		t.Logf("shim exited %v after SIGTERM (runtime holding %d unread bytes): %v", took.Round(time.Millisecond), rt.unread(), c.waitErr)
		if c.waitErr != nil {
			t.Errorf("shim exit: %v\n%s", c.waitErr, stderr.String())
		}
		if took > 10*time.Second {
			t.Errorf("shim took %v to exit after SIGTERM, want at most 10s", took)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("shim still running 30s after SIGTERM\n%s", stderr.String())
	}
}
