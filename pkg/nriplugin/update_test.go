package nriplugin

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// subHost is a HostSubscriber whose snapshot the test changes.
type subHost struct {
	mu  sync.Mutex
	cur hostresolv.Snapshot
	ch  chan hostresolv.Snapshot
}

var _ HostSubscriber = (*subHost)(nil)

func (h *subHost) Current() hostresolv.Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur
}

func (h *subHost) Subscribe() (<-chan hostresolv.Snapshot, func()) { return h.ch, func() {} }

func (h *subHost) set(t *testing.T, file string) {
	h.mu.Lock()
	h.cur = hostConfig(t, file).s
	h.mu.Unlock()
	h.ch <- h.cur
}

// TestLiveUpdate: a change of the node file rewrites in place the files of
// running Default and ClusterFirst pods (host searches), leaves None pods
// and removed pods alone.
func TestLiveUpdate(t *testing.T) {
	reg := prometheus.NewRegistry()
	host := &subHost{cur: hostConfig(t, hostFile).s, ch: make(chan hostresolv.Snapshot)}
	lookup := fakeLookup{
		"u-default": {Name: "web", Namespace: "team", Policy: policy.Default},
		"u-cluster": {Name: "web", Namespace: "team", Policy: policy.ClusterFirst},
		"u-none":    {Name: "web", Namespace: "team", Policy: policy.None, DNSConfig: &policy.DNSConfig{Nameservers: []string{"10.233.0.9"}, Searches: []string{"only.test"}}},
		"u-removed": {Name: "web", Namespace: "team", Policy: policy.Default},
	}
	p := newPlugin(t, WithRegistry(reg), WithPodLookup(lookup, 0))
	p.host = host
	ctx := context.Background()
	ino := map[string]uint64{}
	for _, uid := range []string{"u-default", "u-cluster", "u-none", "u-removed"} {
		pod, ctr := sandbox(t, uid, clusterFirst, nil, false)
		if _, _, err := p.CreateContainer(ctx, pod, ctr); err != nil {
			t.Fatal(err)
		}
		ino[uid] = inode(t, PodFile(p.stateDir, uid))
		if uid == "u-removed" {
			if err := p.RemovePodSandbox(ctx, pod); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := len(p.running), 2; got != want {
		t.Errorf("followed pods = %d, want %d (Default and ClusterFirst)", got, want)
	}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.followHost(runCtx) }()
	host.set(t, "nameserver 10.233.0.7\nsearch new.test\n")
	// A second send returns only once the first change has been handled.
	host.set(t, "nameserver 10.233.0.7\nsearch new.test\n")
	cancel()
	<-done

	want := map[string]string{
		"u-default": "search new.test\nnameserver 10.233.0.7\n",
		"u-cluster": "search team.svc.cluster.local svc.cluster.local cluster.local new.test\nnameserver 10.96.0.10\noptions ndots:5\n",
		"u-none":    none,
	}
	for uid, w := range want {
		file := PodFile(p.stateDir, uid)
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if w = Header("team", "web") + w; string(got) != w {
			t.Errorf("%s: pod file =\n%s\nwant\n%s", uid, got, w)
		}
		if got := inode(t, file); got != ino[uid] {
			t.Errorf("%s: inode %d, want %d (rewritten in place)", uid, got, ino[uid])
		}
	}
	if _, err := os.Stat(PodFile(p.stateDir, "u-removed")); !os.IsNotExist(err) {
		t.Errorf("removed pod's file exists after the update (%v)", err)
	}
	if got := testutil.ToFloat64(p.m.updates); got != 2 {
		t.Errorf("live_updates_total = %v, want 2", got)
	}
}

// TestLiveUpdateBounded: past the max pods a pod is not followed, and the
// plugin still adjusts its containers.
func TestLiveUpdateBounded(t *testing.T) {
	p := newPlugin(t, WithMaxPods(1), WithPodLookup(fakeLookup{
		"u-a": {Name: "web", Namespace: "team", Policy: policy.Default},
		"u-b": {Name: "web", Namespace: "team", Policy: policy.Default},
	}, 0))
	for _, uid := range []string{"u-a", "u-b"} {
		pod, ctr := sandbox(t, uid, hostFile, nil, false)
		if adj, _, err := p.CreateContainer(context.Background(), pod, ctr); err != nil || adj == nil {
			t.Fatalf("%s: CreateContainer = %v, %v", uid, adj, err)
		}
	}
	if _, ok := p.running["u-a"]; !ok || len(p.running) != 1 {
		t.Errorf("followed = %v, want only u-a", p.running)
	}
	// Synchronize forgets pods the runtime no longer has.
	if _, err := p.Synchronize(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(p.running) != 0 {
		t.Errorf("followed after Synchronize = %v, want none", p.running)
	}
}

// TestFollowHostStops: followHost returns when its context is done.
func TestFollowHostStops(t *testing.T) {
	p := newPlugin(t)
	p.host = &subHost{cur: hostConfig(t, hostFile).s, ch: make(chan hostresolv.Snapshot)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.followHost(ctx) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("followHost did not return after cancel")
	}
}
