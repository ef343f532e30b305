package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

func TestShimFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shim.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\n"+
		"clusterDNS: [10.96.0.10]\nclusterDomain: corp.local\nlimits: reject\nlisten: /run/a.sock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseShimFlags([]string{"--config", file, "--limits", "trim", "--failure-policy", "closed"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits != "trim" || cfg.FailurePolicy != "closed" || cfg.Domain() != "corp.local" || cfg.Listen != "/run/a.sock" ||
		len(cfg.ClusterDNS) != 1 || cfg.RuntimeEndpoint != "unix:///run/containerd/containerd.sock" {
		t.Errorf("config with flags = %+v", cfg)
	}

	example, _, err := parseShimFlags([]string{"--config", "../../deploy/shim/shim.yaml"}, io.Discard)
	if err != nil || example.Listen != "/run/dnsconfigurer/cri.sock" || *example.ResolvConf != "auto" {
		t.Errorf("deploy/shim/shim.yaml = %+v, %v", example, err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\nfailurePolicy: maybe\n"), 0o644)
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\nlimit: trim\n"), 0o644)
	kind := filepath.Join(dir, "kind.yaml")
	os.WriteFile(kind, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: WebhookConfiguration\n"), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--config", bad}, "failurePolicy"},
		{[]string{"--config", unknown}, `unknown field "limit"`},
		{[]string{"--config", kind}, "kind"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, "--config"},
		{[]string{"--limits", "cut"}, "--limits (limits)"},
		{[]string{"--cluster-dns", "10.96.0.10,nope"}, "--cluster-dns (clusterDNS[1])"},
		{[]string{"--listen", "relative.sock"}, "--listen (listen)"},
		{[]string{"--runtime-endpoint", "tcp://1.2.3.4:5"}, "--runtime-endpoint"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		_, _, err := parseShimFlags(tt.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseShimFlags(%q) = %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}

// sandboxRuntime is a runtime for the command test that records sandboxes.
type sandboxRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu  sync.Mutex
	got []*runtimeapi.PodSandboxConfig
}

func (r *sandboxRuntime) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, req.Config)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: "s1"}, nil
}

func TestShimRun(t *testing.T) {
	dir := t.TempDir()
	rtSock, shimSock := filepath.Join(dir, "rt.sock"), filepath.Join(dir, "shim.sock")
	resolv := filepath.Join(dir, "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch corp.example\n"), 0o644)
	rl, err := net.Listen("unix", rtSock)
	if err != nil {
		t.Fatal(err)
	}
	rt := &sandboxRuntime{}
	gs := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(gs, rt)
	go gs.Serve(rl)
	defer gs.Stop()
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ml.Addr().String()
	ml.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	args := []string{"--listen", shimSock, "--runtime-endpoint", "unix://" + rtSock, "--resolv-conf", resolv,
		"--cluster-dns", "10.96.0.10", "--node-local-dns", "169.254.20.10", "--metrics-listen", metricsAddr, "--log-level", "error"}
	go func() { code <- runShim(ctx, args, nil, io.Discard, &stderr) }()

	conn, err := grpc.NewClient("unix://"+shimSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "team", Uid: "u1"},
		Hostname:    "web",
		Annotations: map[string]string{"dnsconfigurer.io/dns-policy": "ClusterFirstWithAutopath"},
		DnsConfig: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
			Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, Options: []string{"ndots:5"}},
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		_, err := client.RunPodSandbox(cctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		ccancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("RunPodSandbox through the shim: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	rt.mu.Lock()
	got := rt.got[len(rt.got)-1].DnsConfig
	rt.mu.Unlock()
	if want := "169.254.20.10|search.team.cluster.local.ap.k8s.io|ndots:5"; strings.Join(got.Servers, " ")+"|"+strings.Join(got.Searches, " ")+"|"+strings.Join(got.Options, " ") != want {
		t.Errorf("runtime got %v, want %s", got, want)
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`dnsconfigurer_cri_sandboxes_total{outcome="rewritten",source="sandbox"} 1`)) {
		t.Errorf("/metrics lacks the rewrite:\n%s", body)
	}
	wantBuildInfo(t, "shim", string(body))

	// A second shim on the same socket fails clearly.
	var stderr2 bytes.Buffer
	if c := runShim(ctx, []string{"--listen", shimSock, "--runtime-endpoint", rtSock, "--resolv-conf", resolv}, nil, io.Discard, &stderr2); c != exitFail ||
		!strings.Contains(stderr2.String(), "in use by a live process") {
		t.Errorf("second shim: exit %d, %s", c, stderr2.String())
	}

	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("shim exit %d: %s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("shim did not stop")
	}
	if _, err := os.Stat(shimSock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

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
	if args := os.Getenv("DNSCONFIGURER_SHIM_CHILD"); args != "" {
		os.Args = append([]string{"dnsconfigurer", "shim"}, strings.Split(args, "\n")...)
		main() // exits
	}
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

	args := []string{"--listen", shimSock, "--runtime-endpoint", "unix://" + rtSock, "--resolv-conf", resolv,
		"--cluster-dns", "10.96.0.10", "--log-level", "info"}
	cmd := exec.Command(os.Args[0], "-test.run=^TestShimSIGTERMStalledRuntime$")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KUBERNETES_SERVICE_HOST=") }),
		"DNSCONFIGURER_SHIM_CHILD="+strings.Join(args, "\n"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when the shim has exited, with waitErr set
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill() // fails if it has exited
		<-exited
	}()

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
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for rt.unread() < 64<<10 {
		select {
		case <-exited:
			t.Fatalf("shim exited early: %v\n%s", waitErr, stderr.String())
		case <-deadline:
			t.Fatalf("runtime got %d unread bytes, want 64 KiB", rt.unread())
		case <-tick.C:
		}
	}
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
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		took := time.Since(begin)
		t.Logf("shim exited %v after SIGTERM (runtime holding %d unread bytes): %v", took.Round(time.Millisecond), rt.unread(), waitErr)
		if waitErr != nil {
			t.Errorf("shim exit: %v\n%s", waitErr, stderr.String())
		}
		if took > 10*time.Second {
			t.Errorf("shim took %v to exit after SIGTERM, want at most 10s", took)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("shim still running 30s after SIGTERM\n%s", stderr.String())
	}
}

func TestBoundShutdown(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	stuck := make(chan struct{})
	defer close(stuck)
	got := make(chan error, 1)
	go func() { got <- boundShutdown(ctx, 50*time.Millisecond, log, func() error { <-stuck; return nil }) }()
	select {
	case err := <-got:
		t.Fatalf("returned %v before ctx was done", err)
	default:
	}
	cancel()
	if err := <-got; err == nil || !strings.Contains(err.Error(), "did not complete within 50ms") {
		t.Errorf("stuck component: %v", err)
	}
	// A component that stops returns its own result.
	if err := boundShutdown(context.Background(), time.Hour, log, func() error { return io.EOF }); err != io.EOF {
		t.Errorf("boundShutdown = %v, want io.EOF", err)
	}
}
