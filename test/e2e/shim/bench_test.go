package shim_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// BenchmarkShimOverhead measures, in one run against one containerd, each
// call made directly, through the shim binary, and (for the pass-through
// calls) through a bare relay process that only copies bytes, alternating
// them so that drift hits all alike, and reports the medians and what the
// shim adds: Version, ListContainers with 200 containers known, and
// RunPodSandbox (with an autopath rewrite, no API server lookup). The bare
// relay is the floor for any proxy: what one more process on the path
// costs on this machine, before the shim does anything.
//
//	go test -run '^$' -bench ShimOverhead -benchtime 1x ./test/e2e/shim/
func BenchmarkShimOverhead(b *testing.B) {
	h := containerd.Start(b, containerd.Options{HostResolvConf: testkit.HostResolvConf})
	s := startShim(b, h, "--log-level", "warn")
	direct, shim := h.Client(), h.Dial(s.Socket)
	bare := h.Dial(startBareRelay(b, h))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// 200 containers in 10 sandboxes (created, not started: ListContainers
	// lists them all the same).
	for p := range 10 {
		pod, err := direct.RunPod(ctx, containerd.PodSpec{Name: fmt.Sprintf("bench-%d", p), Hostname: fmt.Sprintf("bench-%d", p)})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 20 {
			if _, err := direct.CreateContainer(ctx, pod, fmt.Sprintf("c%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	list, err := direct.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(list.Containers) != 200 {
		b.Fatalf("ListContainers = %d, %v", len(list.GetContainers()), err)
	}

	dns := &runtimeapi.DNSConfig{Servers: []string{testkit.ClusterDNS},
		Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local", "host.test", "corp.test"}, Options: []string{"ndots:5"}}
	n := 0
	runPod := func(c *containerd.Client) (time.Duration, error) {
		n++
		cfg := c.SandboxConfig(containerd.PodSpec{Name: fmt.Sprintf("run-%d", n), Namespace: "team", Hostname: fmt.Sprintf("run-%d", n), DNS: dns,
			Annotations: map[string]string{"dnsconfigurer.io/dns-policy": autopath}})
		begin := time.Now()
		pod, err := c.RunPodConfig(ctx, cfg)
		d := time.Since(begin)
		if err != nil {
			return 0, err
		}
		return d, direct.RemovePod(ctx, pod.ID)
	}
	timed := func(f func(*containerd.Client) error) func(*containerd.Client) (time.Duration, error) {
		return func(c *containerd.Client) (time.Duration, error) {
			begin := time.Now()
			err := f(c)
			return time.Since(begin), err
		}
	}
	calls := []struct {
		name    string
		samples int
		floor   bool // also measured through the bare relay
		do      func(*containerd.Client) (time.Duration, error)
	}{
		{"Version", 2000, true, timed(func(c *containerd.Client) error {
			_, err := c.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
			return err
		})},
		{"ListContainers200", 500, true, timed(func(c *containerd.Client) error {
			_, err := c.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		})},
		{"RunPodSandbox", 60, false, runPod},
	}
	for b.Loop() {
		for _, call := range calls {
			vias := []*containerd.Client{direct, shim}
			if call.floor {
				vias = append(vias, bare)
			}
			took := map[*containerd.Client][]time.Duration{}
			for range call.samples {
				for _, via := range vias {
					d, err := call.do(via)
					if err != nil {
						b.Fatalf("%s: %v", call.name, err)
					}
					took[via] = append(took[via], d)
				}
			}
			pd, ps := p50(took[direct]), p50(took[shim])
			added := ps - pd
			b.Logf("%-18s p50 direct %9v  via shim %9v  added %9v (%+.1f%%)  [%d samples each]", call.name,
				pd.Round(time.Microsecond), ps.Round(time.Microsecond), added.Round(time.Microsecond), 100*float64(added)/float64(pd), call.samples)
			if call.floor {
				pb := p50(took[bare])
				b.Logf("%-18s p50 via a bare byte-copying relay %9v  added %9v (%+.1f%%): the shim adds %v over that floor", call.name,
					pb.Round(time.Microsecond), (pb - pd).Round(time.Microsecond), 100*float64(pb-pd)/float64(pd), (ps - pb).Round(time.Microsecond))
				b.ReportMetric(100*float64(pb-pd)/float64(pd), call.name+"-bare-relay-added-%")
			}
			b.ReportMetric(float64(pd.Microseconds()), call.name+"-direct-p50-µs")
			b.ReportMetric(float64(ps.Microseconds()), call.name+"-shim-p50-µs")
			b.ReportMetric(100*float64(added)/float64(pd), call.name+"-added-%")
		}
		m := s.metrics(b)
		if fs, fc := m["dnsconfigurer_cri_rewrite_duration_seconds_sum"], m["dnsconfigurer_cri_rewrite_duration_seconds_count"]; fc > 0 {
			b.Logf("the shim's own work per RunPodSandbox (rewrite_duration_seconds mean): %v over %v sandboxes", time.Duration(fs/fc*1e9).Round(time.Microsecond), fc)
		}
	}
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// bareRelayEnv, set to LISTEN=TARGET, makes the test binary a bare relay.
const bareRelayEnv = "DNSCONFIGURER_BENCH_BARE_RELAY"

// startBareRelay runs this test binary as a bare relay in front of h's
// containerd and returns its socket.
func startBareRelay(t testing.TB, h *containerd.Harness) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "bare.sock")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), bareRelayEnv+"="+sock+"="+strings.TrimPrefix(h.Endpoint, "unix://"))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testkit.WaitFor(t, 10*time.Second, func() error {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return fmt.Errorf("bare relay: %v", err)
		}
		c.Close()
		return nil
	})
	return sock
}

// bareRelay accepts on listen and copies each connection's bytes to and
// from a connection of its own to target, with nothing else: the least
// work a proxy process can do.
func bareRelay(listen, target string) int {
	l, err := net.Listen("unix", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare relay:", err)
		return 1
	}
	for {
		down, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bare relay:", err)
			return 1
		}
		up, err := net.Dial("unix", target)
		if err != nil {
			down.Close()
			continue
		}
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.(*net.UnixConn).CloseWrite()
		}
		go pipe(up, down)
		go pipe(down, up)
	}
}
