package cri

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// FuzzRewrite feeds arbitrary RunPodSandboxRequest bytes to the rewrite:
// it must never panic (the recover would count it, so this checks the
// counter), and whatever it forwards keeps the request's identity.
//
//	go test -run '^$' -fuzz FuzzRewrite -fuzztime 30s ./pkg/cri/
func FuzzRewrite(f *testing.F) {
	seeds := []*runtimeapi.PodSandboxConfig{
		nil,
		{},
		{Metadata: &runtimeapi.PodSandboxMetadata{Name: "a", Uid: "u"}},
		{Metadata: &runtimeapi.PodSandboxMetadata{Name: "a", Uid: "u"}, DnsConfig: &runtimeapi.DNSConfig{}},
		sandboxConfig("web", "team", "u", false, &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
			Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5", "ndots:", ":", ""}}),
		sandboxConfig("Web_!", "", "u", true, &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "x", ""},
			Searches: []string{strings.Repeat("a", 300), ""}, Options: []string{"ndots"}}),
	}
	seeds[5].Annotations = map[string]string{"dnsconfigurer.io/dns-policy": "ClusterFirstWithAutopath"}
	seeds[5].Hostname = strings.Repeat("h", 70)
	for _, s := range seeds {
		b, err := proto.Marshal(&runtimeapi.RunPodSandboxRequest{Config: s})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	eng, err := newServerForTest("/run/fuzz.sock", WithLogger(slog.New(slog.DiscardHandler)), WithFailurePolicy(FailClosed))
	if err != nil {
		f.Fatal(err)
	}
	defer eng.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		req := new(runtimeapi.RunPodSandboxRequest)
		if err := proto.Unmarshal(data, req); err != nil {
			return
		}
		orig := proto.Clone(req).(*runtimeapi.RunPodSandboxRequest)
		fwd, _, err := eng.rewrite(context.Background(), req)
		if n := testutil.ToFloat64(eng.m.rewriteErrors.WithLabelValues("panic")); n != 0 {
			t.Fatalf("rewrite panicked on %v", orig)
		}
		if err != nil {
			return
		}
		if !proto.Equal(fwd.GetConfig().GetMetadata(), orig.GetConfig().GetMetadata()) || fwd.GetRuntimeHandler() != orig.GetRuntimeHandler() {
			t.Fatalf("rewrite changed the identity: %v -> %v", orig, fwd)
		}
	})
}
