package cri

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// BenchmarkShim measures each call against the fake runtime directly and
// through the shim; the difference is what the shim adds. p50-µs is the
// median of the per-call times.
//
//	go test -run '^$' -bench Shim -benchtime 2000x ./pkg/cri/
func BenchmarkShim(b *testing.B) {
	e := newEnv(b, nil)
	e.rt.containers = 200
	ctx := context.Background()
	kubelet := sandboxConfig("web", "team", "uid-1", false, &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
		Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, Options: []string{"ndots:5"}})
	autopath := sandboxConfig("web", "team", "uid-1", false, kubelet.DnsConfig)
	autopath.Annotations = map[string]string{"dnsconfigurer.io/dns-policy": "ClusterFirstWithAutopath"}
	calls := []struct {
		name string
		do   func(runtimeapi.RuntimeServiceClient) error
	}{
		{"Version", func(c runtimeapi.RuntimeServiceClient) error {
			_, err := c.Version(ctx, &runtimeapi.VersionRequest{})
			return err
		}},
		{"ListContainers200", func(c runtimeapi.RuntimeServiceClient) error {
			_, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		}},
		{"RunPodSandbox", func(c runtimeapi.RuntimeServiceClient) error {
			_, err := c.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: kubelet})
			return err
		}},
		{"RunPodSandboxAutopath", func(c runtimeapi.RuntimeServiceClient) error {
			_, err := c.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: autopath})
			return err
		}},
	}
	for _, call := range calls {
		for _, via := range []struct {
			name string
			c    runtimeapi.RuntimeServiceClient
		}{{"direct", e.direct}, {"shim", e.runtime}} {
			b.Run(call.name+"/"+via.name, func(b *testing.B) {
				if err := call.do(via.c); err != nil { // warm the connection
					b.Fatal(err)
				}
				samples := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					begin := time.Now()
					if err := call.do(via.c); err != nil {
						b.Fatal(err)
					}
					samples = append(samples, time.Since(begin))
				}
				b.StopTimer()
				e.rt.mu.Lock()
				e.rt.sandboxes = nil
				e.rt.mu.Unlock()
				slices.Sort(samples)
				b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds())/1e3, "p50-µs")
			})
		}
	}
}

// BenchmarkRewrite is the shim's own work on a RunPodSandbox request
// (sandbox source, autopath rewrite), without any I/O.
func BenchmarkRewrite(b *testing.B) {
	s, err := newServerForTest("/run/bench.sock", WithLogger(testkit.Logger(b)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cfg := sandboxConfig("web", "team", "uid-1", false, &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
		Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5"}})
	cfg.Annotations = map[string]string{"dnsconfigurer.io/dns-policy": "ClusterFirstWithAutopath"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req := &runtimeapi.RunPodSandboxRequest{Config: proto.Clone(cfg).(*runtimeapi.PodSandboxConfig)}
		if _, _, err := s.rewrite(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
