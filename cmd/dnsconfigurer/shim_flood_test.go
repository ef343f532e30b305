package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// floodMaxHWM is the hardening target: the shim's peak RSS stays at or
// under 150 MiB under either flood.
const floodMaxHWM = 150 << 20

// Bounds of each flood, whichever comes first: a shim that is still
// reading after that has failed the test.
const (
	floodMaxBytes = 400 << 20
	floodMaxTime  = 20 * time.Second
)

// TestShimFlood runs `dnsconfigurer shim` (this test binary re-executed
// into main, as TestShimSIGTERMStalledRuntime does) in front of a runtime
// that never reads, floods it, and checks that the shim refuses the flood
// and that its peak RSS (VmHWM) stays at or under 150 MiB. Each flood has
// a process of its own, so that each peak is its own.
func TestShimFlood(t *testing.T) {
	runChild()
	if runtime.GOOS != "linux" {
		t.Skip("reads the shim's peak RSS from /proc/<pid>/status")
	}
	t.Run("continuation/empty", func(t *testing.T) { floodContinuation(t, 0) })
	t.Run("continuation/16KiB", func(t *testing.T) { floodContinuation(t, 16<<10) })
	t.Run("held-requests", floodHeldRequests)
}

// floodShim is a shim process in front of a stalledRuntime.
type floodShim struct {
	pid      int
	sock     string
	baseline int64 // VmHWM once the shim accepts connections, in bytes
}

// startFloodShim starts the shim as a child process in front of a
// stalledRuntime (or, draining, a runtime that reads and discards) and
// waits until its socket accepts connections. Cleanup kills it and, if
// the test failed, logs its stderr.
func startFloodShim(t *testing.T, draining bool) *floodShim {
	t.Helper()
	dir := t.TempDir()
	rtSock, shimSock := filepath.Join(dir, "rt.sock"), filepath.Join(dir, "shim.sock")
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rl, err := net.Listen("unix", rtSock)
	if err != nil {
		t.Fatal(err)
	}
	if draining {
		go serveDrainingRuntime(rl)
		t.Cleanup(func() { rl.Close() })
	} else {
		rt := &stalledRuntime{l: rl}
		go rt.serve()
		t.Cleanup(rt.close)
	}

	c := startChild(t, "TestShimFlood", "shim", "--listen", shimSock, "--runtime-endpoint", "unix://"+rtSock, "--resolv-conf", resolv,
		"--cluster-dns", "10.96.0.10", "--log-level", "info")
	c.waitUntil(t, 20*time.Second, func() error {
		conn, err := net.Dial("unix", shimSock)
		if err != nil {
			return fmt.Errorf("shim not listening on %s: %w", shimSock, err)
		}
		conn.Close()
		return nil
	})
	s := &floodShim{pid: c.pid, sock: shimSock}
	s.baseline = s.hwm(t)
	return s
}

// serveDrainingRuntime accepts connections on l, opens large flow-control
// windows as stalledRuntime does, then reads and discards everything and
// answers nothing: a runtime that keeps up, as containerd does with the
// frames of a stream that was reset, but never completes a call.
func serveDrainingRuntime(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		fr := http2.NewFramer(c, nil)
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
		fr.WriteWindowUpdate(0, 1<<30)
		go io.Copy(io.Discard, c) // returns when the shim closes c
	}
}

// hwm returns the shim's peak resident set size (VmHWM) in bytes.
func (s *floodShim) hwm(t *testing.T) int64 {
	t.Helper()
	return procHWM(t, s.pid)
}

// checkHWM logs the shim's baseline and peak RSS and checks the peak
// against floodMaxHWM.
func (s *floodShim) checkHWM(t *testing.T, flood string) {
	t.Helper()
	peak := s.hwm(t)
	t.Logf("shim RSS: baseline %.1f MiB, peak under %s %.1f MiB (VmHWM; target at most %d MiB)",
		mib(s.baseline), flood, mib(peak), floodMaxHWM>>20)
	if peak > floodMaxHWM {
		t.Errorf("shim peak RSS under %s = %.1f MiB, want at most %d MiB", flood, mib(peak), floodMaxHWM>>20)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// floodHeldRequests makes 8 concurrent RunPodSandbox calls of 15 MiB each
// on one connection: the relay holds RunPodSandbox requests, and must
// refuse these (ResourceExhausted) rather than hold 120 MiB.
func floodHeldRequests(t *testing.T) {
	// The runtime reads: the relay sends on the rest of a refused
	// request, so a runtime that never reads would stall the connection
	// behind the first refusal until the relay's write timeout (30s).
	s := startFloodShim(t, true)
	conn, err := grpc.NewClient("unix://"+s.sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(32<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), floodMaxTime)
	defer cancel()
	const calls, size = 8, 15 << 20
	big := strings.Repeat("x", size) // shared: strings are immutable
	begin := time.Now()
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
				Metadata:    &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("p%d", i), Namespace: "team", Uid: fmt.Sprintf("u%d", i)},
				Annotations: map[string]string{"big": big},
				DnsConfig:   &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}},
			}}, grpc.WaitForReady(true))
		}()
	}
	wg.Wait()
	took := time.Since(begin)
	for i, err := range errs {
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("call %d of %d MiB: %v, want ResourceExhausted", i, size>>20, err)
		}
	}
	t.Logf("%d RunPodSandbox calls of %d MiB answered in %v: %v", calls, size>>20, took.Round(time.Millisecond), status.Convert(errs[0]).Message())
	s.checkHWM(t, fmt.Sprintf("%d held requests of %d MiB", calls, size>>20))
}
