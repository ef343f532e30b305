package nriplugin

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// pluginAt is a plugin on stateDir with host, as a restarted process
// would be: nothing in memory.
func pluginAt(t *testing.T, stateDir string, host HostConfig, opts ...Option) *Plugin {
	t.Helper()
	eng, err := policy.New(policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	p, err := New(eng, host, stateDir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// liveUpdate changes the node file under p's followHost and returns once
// the change has been handled.
func liveUpdate(t *testing.T, p *Plugin, host *subHost, file string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.followHost(ctx) }()
	host.set(t, file)
	host.set(t, file) // returns once the first change has been handled
	cancel()
	<-done
}

// TestRecreatedSandbox runs kubelet's recreation of a pod's sandbox (the
// pause container killed, the network namespace lost): RunPodSandbox(A,
// uid U), a container, RunPodSandbox(B, uid U), a container,
// RemovePodSandbox(A). B's containers bind the same file as A's; it must
// stay, with the same inode, and a later change of the node file must
// still reach it. The plugin is restarted (a new process on the same state
// dir, then Synchronize as at its connection) at each point of the
// sequence. Before the fix RemovePodSandbox(A) removed U's directory.
func TestRecreatedSandbox(t *testing.T) {
	const uid = "0f6c3a9e-2a51-4f0b-9d1e-3c6d5b7a8e90"
	for _, restartAt := range []string{"never", "before A's container", "after A's container", "after B's container", "after RemovePodSandbox(A)"} {
		t.Run(restartAt, func(t *testing.T) {
			ctx := context.Background()
			stateDir := filepath.Join(t.TempDir(), "state")
			host := &subHost{cur: hostConfig(t, hostFile).s, ch: make(chan hostresolv.Snapshot)}
			lookup := WithPodLookup(fakeLookup{uid: {Name: "web", Namespace: "team", UID: uid, Policy: policy.Default}}, 0)
			reg := prometheus.NewRegistry()
			p := pluginAt(t, stateDir, host, lookup, WithRegistry(reg))
			podA, ctrA := sandboxID(t, "sandbox-a", uid, hostFile, nil, false)
			podB, ctrB := sandboxID(t, "sandbox-b", uid, hostFile, nil, false)
			var live []*api.PodSandbox
			step := func(name string) {
				t.Helper()
				if restartAt != name {
					return
				}
				reg = prometheus.NewRegistry()
				p = pluginAt(t, stateDir, host, lookup, WithRegistry(reg))
				if _, err := p.Synchronize(ctx, live, nil); err != nil {
					t.Fatal(err)
				}
			}
			create := func(pod *api.PodSandbox, ctr *api.Container) string {
				t.Helper()
				adj, _, err := p.CreateContainer(ctx, pod, ctr)
				if err != nil || len(adj.GetMounts()) != 1 {
					t.Fatalf("CreateContainer(%s) = %v, %v; want the pod file mounted", pod.Id, adj, err)
				}
				return adj.GetMounts()[0].Source
			}

			live = append(live, podA)
			if err := p.RunPodSandbox(ctx, podA); err != nil {
				t.Fatal(err)
			}
			step("before A's container")
			file := create(podA, ctrA)
			ino := inode(t, file)
			step("after A's container")
			live = append(live, podB)
			if err := p.RunPodSandbox(ctx, podB); err != nil {
				t.Fatal(err)
			}
			if got := create(podB, ctrB); got != file {
				t.Errorf("B's containers bind %s, A's %s; want one file per pod", got, file)
			}
			step("after B's container")
			if err := p.RemovePodSandbox(ctx, podA); err != nil {
				t.Fatal(err)
			}
			live = live[1:]
			checkFile(t, file, Header("team", "web")+"search host.test corp.test\nnameserver 10.233.0.1\nnameserver 10.233.0.2\noptions timeout:2 attempts:3\n")
			if got := inode(t, file); got != ino {
				t.Errorf("B's file: inode %d, want %d (the one its containers bind)", got, ino)
			}
			step("after RemovePodSandbox(A)")

			liveUpdate(t, p, host, "nameserver 10.233.0.7\nsearch new.test\n")
			checkFile(t, file, Header("team", "web")+"search new.test\nnameserver 10.233.0.7\n")
			if got := inode(t, file); got != ino {
				t.Errorf("B's file after the live update: inode %d, want %d", got, ino)
			}
			if got := testutil.ToFloat64(p.m.updates); got != 1 {
				t.Errorf("live_updates_total = %v, want 1", got)
			}

			if err := p.RemovePodSandbox(ctx, podB); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Dir(file)); !os.IsNotExist(err) {
				t.Errorf("pod dir after its last sandbox: %v, want it removed", err)
			}
			if len(p.running) != 0 || len(p.sandboxes) != 0 {
				t.Errorf("after the last sandbox: followed %v, sandboxes %v; want none", p.running, p.sandboxes)
			}
		})
	}
}

// TestRemoveSandbox: which RemovePodSandbox removes the pod's directory.
// A sandbox the plugin never saw (created after the last Synchronize,
// without a container yet) does not keep the file: none of its containers
// binds it.
func TestRemoveSandbox(t *testing.T) {
	tests := []struct {
		name    string
		sync    []string // sandbox ids (of uid u-1) in the Synchronize before the containers
		created []string // sandboxes whose container the plugin adjusts
		remove  []string
		want    bool // the pod dir is still there
	}{
		{name: "only sandbox", created: []string{"a"}, remove: []string{"a"}, want: false},
		{name: "old sandbox of two", created: []string{"a", "b"}, remove: []string{"a"}, want: true},
		{name: "new sandbox of two", created: []string{"a", "b"}, remove: []string{"b"}, want: true},
		{name: "both", created: []string{"a", "b"}, remove: []string{"b", "a"}, want: false},
		{name: "the same twice", created: []string{"a", "b"}, remove: []string{"a", "a"}, want: true},
		{name: "synchronized sandbox without a container", sync: []string{"a", "b"}, created: []string{"a"}, remove: []string{"a"}, want: true},
		{name: "unknown sandbox", created: []string{"a"}, remove: []string{"x"}, want: true},
		{name: "unknown sandbox, nothing tracked", sync: []string{}, remove: []string{"x"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			p := newPlugin(t)
			pods := map[string]*api.PodSandbox{}
			ctrs := map[string]*api.Container{}
			for _, id := range []string{"a", "b", "x"} {
				pods[id], ctrs[id] = sandboxID(t, id, "u-1", clusterFirst, nil, false)
			}
			if tt.sync != nil {
				var live []*api.PodSandbox
				for _, id := range tt.sync {
					live = append(live, pods[id])
				}
				if _, err := p.Synchronize(ctx, live, nil); err != nil {
					t.Fatal(err)
				}
			}
			if tt.sync != nil && len(tt.created) == 0 {
				if _, err := p.podDir("u-1"); err != nil { // a file of a previous run
					t.Fatal(err)
				}
			}
			for _, id := range tt.created {
				if adj, _, err := p.CreateContainer(ctx, pods[id], ctrs[id]); err != nil || adj == nil {
					t.Fatalf("CreateContainer(%s) = %v, %v", id, adj, err)
				}
			}
			for _, id := range tt.remove {
				if err := p.RemovePodSandbox(ctx, pods[id]); err != nil {
					t.Fatal(err)
				}
			}
			_, err := os.Stat(filepath.Join(p.stateDir, "u-1"))
			if got := err == nil; got != tt.want {
				t.Errorf("pod dir present = %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

// TestRemoveSandboxUntracked: past maxSandboxes RemovePodSandbox removes
// no directory (one it does not track may still be bound); the next
// Synchronize does, from the runtime's list.
func TestRemoveSandboxUntracked(t *testing.T) {
	ctx := context.Background()
	p := newPlugin(t)
	live := make([]*api.PodSandbox, 0, maxSandboxes+1)
	for i := range maxSandboxes + 1 {
		live = append(live, &api.PodSandbox{Id: "sb-" + strconv.Itoa(i), Uid: "u-" + strconv.Itoa(i)})
	}
	if _, err := p.Synchronize(ctx, live, nil); err != nil {
		t.Fatal(err)
	}
	if len(p.sandboxes) != maxSandboxes || !p.untracked {
		t.Fatalf("tracked %d sandboxes (untracked %v), want %d and untracked", len(p.sandboxes), p.untracked, maxSandboxes)
	}
	pod, ctr := sandboxID(t, live[0].Id, "u-0", clusterFirst, nil, false)
	if adj, _, err := p.CreateContainer(ctx, pod, ctr); err != nil || adj == nil {
		t.Fatalf("CreateContainer = %v, %v", adj, err)
	}
	if err := p.RemovePodSandbox(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(PodFile(p.stateDir, "u-0")); err != nil {
		t.Errorf("untracked: RemovePodSandbox removed the pod file (%v)", err)
	}
	if _, err := p.Synchronize(ctx, live[1:], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.stateDir, "u-0")); !os.IsNotExist(err) {
		t.Errorf("Synchronize without the pod: %v, want its dir removed", err)
	}
	if p.untracked || len(p.sandboxes) != maxSandboxes {
		t.Errorf("after Synchronize: tracked %d, untracked %v; want %d, false", len(p.sandboxes), p.untracked, maxSandboxes)
	}
}

// TestUpgradeStateDir starts the plugin on a state dir the previous
// version wrote: <uid>/resolv.conf without a record, bound into running
// containers (of two sandboxes of one pod), and a stale pod's directory.
// Synchronize removes only the stale one; the live pod's file stays until
// its last sandbox goes; the pod is followed again from its next
// container, and the file keeps its inode throughout.
func TestUpgradeStateDir(t *testing.T) {
	const old = "# Generated by dnsconfigurer (NRI) for pod team/web; do not edit.\nsearch host.test corp.test\nnameserver 10.233.0.1\n"
	ctx := context.Background()
	stateDir := filepath.Join(t.TempDir(), "state")
	for _, uid := range []string{"u-live", "u-stale"} {
		if err := os.MkdirAll(filepath.Join(stateDir, uid), 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(PodFile(stateDir, uid), []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := PodFile(stateDir, "u-live")
	ino := inode(t, file)
	host := &subHost{cur: hostConfig(t, hostFile).s, ch: make(chan hostresolv.Snapshot)}
	p := pluginAt(t, stateDir, host, WithPodLookup(fakeLookup{"u-live": {Name: "web", Namespace: "team", UID: "u-live", Policy: policy.Default}}, 0))
	podA, _ := sandboxID(t, "sandbox-a", "u-live", hostFile, nil, false)
	podB, ctrB := sandboxID(t, "sandbox-b", "u-live", hostFile, nil, false)
	if _, err := p.Synchronize(ctx, []*api.PodSandbox{podA, podB}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "u-stale")); !os.IsNotExist(err) {
		t.Errorf("stale pod dir: %v, want it removed", err)
	}
	checkFile(t, file, old)
	if len(p.running) != 0 {
		t.Errorf("followed %v without a record, want none", p.running)
	}
	if err := p.RemovePodSandbox(ctx, podA); err != nil {
		t.Fatal(err)
	}
	checkFile(t, file, old)

	if _, _, err := p.CreateContainer(ctx, podB, ctrB); err != nil {
		t.Fatal(err)
	}
	want := Header("team", "web") + "search host.test corp.test\nnameserver 10.233.0.1\nnameserver 10.233.0.2\noptions timeout:2 attempts:3\n"
	checkFile(t, file, want)
	liveUpdate(t, p, host, "nameserver 10.233.0.7\n")
	checkFile(t, file, Header("team", "web")+"nameserver 10.233.0.7\n")
	if got := inode(t, file); got != ino {
		t.Errorf("inode %d, want %d: the containers of the previous version lost their file", got, ino)
	}
	if err := p.RemovePodSandbox(ctx, podB); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(file)); !os.IsNotExist(err) {
		t.Errorf("pod dir after its last sandbox: %v, want it removed", err)
	}
}

// TestRecordRoundTrip fills every field of policy.Input and reads it back
// from the record: a field added to policy.Input and not to the record
// fails here.
func TestRecordRoundTrip(t *testing.T) {
	var in policy.Input
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name + "-value")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Pointer:
			switch f.Interface().(type) {
			case *string:
				s := "override"
				f.Set(reflect.ValueOf(&s))
			case *policy.DNSConfig:
				val, empty := "2", ""
				f.Set(reflect.ValueOf(&policy.DNSConfig{Nameservers: []string{"10.0.0.1"}, Searches: []string{"a.test"},
					Options: []policy.Option{{Name: "ndots", Value: &val}, {Name: "edns0"}, {Name: "x", Value: &empty}}}))
			default:
				t.Fatalf("policy.Input.%s: type %s not filled by this test", v.Type().Field(i).Name, f.Type())
			}
		default:
			t.Fatalf("policy.Input.%s: kind %s not filled by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	pod := &api.PodSandbox{Namespace: in.Namespace, Name: in.Name, Uid: "u-1"}
	in.UID = "u-1"
	dir := t.TempDir()
	if err := saveRecord(dir, pod, in, true); err != nil {
		t.Fatal(err)
	}
	checkMode(t, filepath.Join(dir, recordName), recordMode)
	got, err := loadRecord(dir, pod)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, in)
	}
	if err := saveRecord(dir, pod, in, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, recordName)); !os.IsNotExist(err) {
		t.Errorf("record of a pod no longer followed: %v, want it removed", err)
	}
}

// TestLoadRecordRejects: a record that is not this version's record of
// this pod is an error naming the file and the reason, never a guess.
func TestLoadRecordRejects(t *testing.T) {
	const good = `{"version":1,"namespace":"team","name":"web","uid":"u-1","input":{"policy":"Default"}}`
	tests := []struct {
		name, data, want string
	}{
		{"not json", "nameserver 10.0.0.1\n", "invalid character"},
		{"empty", "", "EOF"},
		{"other version", strings.Replace(good, `"version":1`, `"version":2`, 1), "version 2, want 1"},
		{"other pod", strings.Replace(good, `"u-1"`, `"u-2"`, 1), `for pod "team/web" (uid "u-2"), not "team/web" (uid "u-1")`},
		{"other name", strings.Replace(good, `"web"`, `"db"`, 1), `for pod "team/db"`},
		{"unknown field", strings.Replace(good, `"policy"`, `"future":1,"policy"`, 1), `unknown field "future"`},
		{"two records", good + good, "data after the record"},
		{"too large", good + strings.Repeat(" ", maxSandboxFile), "file too large"},
	}
	pod := &api.PodSandbox{Namespace: "team", Name: "web", Uid: "u-1"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, recordName), []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadRecord(dir, pod)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "pod record") {
				t.Errorf("loadRecord = %v, want an error starting with %q and containing %q", err, "pod record", tt.want)
			}
		})
	}
	t.Run("symbolic link", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "elsewhere.json")
		if err := os.WriteFile(target, []byte(good), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, recordName)); err != nil {
			t.Fatal(err)
		}
		if _, err := loadRecord(dir, pod); err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
			t.Errorf("loadRecord through a symbolic link = %v, want a refusal", err)
		}
	})
}

// TestRecordUnusable: Synchronize does not follow a pod whose record is
// unusable, counts an update error and logs the pod and the reason; the
// pod's file stays.
func TestRecordUnusable(t *testing.T) {
	var logs testkit.Buffer
	reg := prometheus.NewRegistry()
	p := newPlugin(t, WithLogger(textLogger(&logs)), WithRegistry(reg))
	dir, err := p.podDir("u-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, recordName), []byte(`{"version":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fileName), []byte(clusterFirst), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Synchronize(context.Background(), []*api.PodSandbox{{Id: "a", Namespace: "team", Name: "web", Uid: "u-1"}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(p.running) != 0 {
		t.Errorf("followed %v, want none", p.running)
	}
	if got := testutil.ToFloat64(p.m.errors.WithLabelValues(stageUpdate)); got != 1 {
		t.Errorf("errors_total{stage=update} = %v, want 1", got)
	}
	for _, want := range []string{"level=ERROR", "pod record unusable", "pod=team/web", "uid=u-1", "version 7, want 1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	checkFile(t, filepath.Join(dir, fileName), clusterFirst)
}

// TestRecoverBounded: Synchronize follows at most the max pods from
// records, in UID order.
func TestRecoverBounded(t *testing.T) {
	ctx := context.Background()
	stateDir := filepath.Join(t.TempDir(), "state")
	lookup := fakeLookup{}
	uids := []string{"u-c", "u-a", "u-b"}
	for _, uid := range uids {
		lookup[uid] = policy.Input{Name: "web", Namespace: "team", UID: uid, Policy: policy.Default}
	}
	first := pluginAt(t, stateDir, hostConfig(t, hostFile), WithPodLookup(lookup, 0))
	var live []*api.PodSandbox
	for _, uid := range uids {
		pod, ctr := sandbox(t, uid, hostFile, nil, false)
		if _, _, err := first.CreateContainer(ctx, pod, ctr); err != nil {
			t.Fatal(err)
		}
		live = append(live, pod)
	}
	p := pluginAt(t, stateDir, hostConfig(t, hostFile), WithMaxPods(2))
	if _, err := p.Synchronize(ctx, live, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for uid := range p.running {
		got = append(got, uid)
	}
	if len(got) != 2 || p.running["u-a"].pod == nil || p.running["u-b"].pod == nil {
		t.Errorf("followed %v, want u-a and u-b", got)
	}
}

// TestSynchronizeCatchesUp: the node file changed while the plugin was
// away; the restarted plugin rewrites the followed pods' files at
// Synchronize, in place, without waiting for the next change.
func TestSynchronizeCatchesUp(t *testing.T) {
	ctx := context.Background()
	stateDir := filepath.Join(t.TempDir(), "state")
	lookup := WithPodLookup(fakeLookup{"u-1": {Name: "web", Namespace: "team", UID: "u-1", Policy: policy.Default}}, 0)
	first := pluginAt(t, stateDir, hostConfig(t, hostFile), lookup)
	pod, ctr := sandbox(t, "u-1", hostFile, nil, false)
	if _, _, err := first.CreateContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	file := PodFile(stateDir, "u-1")
	ino := inode(t, file)
	p := pluginAt(t, stateDir, hostConfig(t, "nameserver 10.233.0.7\n"))
	if _, err := p.Synchronize(ctx, []*api.PodSandbox{pod}, nil); err != nil {
		t.Fatal(err)
	}
	checkFile(t, file, Header("team", "web")+"nameserver 10.233.0.7\n")
	if got := inode(t, file); got != ino {
		t.Errorf("inode %d, want %d", got, ino)
	}
	if got := testutil.ToFloat64(p.m.updates); got != 1 {
		t.Errorf("live_updates_total = %v, want 1", got)
	}
}
