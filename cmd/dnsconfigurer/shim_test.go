package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
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
	cfg, _, err := shimCommand.parse([]string{"--config", file, "--limits", "trim", "--failure-policy", "closed"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits != "trim" || cfg.FailurePolicy != "closed" || cfg.Domain() != "corp.local" || cfg.Listen != "/run/a.sock" ||
		len(cfg.ClusterDNS) != 1 || cfg.RuntimeEndpoint != "unix:///run/containerd/containerd.sock" {
		t.Errorf("config with flags = %+v", cfg)
	}

	example, _, err := shimCommand.parse([]string{"--config", "../../deploy/shim/shim.yaml"}, io.Discard)
	if err != nil || example.Listen != "/run/dnsconfigurer/cri.sock" || *example.ResolvConf != "auto" {
		t.Errorf("deploy/shim/shim.yaml = %+v, %v", example, err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\nfailurePolicy: maybe\n"), 0o644)
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: ShimConfiguration\nlimit: trim\n"), 0o644)
	kind := filepath.Join(dir, "kind.yaml")
	os.WriteFile(kind, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: WebhookConfiguration\n"), 0o644)
	wantRefused(t, "shimCommand", func(args []string) error { _, _, err := shimCommand.parse(args, io.Discard); return err }, []refusedArgs{
		{[]string{"--config", bad}, "failurePolicy"},
		{[]string{"--config", unknown}, `unknown field "limit"`},
		{[]string{"--config", kind}, "kind"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, "--config"},
		{[]string{"--limits", "cut"}, "--limits (limits)"},
		{[]string{"--cluster-dns", "10.96.0.10,nope"}, "--cluster-dns (clusterDNS[1])"},
		{[]string{"--listen", "relative.sock"}, "--listen (listen)"},
		{[]string{"--runtime-endpoint", "tcp://1.2.3.4:5"}, "--runtime-endpoint"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	})
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
	args := []string{"shim", "--listen", shimSock, "--runtime-endpoint", "unix://" + rtSock, "--resolv-conf", resolv,
		"--cluster-dns", "10.96.0.10", "--node-local-dns", "169.254.20.10", "--metrics-listen", metricsAddr, "--log-level", "error"}
	shim := goRun(ctx, args...)

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
	testkit.WaitFor(t, 10*time.Second, func() error {
		select {
		case <-shim.exited:
			t.Fatalf("shim exited %d: %s", shim.code, shim.log.String())
		default:
		}
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		defer ccancel()
		if _, err := client.RunPodSandbox(cctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
			return fmt.Errorf("RunPodSandbox through the shim: %w\n%s", err, shim.log.String())
		}
		return nil
	})
	rt.mu.Lock()
	got := rt.got[len(rt.got)-1].DnsConfig
	rt.mu.Unlock()
	if want := "169.254.20.10|search.team.cluster.local.ap.k8s.io|ndots:5"; strings.Join(got.Servers, " ")+"|"+strings.Join(got.Searches, " ")+"|"+strings.Join(got.Options, " ") != want {
		t.Errorf("runtime got %v, want %s", got, want)
	}

	page := scrape(t, metricsAddr)
	if page[`dnsconfigurer_cri_sandboxes_total{outcome="rewritten",source="sandbox"}`] != 1 {
		t.Errorf("/metrics lacks the rewrite: %v", page)
	}
	wantBuildInfo(t, "shim", page)

	// A second shim on the same socket fails clearly.
	var stderr2 bytes.Buffer
	if c := shimCommand.main(ctx, []string{"--listen", shimSock, "--runtime-endpoint", rtSock, "--resolv-conf", resolv}, nil, io.Discard, &stderr2); c != exitFail ||
		!strings.Contains(stderr2.String(), "in use by a live process") {
		t.Errorf("second shim: exit %d, %s", c, stderr2.String())
	}

	cancel()
	if code := shim.wait(t, 10*time.Second); code != exitOK {
		t.Fatalf("shim exit %d: %s", code, shim.log.String())
	}
	if _, err := os.Stat(shimSock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}
