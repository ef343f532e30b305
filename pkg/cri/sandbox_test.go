package cri

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func sandboxConfig(name, namespace, uid string, hostNet bool, dns *runtimeapi.DNSConfig) *runtimeapi.PodSandboxConfig {
	mode := runtimeapi.NamespaceMode_POD
	if hostNet {
		mode = runtimeapi.NamespaceMode_NODE
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		DnsConfig: dns,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: mode}}},
	}
}

func strp(s string) *string { return &s }

// sourceEnv is a shim whose pod facts come from source: lookup for
// sourceAPIServer, the sandbox alone for sourceSandbox.
func sourceEnv(t *testing.T, host HostConfig, source string, lookup fakeLookup) *env {
	t.Helper()
	if source == sourceAPIServer {
		return newEnv(t, host, WithPodLookup(lookup))
	}
	return newEnv(t, host)
}

// kubeletConfig is the sandbox config kubelet sends for pod: kubelet's DNS
// (the engine without the autopath annotation, which kubelet does not
// know) with its options in an order of its own (kubelet renders them from
// a map; reversed here), its hostname, and the pod's annotations.
func kubeletConfig(t *testing.T, eng *policy.Engine, host policy.Host, pod policy.Input) *runtimeapi.PodSandboxConfig {
	t.Helper()
	res := testkit.KubeletDNS(t, eng, host, pod)
	cfg := sandboxConfig(pod.Name, pod.Namespace, pod.UID, pod.HostNetwork,
		&runtimeapi.DNSConfig{Servers: res.Nameservers, Searches: res.Searches, Options: res.Options})
	cfg.Hostname = res.Hostname
	if pod.PolicyAnnotation != "" {
		cfg.Annotations = map[string]string{policy.AnnotationDNSPolicy: pod.PolicyAnnotation, "other": "x"}
	}
	return cfg
}

// TestSandboxOf: what the shim hands pkg/podfacts of a sandbox config.
func TestSandboxOf(t *testing.T) {
	dns := &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"team.svc.cluster.local"}, Options: []string{"ndots:5"}}
	withAll := sandboxConfig("web", "team", "u1", false, dns)
	withAll.Hostname = "web-0"
	withAll.Labels = map[string]string{"app": "web"}
	withAll.Annotations = map[string]string{policy.AnnotationDNSPolicy: "ClusterFirstWithAutopath", configSource: "file"}
	tests := []struct {
		name string
		cfg  *runtimeapi.PodSandboxConfig
		want podfacts.Sandbox
	}{
		{"everything", withAll, podfacts.Sandbox{Namespace: "team", Name: "web", UID: "u1", Hostname: "web-0",
			Labels: withAll.Labels, Annotations: withAll.Annotations,
			DNS: &policy.Output{Nameservers: dns.Servers, Searches: dns.Searches, Options: dns.Options}}},
		{"host network", sandboxConfig("agent", "kube-system", "u2", true, dns), podfacts.Sandbox{Namespace: "kube-system", Name: "agent", UID: "u2",
			HostNetwork: true, DNS: &policy.Output{Nameservers: dns.Servers, Searches: dns.Searches, Options: dns.Options}}},
		{"no dns_config", sandboxConfig("crictl", "default", "u3", false, nil), podfacts.Sandbox{Namespace: "default", Name: "crictl", UID: "u3"}},
		{"no config", nil, podfacts.Sandbox{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SandboxOf(tt.cfg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SandboxOf = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

var podCases = []struct {
	name string
	pod  policy.Input
}{
	{"cluster first", policy.Input{Policy: policy.ClusterFirst}},
	{"cluster first with dnsConfig", policy.Input{Policy: policy.ClusterFirst, DNSConfig: &policy.DNSConfig{
		Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example", "corp.example"},
		Options: []policy.Option{{Name: "ndots", Value: strp("2")}, {Name: "edns0"}}}}},
	{"autopath", policy.Input{Policy: policy.ClusterFirst, PolicyAnnotation: string(policy.ClusterFirstWithAutopath)}},
	{"autopath with dnsConfig", policy.Input{Policy: policy.ClusterFirst, PolicyAnnotation: string(policy.ClusterFirstWithAutopath),
		DNSConfig: &policy.DNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []policy.Option{{Name: "timeout", Value: strp("1")}}}}},
	{"default", policy.Input{Policy: policy.Default}},
	{"default with dnsConfig", policy.Input{Policy: policy.Default, DNSConfig: &policy.DNSConfig{Searches: []string{"b.example"}, Options: []policy.Option{{Name: "ndots", Value: strp("1")}}}}},
	{"none", policy.Input{Policy: policy.None, DNSConfig: &policy.DNSConfig{Nameservers: []string{"8.8.8.8"}, Searches: []string{"c.example"}}}},
	{"host network cluster first", policy.Input{Policy: policy.ClusterFirst, HostNetwork: true}},
	{"host network autopath", policy.Input{Policy: policy.ClusterFirstWithHostNet, HostNetwork: true, PolicyAnnotation: string(policy.ClusterFirstWithAutopath)}},
	{"host network with hostnet policy", policy.Input{Policy: policy.ClusterFirstWithHostNet, HostNetwork: true}},
	{"fqdn hostname", policy.Input{Policy: policy.ClusterFirst, Hostname: "web-0", Subdomain: "web", SetHostnameAsFQDN: true}},
}

// TestRunPodSandboxDNS runs every policy through the shim, once with the
// pod from the API server and once from the sandbox config alone, and
// checks the runtime gets what the engine computes for the pod.
func TestRunPodSandboxDNS(t *testing.T) {
	host := hostSnap([]string{"192.0.2.53", "192.0.2.54"}, []string{"corp.example"}, []string{"timeout:2"})
	eng, err := policy.New(testNode)
	if err != nil {
		t.Fatal(err)
	}
	phost := podfacts.HostOf(host.Current())
	lookup := fakeLookup{}
	for i, tc := range podCases {
		tc.pod.Name, tc.pod.Namespace, tc.pod.UID = "pod-"+string(rune('a'+i)), "team", "uid-"+tc.name
		lookup[tc.pod.UID] = tc.pod
		podCases[i] = tc
	}
	for _, source := range []string{sourceAPIServer, sourceSandbox} {
		e := sourceEnv(t, host, source, lookup)
		for _, tc := range podCases {
			t.Run(source+"/"+tc.name, func(t *testing.T) {
				want, err := eng.Compute(tc.pod, phost)
				if err != nil {
					t.Fatal(err)
				}
				cfg := kubeletConfig(t, eng, phost, tc.pod)
				kubeletHostname := cfg.Hostname
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				resp, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: "runc"})
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(resp.PodSandboxId, "sandbox-") {
					t.Errorf("PodSandboxId = %q", resp.PodSandboxId)
				}
				got := e.rt.sandbox(-1)
				if d := got.DnsConfig; !slices.Equal(d.Servers, want.Nameservers) || !slices.Equal(d.Searches, want.Searches) || !policy.SameOptions(d.Options, want.Options) {
					t.Errorf("runtime got dns %v\nwant %q %q %q", d, want.Nameservers, want.Searches, want.Options)
				}
				// What kubelet computed itself passes untouched, whatever
				// its option order.
				if tc.pod.PolicyAnnotation == "" && !proto.Equal(got.DnsConfig, cfg.DnsConfig) {
					t.Errorf("runtime got dns %v, want kubelet's %v untouched", got.DnsConfig, cfg.DnsConfig)
				}
				if got.Hostname != want.Hostname || got.Hostname != kubeletHostname {
					t.Errorf("runtime got hostname %q, engine %q, kubelet %q", got.Hostname, want.Hostname, kubeletHostname)
				}
				if tc.pod.HostNetwork && got.Hostname != "" {
					t.Errorf("host-network sandbox got hostname %q", got.Hostname)
				}
				if !proto.Equal(got.Metadata, cfg.Metadata) || got.Annotations[policy.AnnotationDNSPolicy] != tc.pod.PolicyAnnotation {
					t.Errorf("runtime got metadata %v annotations %v", got.Metadata, got.Annotations)
				}
			})
		}
	}
}

// TestRunPodSandboxLoopback runs pods through the shim on a
// systemd-resolved node, kubelet's sandbox config written out by hand
// (kubelet hands the node's file over as it is, 127.0.0.53 included): a
// sandbox in the node's network namespace (NamespaceOptions network NODE)
// keeps the stub, which answers there; one in its own namespace gets the
// node's other servers only. Both with the pod from the API server and
// from the sandbox config alone.
func TestRunPodSandboxLoopback(t *testing.T) {
	host := hostSnap([]string{"127.0.0.53", "192.0.2.53"}, []string{"corp.example"}, []string{"edns0", "trust-ad"})
	kubeletHost := &runtimeapi.DNSConfig{Servers: []string{"127.0.0.53", "192.0.2.53"}, Searches: []string{"corp.example"}, Options: []string{"trust-ad", "edns0"}}
	cases := []struct {
		name    string
		pod     policy.Input
		kubelet *runtimeapi.DNSConfig
		want    []string
	}{
		{"host network default", policy.Input{Policy: policy.Default, HostNetwork: true}, kubeletHost, []string{"127.0.0.53", "192.0.2.53"}},
		{"host network cluster first", policy.Input{Policy: policy.ClusterFirst, HostNetwork: true}, kubeletHost, []string{"127.0.0.53", "192.0.2.53"}},
		{"host network with hostnet policy", policy.Input{Policy: policy.ClusterFirstWithHostNet, HostNetwork: true},
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, Options: []string{"ndots:5"}},
			[]string{"10.96.0.10"}},
		{"pod network default", policy.Input{Policy: policy.Default}, kubeletHost, []string{"192.0.2.53"}},
	}
	lookup := fakeLookup{}
	for i := range cases {
		c := &cases[i]
		c.pod.Name, c.pod.Namespace, c.pod.UID = "pod-"+string(rune('a'+i)), "team", "uid-loopback-"+c.name
		lookup[c.pod.UID] = c.pod
	}
	for _, source := range []string{sourceAPIServer, sourceSandbox} {
		e := sourceEnv(t, host, source, lookup)
		for _, tc := range cases {
			t.Run(source+"/"+tc.name, func(t *testing.T) {
				cfg := sandboxConfig(tc.pod.Name, tc.pod.Namespace, tc.pod.UID, tc.pod.HostNetwork, proto.Clone(tc.kubelet).(*runtimeapi.DNSConfig))
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
					t.Fatal(err)
				}
				got := e.rt.sandbox(-1).GetDnsConfig()
				if !slices.Equal(got.GetServers(), tc.want) || !slices.Equal(got.GetSearches(), tc.kubelet.Searches) {
					t.Errorf("runtime got dns %v, want servers %q and kubelet's searches", got, tc.want)
				}
			})
		}
	}
}

func TestRunPodSandboxHostnameFromAPI(t *testing.T) {
	pod := policy.Input{Name: "db-0", Namespace: "team", UID: "u1", Policy: policy.ClusterFirst, Hostname: "db-0", Subdomain: "db", SetHostnameAsFQDN: true}
	hostNet := policy.Input{Name: "agent", Namespace: "team", UID: "u2", Policy: policy.ClusterFirstWithHostNet, HostNetwork: true}
	e := newEnv(t, nil, WithPodLookup(fakeLookup{"u1": pod, "u2": hostNet}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg := sandboxConfig("db-0", "team", "u1", false, &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}})
	cfg.Hostname = "stale"
	if _, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := e.rt.sandbox(-1).Hostname; got != "db-0.db.team.svc.cluster.local" {
		t.Errorf("hostname = %q, want the FQDN", got)
	}
	cfg = sandboxConfig("agent", "team", "u2", true, &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}})
	if _, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := e.rt.sandbox(-1).Hostname; got != "" {
		t.Errorf("host-network hostname = %q, want none", got)
	}
}

// overLimit is a pod whose merged config has 4 nameservers and 34 searches.
func overLimit() policy.Input {
	in := policy.Input{Name: "big", Namespace: "team", UID: "u-big", Policy: policy.ClusterFirst,
		DNSConfig: &policy.DNSConfig{Nameservers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}}}
	for i := range 30 {
		in.DNSConfig.Searches = append(in.DNSConfig.Searches, "s"+string(rune('a'+i%26))+strings.Repeat("x", i)+".example")
	}
	return in
}

func TestLimits(t *testing.T) {
	pod := overLimit()
	cfg := func() *runtimeapi.PodSandboxConfig {
		return sandboxConfig(pod.Name, pod.Namespace, pod.UID, false, &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}})
	}
	t.Run("trim", func(t *testing.T) {
		events := &fakeEvents{}
		reg := prometheus.NewRegistry()
		e := newEnv(t, nil, WithPodLookup(fakeLookup{pod.UID: pod}), WithEvents(events), WithRegistry(reg))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg()}); err != nil {
			t.Fatal(err)
		}
		got := e.rt.sandbox(-1).DnsConfig
		if want := []string{"10.96.0.10", "10.0.0.1", "10.0.0.2"}; !equal(got.Servers, want) {
			t.Errorf("servers = %q, want %q", got.Servers, want)
		}
		if len(got.Searches) != policy.MaxSearchPaths {
			t.Errorf("%d searches, want %d", len(got.Searches), policy.MaxSearchPaths)
		}
		ev := events.all()
		if len(ev) != 2 || !strings.HasPrefix(ev[0], "team/big DNSConfigForming: Nameserver limits were exceeded") ||
			!strings.HasPrefix(ev[1], "team/big DNSConfigForming: Search Line limits were exceeded") {
			t.Errorf("events = %q", ev)
		}
		s := e.shim.m
		if n := testutil.ToFloat64(s.limits.WithLabelValues("nameservers", "trimmed")); n != 1 {
			t.Errorf("limit_exceeded_total{nameservers,trimmed} = %v", n)
		}
		if n := testutil.ToFloat64(s.sandboxes.WithLabelValues("apiserver", "rewritten")); n != 1 {
			t.Errorf("sandboxes_total{apiserver,rewritten} = %v", n)
		}
		if !testkit.Gather(t, reg).Has("dnsconfigurer_cri_calls_total") {
			t.Errorf("dnsconfigurer_cri_calls_total: no series")
		}
	})
	t.Run("reject", func(t *testing.T) {
		events := &fakeEvents{}
		e := newEnv(t, nil, WithPodLookup(fakeLookup{pod.UID: pod}), WithEvents(events), WithLimits(LimitsReject))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg()})
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument {
			t.Fatalf("RunPodSandbox = %v, want InvalidArgument", err)
		}
		for _, want := range []string{`pod "team/big" (uid u-big)`, "4 nameservers, at most 3 allowed; over the limit: 10.0.0.3", "34 search paths", "over the limit: scxxxxxxxxxxxxxxxxxxxxxxxxxxxx.example sdxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.example"} {
			if !strings.Contains(st.Message(), want) {
				t.Errorf("message %q lacks %q", st.Message(), want)
			}
		}
		if e.rt.sandbox(-1) != nil {
			t.Error("the runtime got a rejected sandbox")
		}
		if ev := events.all(); len(ev) != 0 {
			t.Errorf("events on reject = %q", ev)
		}
	})
}

func TestFailurePolicy(t *testing.T) {
	broken := &fakeHost{snap: hostresolv.Snapshot{Path: "/etc/resolv.conf", Err: errors.New("nameserver list is empty")}}
	kubelet := &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"team.svc.cluster.local"}, Options: []string{"ndots:5"}}
	tests := []struct {
		name     string
		host     HostConfig
		cfg      *runtimeapi.PodSandboxConfig
		policy   FailurePolicy
		wantCode codes.Code
		wantMsg  string
		reason   string
	}{
		{"host config open", broken, sandboxConfig("p", "team", "u", false, kubelet), FailOpen, codes.OK, "", "host_config"},
		{"host config closed", broken, sandboxConfig("p", "team", "u", false, kubelet), FailClosed, codes.FailedPrecondition, "nameserver list is empty", "host_config"},
		{"no config open", nil, nil, FailOpen, codes.OK, "", "bad_request"},
		{"no config closed", nil, nil, FailClosed, codes.InvalidArgument, "RunPodSandboxRequest.config: missing", "bad_request"},
		{"no uid closed", nil, sandboxConfig("p", "team", "", false, kubelet), FailClosed, codes.InvalidArgument, "RunPodSandboxRequest.config.metadata.uid: empty", "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.host, WithFailurePolicy(tt.policy))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: proto.Clone(tt.cfg).(*runtimeapi.PodSandboxConfig)})
			st := status.Convert(err)
			if st.Code() != tt.wantCode || !strings.Contains(st.Message(), tt.wantMsg) {
				t.Fatalf("RunPodSandbox = %v, want %v containing %q", err, tt.wantCode, tt.wantMsg)
			}
			if tt.wantCode == codes.OK {
				if got := e.rt.sandbox(-1); !proto.Equal(got, tt.cfg) && !(tt.cfg == nil && proto.Equal(got, &runtimeapi.PodSandboxConfig{})) && got != nil {
					t.Errorf("runtime got %v, want kubelet's config unchanged", got)
				}
			} else if e.rt.sandbox(-1) != nil {
				t.Error("the runtime got a sandbox failed closed")
			}
			if n := testutil.ToFloat64(e.shim.m.rewriteErrors.WithLabelValues(tt.reason)); n != 1 {
				t.Errorf("rewrite_errors_total{%s} = %v, want 1", tt.reason, n)
			}
		})
	}
}

func TestNoDNSConfigForwardedUnchanged(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg := sandboxConfig("crictl", "default", "u", false, nil)
	cfg.Hostname = "crictl"
	if _, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := e.rt.sandbox(-1); !proto.Equal(got, cfg) {
		t.Errorf("runtime got %v, want %v", got, cfg)
	}
}

// blockingLookup knows no pod and waits for its context.
type blockingLookup struct{}

func (blockingLookup) Pod(ctx context.Context, _ string) (policy.Input, bool) {
	<-ctx.Done()
	return policy.Input{}, false
}

func TestLookupWait(t *testing.T) {
	e := newEnv(t, nil, WithPodLookup(blockingLookup{}), WithLookupTimeout(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dns := &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"kube-system.svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5"}}
	for _, tt := range []struct {
		source   string
		min, max time.Duration
	}{{"api", 300 * time.Millisecond, 3 * time.Second}, {"file", 0, 200 * time.Millisecond}} {
		cfg := sandboxConfig("etcd", "kube-system", "hash-"+tt.source, false, proto.Clone(dns).(*runtimeapi.DNSConfig))
		cfg.Annotations = map[string]string{configSource: tt.source}
		begin := time.Now()
		if _, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begin); d < tt.min || d > tt.max {
			t.Errorf("config.source %s: RunPodSandbox took %v, want %v..%v", tt.source, d, tt.min, tt.max)
		}
	}
	if n := testutil.ToFloat64(e.shim.m.lookups.WithLabelValues("miss")); n != 2 {
		t.Errorf("lookup misses = %v, want 2", n)
	}
}

// TestRunPodSandboxLarge sends requests far larger than HTTP/2's initial
// windows (kubelet copies every pod annotation into the sandbox config),
// several at once with other calls on the same connection: the relay holds
// each request, rewrites it and sends it on within the runtime's windows,
// and nothing stalls or is corrupted.
func TestRunPodSandboxLarge(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dns := &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
		Searches: []string{"team.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, Options: []string{"ndots:5"}}
	const n = 8
	errc := make(chan error, 2*n)
	for i := range n {
		go func() {
			cfg := sandboxConfig(fmt.Sprintf("big-%d", i), "team", fmt.Sprintf("uid-big-%d", i), false, dns)
			cfg.Annotations = map[string]string{
				policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath),
				"example.com/blob":         strings.Repeat(fmt.Sprintf("%d", i), 300<<10),
			}
			_, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
			errc <- err
		}()
		go func() {
			_, err := e.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			errc <- err
		}()
	}
	for range 2 * n {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	e.rt.mu.Lock()
	defer e.rt.mu.Unlock()
	if len(e.rt.sandboxes) != n {
		t.Fatalf("runtime got %d sandboxes, want %d", len(e.rt.sandboxes), n)
	}
	for _, got := range e.rt.sandboxes {
		i := strings.TrimPrefix(got.Metadata.Name, "big-")
		if blob := got.Annotations["example.com/blob"]; blob != strings.Repeat(i, 300<<10) {
			t.Errorf("%s: annotation of %d bytes corrupted", got.Metadata.Name, len(blob))
		}
		if want := []string{"search.team.cluster.local.ap.k8s.io"}; !slices.Equal(got.DnsConfig.GetSearches(), want) {
			t.Errorf("%s: searches %v, want %v (rewritten)", got.Metadata.Name, got.DnsConfig.GetSearches(), want)
		}
	}
}

// configSource is the annotation kubelet sets on a sandbox to say where
// its pod came from ("api", or "file" for a static pod).
const configSource = "kubernetes.io/config.source"

// tenantPod is a pod in namespace ns with uid on node-1, whose hostname
// names it; mirror, if set, is its kubernetes.io/config.mirror annotation.
func tenantPod(ns, name, uid, mirror string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid)},
		Spec:       corev1.PodSpec{NodeName: "node-1", DNSPolicy: corev1.DNSClusterFirst, Hostname: "host-of-" + name},
	}
	if mirror != "" {
		pod.Annotations = map[string]string{"kubernetes.io/config.mirror": mirror}
	}
	return pod
}

// startInformer runs a pod informer of node-1 over client until the test
// ends and waits for its first list.
func startInformer(t *testing.T, client *fake.Clientset) *podfacts.PodInformer {
	t.Helper()
	p, err := podfacts.NewPodInformer(client, "node-1", testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	testkit.RunSynced(t, p.Run, p.HasSynced)
	return p
}

// TestPodLookupAttack runs 200 sandboxes through the shim, each pod
// claimed by a tenant pod whose mirror annotation is its UID (the tenant
// pods are created first and differ in hostname and DNS policy), and
// counts sandboxes given the tenant's hostname: it must be 0.
func TestPodLookupAttack(t *testing.T) {
	const n = 200
	client := fake.NewClientset()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range n {
		evil := tenantPod("tenant", fmt.Sprintf("evil-%d", i), fmt.Sprintf("uid-evil-%d", i), fmt.Sprintf("uid-victim-%d", i))
		evil.Spec.DNSPolicy = corev1.DNSNone
		evil.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"203.0.113.66"}}
		victim := tenantPod("team", fmt.Sprintf("victim-%d", i), fmt.Sprintf("uid-victim-%d", i), "")
		for _, pod := range []*corev1.Pod{evil, victim} {
			if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := startInformer(t, client)
	e := newEnv(t, nil, WithPodLookup(p))
	wrong, missed := 0, 0
	for i := range n {
		name, uid := fmt.Sprintf("victim-%d", i), fmt.Sprintf("uid-victim-%d", i)
		cfg := sandboxConfig(name, "team", uid, false, &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}})
		cfg.Annotations = map[string]string{configSource: "api"}
		if _, err := e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
			t.Fatal(err)
		}
		got := e.rt.sandbox(-1)
		switch {
		case got.Hostname == "host-of-evil-"+strconv.Itoa(i) || slices.Contains(got.GetDnsConfig().GetServers(), "203.0.113.66"):
			wrong++
		case got.Hostname != "host-of-"+name:
			missed++
		}
	}
	t.Logf("%d sandboxes: %d resolved to the wrong pod, %d not resolved", n, wrong, missed)
	if wrong != 0 || missed != 0 {
		t.Errorf("%d of %d lookups resolved to the tenant's pod, %d to none; want 0 and 0", wrong, n, missed)
	}
}
