package nriplugin

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// The node of every test. The expected files below are written out by
// hand from kubelet's rules, not computed with the engine.
const (
	hostFile = "nameserver 10.233.0.1\nnameserver 10.233.0.2\nsearch host.test corp.test\noptions timeout:2 attempts:3\n"

	// kubelet's output for a ClusterFirst pod in namespace team.
	clusterFirst = "search team.svc.cluster.local svc.cluster.local cluster.local host.test corp.test\nnameserver 10.96.0.10\noptions ndots:5\n"
	// the same with spec.dnsConfig {nameservers: [10.233.0.53], searches: [extra.test], options: [ndots:2, edns0]}.
	clusterFirstConfig = "search team.svc.cluster.local svc.cluster.local cluster.local host.test corp.test extra.test\nnameserver 10.96.0.10\nnameserver 10.233.0.53\noptions ndots:2 edns0\n"
	autopathTeam       = "search search.team.cluster.local.ap.k8s.io\nnameserver 10.96.0.10\noptions ndots:5\n"
	none               = "search only.test\nnameserver 10.233.0.9\n"
)

type fakeHost struct{ s hostresolv.Snapshot }

func (f fakeHost) Current() hostresolv.Snapshot { return f.s }

func hostConfig(t *testing.T, file string) fakeHost {
	t.Helper()
	cfg, err := resolvconf.ParseBytes([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	return fakeHost{hostresolv.Snapshot{Raw: cfg, Config: cfg}}
}

// fakeLookup is an API server that knows pods by UID.
type fakeLookup map[string]policy.Input

func (f fakeLookup) PodFor(_ context.Context, sb podfacts.SandboxPod) (policy.Input, bool) {
	in, ok := f[sb.UID]
	return in, ok
}

func newPlugin(t *testing.T, opts ...Option) *Plugin {
	t.Helper()
	eng, err := policy.New(policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	p, err := New(eng, hostConfig(t, hostFile), filepath.Join(t.TempDir(), "state"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sandbox writes containerd's sandbox files for a pod and returns the pod
// and a container whose /etc/resolv.conf is bound to them.
func sandbox(t *testing.T, uid, resolv string, annotations map[string]string, hostNet bool) (*api.PodSandbox, *api.Container) {
	t.Helper()
	return sandboxID(t, "sb"+strings.ReplaceAll(uid, "-", ""), uid, resolv, annotations, hostNet)
}

// sandboxID is sandbox with the sandbox's id: kubelet gives a pod a new
// sandbox (a new id, the same uid) when the old one dies.
func sandboxID(t *testing.T, id, uid, resolv string, annotations map[string]string, hostNet bool) (*api.PodSandbox, *api.Container) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "io.containerd.grpc.v1.cri", "sandboxes", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(resolv), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hostname"), []byte("web\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := &api.PodSandbox{Id: id, Name: "web", Namespace: "team", Uid: uid, Annotations: annotations, Linux: &api.LinuxPodSandbox{}}
	if !hostNet {
		pod.Linux.Namespaces = []*api.LinuxNamespace{{Type: "network", Path: "/run/netns/cni-1"}}
	}
	ctr := &api.Container{Id: "c1", PodSandboxId: id, Name: "main", Mounts: []*api.Mount{
		{Destination: "/etc/hostname", Type: "bind", Source: filepath.Join(dir, "hostname"), Options: []string{"rbind", "rprivate", "rw"}},
		{Destination: "/etc/resolv.conf", Type: "bind", Source: filepath.Join(dir, "resolv.conf"), Options: []string{"rbind", "rprivate", "rw"}},
	}}
	return pod, ctr
}

func TestCreateContainer(t *testing.T) {
	none4 := policy.Input{Name: "web", Namespace: "team", Policy: policy.None,
		DNSConfig: &policy.DNSConfig{Nameservers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}}}
	apiDefault := policy.Input{Name: "web", Namespace: "team", Policy: policy.Default}
	tests := []struct {
		name        string
		sandboxFile string
		annotations map[string]string
		hostNet     bool
		opts        []Option
		mutate      func(ctr *api.Container)
		want        string // the pod file, without its header; "" for no adjustment
		wantErr     string
	}{
		{name: "cluster-first", sandboxFile: clusterFirst, want: clusterFirst},
		{name: "cluster-first-config", sandboxFile: clusterFirstConfig, want: clusterFirstConfig},
		{name: "default", sandboxFile: hostFile, want: "search host.test corp.test\nnameserver 10.233.0.1\nnameserver 10.233.0.2\noptions timeout:2 attempts:3\n"},
		{name: "none", sandboxFile: none, want: none},
		{name: "host-network", sandboxFile: clusterFirst, hostNet: true, want: clusterFirst},
		{name: "autopath annotation", sandboxFile: clusterFirst,
			annotations: map[string]string{policy.AnnotationDNSPolicy: string(policy.ClusterFirstWithAutopath)}, want: autopathTeam},
		{name: "unparsable sandbox file fails open", sandboxFile: "nameserver\n"},
		{name: "no resolv.conf mount", sandboxFile: clusterFirst, mutate: func(c *api.Container) { c.Mounts = c.Mounts[:1] }},
		{name: "resolv.conf from the request", sandboxFile: clusterFirst,
			mutate: func(c *api.Container) { c.Mounts[1].Source = "/var/lib/kubelet/pods/x/volumes/resolv.conf" }},
		{name: "api server", sandboxFile: clusterFirst, opts: []Option{WithPodLookup(fakeLookup{"u-api": apiDefault}, 0)},
			want: "search host.test corp.test\nnameserver 10.233.0.1\nnameserver 10.233.0.2\noptions timeout:2 attempts:3\n"},
		{name: "api server without the pod", sandboxFile: clusterFirst, opts: []Option{WithPodLookup(fakeLookup{}, 0)}, want: clusterFirst},
		{name: "limits trim", sandboxFile: clusterFirst, opts: []Option{WithPodLookup(fakeLookup{"u-limits-trim": none4}, 0)},
			want: "nameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\n"},
		{name: "limits reject", sandboxFile: clusterFirst, opts: []Option{WithLimits(LimitsReject), WithPodLookup(fakeLookup{"u-limits-reject": none4}, 0)},
			wantErr: `pod "team/web" (uid u-limits-reject) exceeds the DNS limits (limits mode reject): 4 nameservers, at most 3 allowed; over the limit: 10.0.0.4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uid := "u-" + strings.ReplaceAll(strings.Fields(tt.name)[0], " ", "-")
			if strings.HasPrefix(tt.name, "limits") {
				uid = "u-" + strings.ReplaceAll(tt.name, " ", "-")
			}
			p := newPlugin(t, tt.opts...)
			pod, ctr := sandbox(t, uid, tt.sandboxFile, tt.annotations, tt.hostNet)
			if tt.mutate != nil {
				tt.mutate(ctr)
			}
			adj, upd, err := p.CreateContainer(context.Background(), pod, ctr)
			if upd != nil {
				t.Errorf("updates = %v, want none", upd)
			}
			if !testkit.WantErr(t, err, tt.wantErr) {
				return
			}
			file := PodFile(p.stateDir, uid)
			if tt.want == "" {
				if adj != nil {
					t.Errorf("adjustment = %v, want none", adj)
				}
				if _, err := os.Stat(file); !os.IsNotExist(err) {
					t.Errorf("pod file exists (%v), want none", err)
				}
				return
			}
			wantMounts := []*api.Mount{{Destination: "/etc/resolv.conf", Type: "bind", Source: file, Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}}}
			if adj == nil || !reflect.DeepEqual(adj.GetMounts(), wantMounts) {
				t.Fatalf("adjustment mounts = %v, want %v", adj.GetMounts(), wantMounts)
			}
			got, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if want := Header("team", "web") + tt.want; string(got) != want {
				t.Errorf("pod file =\n%s\nwant\n%s", got, want)
			}
			checkMode(t, filepath.Dir(file), 0o711)
			checkMode(t, file, 0o644)
		})
	}
}

// TestCreateContainerLoopback creates containers on a systemd-resolved
// node, whose sandbox files hold kubelet's output (the node's file as it
// is, 127.0.0.53 included): a hostNetwork pod keeps the stub, which
// answers in the node's network namespace; a pod with its own network
// namespace gets the node's other servers only. The pod comes from the
// API server and from the sandbox file alone.
func TestCreateContainerLoopback(t *testing.T) {
	const (
		stubFile = "nameserver 127.0.0.53\nnameserver 10.233.0.1\nsearch host.test\noptions edns0 trust-ad\n"
		kept     = "search host.test\nnameserver 127.0.0.53\nnameserver 10.233.0.1\noptions edns0 trust-ad\n"
		dropped  = "search host.test\nnameserver 10.233.0.1\noptions edns0 trust-ad\n"
		// kubelet's output for ClusterFirstWithHostNet in namespace team.
		hostNetCluster = "search team.svc.cluster.local svc.cluster.local cluster.local host.test\nnameserver 10.96.0.10\noptions ndots:5\n"
	)
	tests := []struct {
		name        string
		pod         policy.Input
		sandboxFile string
		want        string
	}{
		{"hostnet-default", policy.Input{Policy: policy.Default, HostNetwork: true}, stubFile, kept},
		{"hostnet-clusterfirst", policy.Input{Policy: policy.ClusterFirst, HostNetwork: true}, stubFile, kept},
		{"hostnet-withhostnet", policy.Input{Policy: policy.ClusterFirstWithHostNet, HostNetwork: true}, hostNetCluster, hostNetCluster},
		{"podnet-default", policy.Input{Policy: policy.Default}, stubFile, dropped},
	}
	eng, err := policy.New(policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	for _, source := range []string{sourceAPIServer, sourceSandbox} {
		for _, tt := range tests {
			t.Run(source+"/"+tt.name, func(t *testing.T) {
				uid := "u-" + tt.name
				opts := []Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
				if source == sourceAPIServer {
					in := tt.pod
					in.Name, in.Namespace, in.UID = "web", "team", uid
					opts = append(opts, WithPodLookup(fakeLookup{uid: in}, 0))
				}
				p, err := New(eng, hostConfig(t, stubFile), filepath.Join(t.TempDir(), "state"), opts...)
				if err != nil {
					t.Fatal(err)
				}
				pod, ctr := sandbox(t, uid, tt.sandboxFile, nil, tt.pod.HostNetwork)
				if _, _, err := p.CreateContainer(context.Background(), pod, ctr); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(PodFile(p.stateDir, uid))
				if err != nil {
					t.Fatal(err)
				}
				if want := Header("team", "web") + tt.want; string(got) != want {
					t.Errorf("pod file =\n%s\nwant\n%s", got, want)
				}
			})
		}
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestPodFileShared checks that every container of a pod binds the same
// inode: a second container with the same config leaves the file alone,
// one after a host change rewrites it in place. The pod comes from the API
// server: from the sandbox file alone, a Default pod is recognised only
// while the node file is the one kubelet read.
func TestPodFileShared(t *testing.T) {
	p := newPlugin(t, WithPodLookup(fakeLookup{"u-shared": {Name: "web", Namespace: "team", Policy: policy.Default}}, 0))
	pod, ctr := sandbox(t, "u-shared", hostFile, nil, false)
	if _, _, err := p.CreateContainer(context.Background(), pod, ctr); err != nil {
		t.Fatal(err)
	}
	file := PodFile(p.stateDir, "u-shared")
	ino := inode(t, file)
	if _, _, err := p.CreateContainer(context.Background(), pod, ctr); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, file); got != ino {
		t.Errorf("same config: inode %d, want %d (unchanged)", got, ino)
	}
	p.host = hostConfig(t, "nameserver 10.233.0.7\n")
	if _, _, err := p.CreateContainer(context.Background(), pod, ctr); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, file); got != ino {
		t.Errorf("changed config: inode %d, want %d (written in place)", got, ino)
	}
	got, _ := os.ReadFile(file)
	if want := Header("team", "web") + "nameserver 10.233.0.7\n"; string(got) != want {
		t.Errorf("pod file =\n%s\nwant\n%s", got, want)
	}
}

func TestStateCleanup(t *testing.T) {
	p := newPlugin(t)
	ctx := context.Background()
	var pods []*api.PodSandbox
	for _, uid := range []string{"u-a", "u-b", "u-c"} {
		pod, ctr := sandbox(t, uid, clusterFirst, nil, false)
		if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, pod)
	}
	if err := os.WriteFile(filepath.Join(p.stateDir, ".resolv.conf.tmp"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.RemovePodSandbox(ctx, pods[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Synchronize(ctx, pods[2:], nil); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(p.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"u-c"}; !reflect.DeepEqual(names, want) {
		t.Errorf("state dir = %v, want %v", names, want)
	}
}

func TestValidUID(t *testing.T) {
	tests := []struct {
		uid string
		ok  bool
	}{
		{"0f6c3a9e-2a51-4f0b-9d1e-3c6d5b7a8e90", true},
		{"8e2c1b0a9f5d4c3b2a1f0e9d8c7b6a5f", true}, // a static pod's config hash
		{"", false},
		{"..", false},
		{"../etc", false},
		{"a/b", false},
		{strings.Repeat("a", 129), false},
	}
	for _, tt := range tests {
		if err := validUID(tt.uid); (err == nil) != tt.ok {
			t.Errorf("validUID(%q) = %v, want ok %v", tt.uid, err, tt.ok)
		}
	}
	p := newPlugin(t)
	pod, ctr := sandbox(t, "u-x", clusterFirst, nil, false)
	pod.Uid = "../escape"
	adj, _, err := p.CreateContainer(context.Background(), pod, ctr)
	if err != nil || adj != nil {
		t.Errorf("CreateContainer with uid %q = %v, %v; want unchanged, no error", pod.Uid, adj, err)
	}
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want api.EventMask
	}{
		{"trim", nil, api.MustParseEventMask("CreateContainer", "RemovePodSandbox")},
		{"reject without api server", []Option{WithLimits(LimitsReject)}, api.MustParseEventMask("CreateContainer", "RemovePodSandbox")},
		{"reject with api server", []Option{WithLimits(LimitsReject), WithPodLookup(fakeLookup{}, 0)},
			api.MustParseEventMask("CreateContainer", "RemovePodSandbox", "RunPodSandbox")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newPlugin(t, tt.opts...).Configure(context.Background(), "", "containerd", "2.4.2")
			if err != nil || got != tt.want {
				t.Errorf("Configure = %v, %v; want %v", got.PrettyString(), err, tt.want.PrettyString())
			}
		})
	}
}

func TestRunPodSandboxReject(t *testing.T) {
	none4 := policy.Input{Name: "web", Namespace: "team", Policy: policy.None,
		DNSConfig: &policy.DNSConfig{Nameservers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}}}
	p := newPlugin(t, WithLimits(LimitsReject), WithPodLookup(fakeLookup{"u-over": none4, "u-ok": {Name: "web", Namespace: "team", Policy: policy.Default}}, 0))
	over := &api.PodSandbox{Name: "web", Namespace: "team", Uid: "u-over"}
	if err := p.RunPodSandbox(context.Background(), over); err == nil || !strings.Contains(err.Error(), "4 nameservers, at most 3") {
		t.Errorf("RunPodSandbox(over) = %v, want a limits error", err)
	}
	for _, uid := range []string{"u-ok", "u-unknown"} {
		if err := p.RunPodSandbox(context.Background(), &api.PodSandbox{Name: "web", Namespace: "team", Uid: uid}); err != nil {
			t.Errorf("RunPodSandbox(%s) = %v, want nil", uid, err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	eng, _ := policy.New(policy.Node{})
	host := hostConfig(t, hostFile)
	tests := []struct {
		name     string
		stateDir string
		opts     []Option
	}{
		{"relative state dir", "state", nil},
		{"bad limits", "/state", []Option{WithLimits("drop")}},
		{"bad index", "/state", []Option{WithIdentity("dnsconfigurer", "1")}},
		{"bad name", "/state", []Option{WithIdentity("dns/configurer", "10")}},
		{"bad backoff", "/state", []Option{WithBackoff(0, 0)}},
	}
	for _, tt := range tests {
		if _, err := New(eng, host, tt.stateDir, tt.opts...); err == nil {
			t.Errorf("%s: New succeeded, want an error", tt.name)
		}
	}
}
