package bench

// Tests of TestScale's harness; they run without DNSCONFIGURER_BENCH.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
)

func TestScaleLine(t *testing.T) {
	for _, c := range []struct{ measure, ours, coredns, want string }{
		{"steady RSS", fmtMiB(40 * 1024), fmtMiB(81*1024 + 512), "scale: steady RSS: ours 40.0 MiB coredns 81.5 MiB"},
		{"change answered after API server return", fmtSeconds(1234 * time.Millisecond), fmtSeconds(-1),
			"scale: change answered after API server return: ours 1.23 s coredns not answered"},
		{"OOM kills under 170Mi", fmtCount(0, "kills"), fmtCount(3, "kills"), "scale: OOM kills under 170Mi: ours 0 kills coredns 3 kills"},
		{"peak RSS during relist", fmtMiB(-1), fmtMiB(0), "scale: peak RSS during relist: ours n/a coredns 0.0 MiB"},
	} {
		if got := scaleLine(c.measure, c.ours, c.coredns); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}

func TestParseCgroupEvents(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     map[string]int64
		wantErr  bool
	}{
		{name: "v2 memory.events", in: "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n",
			want: map[string]int64{"low": 0, "high": 0, "max": 12, "oom": 2, "oom_kill": 2, "oom_group_kill": 0}},
		{name: "v1 memory.oom_control", in: "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
			want: map[string]int64{"oom_kill_disable": 0, "under_oom": 0, "oom_kill": 1}},
		{name: "blank lines", in: "\noom_kill 4\n\n", want: map[string]int64{"oom_kill": 4}},
		{name: "not a number", in: "oom_kill x\n", wantErr: true},
		{name: "three fields", in: "oom_kill 1 2\n", wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseCgroupEvents(strings.NewReader(c.in))
			if c.wantErr {
				if err == nil {
					t.Fatalf("no error, got %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestMemCgroupOOMKills(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		dir := t.TempDir()
		cg := &memCgroup{dir: dir, v2: v2}
		file := "memory.oom_control"
		if v2 {
			file = "memory.events"
		}
		if got := filepath.Base(cg.eventsFile()); got != file {
			t.Errorf("v2 %v: events file %s, want %s", v2, got, file)
		}
		if _, err := cg.oomKills(); err == nil {
			t.Errorf("v2 %v: no error without the file", v2)
		}
		if err := os.WriteFile(cg.eventsFile(), []byte("under_oom 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := cg.oomKills(); err == nil || !strings.Contains(err.Error(), "no oom_kill") {
			t.Errorf("v2 %v: without a counter: %v", v2, err)
		}
		if err := os.WriteFile(cg.eventsFile(), []byte("oom 3\noom_kill 2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if n, err := cg.oomKills(); err != nil || n != 2 {
			t.Errorf("v2 %v: %d, %v; want 2", v2, n, err)
		}
	}
}

// TestMemCgroupPageCache: the page cache charged is v2's file and v1's
// cache in memory.stat; -1 without the file or the key.
func TestMemCgroupPageCache(t *testing.T) {
	for _, c := range []struct {
		v2   bool
		stat string
		want int64
	}{
		{v2: true, stat: "anon 1000\nfile 4096\nkernel 12\n", want: 4096},
		{v2: false, stat: "cache 8192\nrss 1000\ntotal_cache 9000\n", want: 8192},
		{v2: true, stat: "anon 1000\n", want: -1},
		{v2: false, stat: "", want: -1},
	} {
		cg := &memCgroup{dir: t.TempDir(), v2: c.v2}
		if got := cg.pageCacheBytes(); got != -1 {
			t.Errorf("v2 %v: %d without memory.stat, want -1", c.v2, got)
		}
		if err := os.WriteFile(filepath.Join(cg.dir, "memory.stat"), []byte(c.stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := cg.pageCacheBytes(); got != c.want {
			t.Errorf("v2 %v, memory.stat %q: %d, want %d", c.v2, c.stat, got, c.want)
		}
	}
}

func TestParseProcCgroup(t *testing.T) {
	for _, c := range []struct{ in, v2, v1 string }{
		{in: "0::/user.slice/session-1.scope\n", v2: "/user.slice/session-1.scope"},
		{in: "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n", v2: "/", v1: "/process_api/abc"},
		{in: "5:cpu,memory:/x\n", v1: "/x"},
	} {
		v2, v1, err := parseProcCgroup(c.in)
		if err != nil || v2 != c.v2 || v1 != c.v1 {
			t.Errorf("%q: %q, %q, %v; want %q, %q", c.in, v2, v1, err, c.v2, c.v1)
		}
	}
	if _, _, err := parseProcCgroup("garbage"); err == nil {
		t.Error("no cgroup: no error")
	}
}

// TestInCgroup runs a command through inCgroup's shell with a file for
// cgroup.procs: the shell writes its pid, which is the command's.
func TestInCgroup(t *testing.T) {
	if bin, args := inCgroup("", "/bin/echo", "a"); bin != "/bin/echo" || !slices.Equal(args, []string{"a"}) {
		t.Errorf("without a cgroup: %s %v", bin, args)
	}
	procs := filepath.Join(t.TempDir(), "cgroup.procs")
	s := startScaleServer(t, "sh", t.TempDir(), "", "", []string{"SCALE_TEST=x y"}, procs, "/bin/sh", "-c", `echo "$$ $SCALE_TEST"`)
	<-s.exited
	if s.waitErr != nil {
		t.Fatal(s.waitErr)
	}
	written, _ := os.ReadFile(procs)
	out, _ := os.ReadFile(s.logPath)
	want := fmt.Sprintf("%d x y", s.cmd.Process.Pid)
	if strings.TrimSpace(string(written)) != fmt.Sprint(s.cmd.Process.Pid) || strings.TrimSpace(string(out)) != want {
		t.Errorf("cgroup.procs %q, output %q; want the pid %d and %q", written, out, s.cmd.Process.Pid, want)
	}
}

func TestResetHWM(t *testing.T) {
	pid := startKilled(t, "sleep", "30")
	if err := resetHWM(pid); err != nil {
		t.Skipf("clear_refs: %v", err)
	}
	u, err := readUsage(pid)
	if err != nil {
		t.Fatal(err)
	}
	if u.hwmKiB > u.rssKiB+64 {
		t.Errorf("VmHWM %d KiB after the reset, VmRSS %d KiB", u.hwmKiB, u.rssKiB)
	}
}

func TestRSSSamples(t *testing.T) {
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	s := &rssSampler{samples: map[int][]rssSample{7: {{at(0), 10}, {at(1), 30}, {at(2), 20}, {at(3), 50}}}}
	got := s.between(7, at(1), at(3))
	if len(got) != 2 || peakKiB(got) != 30 || medianKiB(got) != 30 {
		t.Errorf("[1 s, 3 s): %v, peak %d, median %d", got, peakKiB(got), medianKiB(got))
	}
	if all := s.between(7, at(0), at(9)); peakKiB(all) != 50 || medianKiB(all) != 30 {
		t.Errorf("all: peak %d, median %d", peakKiB(all), medianKiB(all))
	}
	if peakKiB(nil) != -1 || medianKiB(nil) != -1 || len(s.between(8, at(0), at(9))) != 0 {
		t.Error("no samples: want -1 and none")
	}
	live := startRSSSampler(10*time.Millisecond, os.Getpid())
	time.Sleep(50 * time.Millisecond)
	live.stop()
	if n := len(live.between(os.Getpid(), t0, time.Now())); n < 2 {
		t.Errorf("%d samples of this process in 50 ms at 10 ms", n)
	}
}

func TestCountFailures(t *testing.T) {
	t0 := time.Now()
	fs := []lookupFailure{{at: t0, qname: "a."}, {at: t0.Add(time.Second), qname: "b."}, {at: t0.Add(2 * time.Second), qname: "c."},
		{at: t0.Add(3 * time.Second), qname: "d."}, {at: t0.Add(4 * time.Second), qname: "e."}}
	n, ex := countFailures(fs, t0.Add(time.Second), t0.Add(5*time.Second))
	if n != 4 || len(ex) != 3 || ex[0].qname != "b." {
		t.Errorf("got %d, examples %v; want 4, the first three from b.", n, ex)
	}
	if n, _ := countFailures(fs, t0.Add(10*time.Second), t0.Add(11*time.Second)); n != 0 {
		t.Errorf("outside: %d", n)
	}
}

// TestLookupLoad counts every failed lookup: a wrong answer, an error
// rcode, a truncated reply, and no reply at all.
func TestLookupLoad(t *testing.T) {
	z, addr := startFakeZone(t)
	z.set("good.test.", fakeAnswer{addrs: []string{"192.0.2.1"}})
	z.set("wrong.test.", fakeAnswer{addrs: []string{"192.0.2.9"}})
	z.set("fail.test.", fakeAnswer{rcode: dns.RcodeServerFailure})
	z.set("cut.test.", fakeAnswer{addrs: []string{"192.0.2.1"}, truncate: true})
	names := []expect{{"good.test.", []string{"192.0.2.1"}}, {"wrong.test.", []string{"192.0.2.1"}},
		{"fail.test.", []string{"192.0.2.1"}}, {"cut.test.", []string{"192.0.2.1"}}}
	start := time.Now()
	l, err := startLookupLoad(addr, names, 200, 4, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	l.stop()
	asked := l.asked.Load()
	n, _ := l.failedBetween(start, time.Now())
	byName := map[string]int{}
	for _, f := range l.failures {
		byName[f.qname]++
	}
	if asked < 40 || byName["good.test."] != 0 || byName["wrong.test."] == 0 || byName["fail.test."] == 0 || byName["cut.test."] == 0 {
		t.Errorf("%d asked, failures by name %v", asked, byName)
	}
	if int(n) != len(l.failures) || int(asked) < 4*byName["wrong.test."] {
		t.Errorf("failedBetween %d of %d asked, failures %v", n, asked, byName)
	}

	// A server that never answers: every lookup fails, and the load
	// still asks at its rate.
	dead := startDead(t)
	l, err = startLookupLoad(dead.Addr, names[:1], 40, 4, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	l.stop()
	n, ex := l.failedBetween(start, time.Now())
	if n < 10 || n != l.asked.Load() || !strings.Contains(ex[0].reason, "no reply within 50ms") {
		t.Errorf("silent server: %d of %d failed, %v", n, l.asked.Load(), ex)
	}
	if _, err := startLookupLoad(addr, nil, 10, 1, time.Second); err == nil {
		t.Error("no names: no error")
	}
}

func TestStormOf(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	reqs := []stormRequest{
		{"a", ms(-500)}, // before the return: not counted
		{"a", ms(100)}, {"a", ms(150)}, {"b", ms(120)}, {"c", ms(130)}, {"d", ms(2000)}, {"d", ms(2050)},
	}
	s := stormOf(5, reqs)
	if len(s.firsts) != 4 || s.missing != 1 || len(s.requests) != 6 {
		t.Fatalf("storm %+v: want 4 of 5 back and 6 requests", s)
	}
	if s.peakPer100 != 4 || s.peakPerSec != 4 || s.last != ms(2000) || s.p50 != ms(120) || s.p90 != ms(2000) {
		t.Errorf("peak %d/100 ms, %d/s, p50 %v, p90 %v, last %v", s.peakPer100, s.peakPerSec, s.p50, s.p90, s.last)
	}
	// The last requests: a 150, b 120, c 130, d 2050.
	if s.lastP50 != ms(130) || s.lastP90 != ms(2050) || s.lastMax != ms(2050) {
		t.Errorf("last requests p50 %v, p90 %v, last %v; want 130ms, 2.05s, 2.05s", s.lastP50, s.lastP90, s.lastMax)
	}
	if !strings.Contains(s.String(), "4 of 5 watchers back") {
		t.Errorf("String: %s", s)
	}
	if got := peakIn([]time.Duration{0, ms(99), ms(100), ms(199), ms(200)}, ms(100)); got != 2 {
		t.Errorf("peakIn: %d, want 2", got)
	}
}

func TestParseAudit(t *testing.T) {
	zero := time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)
	line := func(id, stage, verb, user, res string, at time.Duration) string {
		return fmt.Sprintf(`{"kind":"Event","auditID":%q,"stage":%q,"verb":%q,"user":{"username":%q},"objectRef":{"resource":%q},"requestReceivedTimestamp":%q}`,
			id, stage, verb, user, res, zero.Add(at).Format(time.RFC3339Nano))
	}
	log := strings.Join([]string{
		line("1", "ResponseComplete", "get", "nodelocal-0", "nodes", -time.Minute), // before from
		line("2", "ResponseStarted", "watch", "nodelocal-0", "endpointslices", 1500*time.Millisecond),
		line("2", "ResponseComplete", "watch", "nodelocal-0", "endpointslices", 1500*time.Millisecond), // the same request
		line("3", "ResponseComplete", "list", "nodelocal-1", "endpointslices", -100*time.Millisecond),
	}, "\n")
	reqs, verbs, err := parseAudit(bufio.NewScanner(strings.NewReader(log)), zero.Add(-time.Second), zero)
	if err != nil {
		t.Fatal(err)
	}
	want := []stormRequest{{"nodelocal-0", 1500 * time.Millisecond}, {"nodelocal-1", -100 * time.Millisecond}}
	if !slices.Equal(reqs, want) || verbs["watch endpointslices"] != 1 || verbs["list endpointslices"] != 1 || len(verbs) != 2 {
		t.Errorf("got %v %v, want %v", reqs, verbs, want)
	}
	if _, _, err := parseAudit(bufio.NewScanner(strings.NewReader("{")), zero, zero); err == nil {
		t.Error("a broken line: no error")
	}
}

func TestScaleCluster(t *testing.T) {
	if _, err := newScaleCluster(2, 30, 10, 5, 2, 3); err == nil {
		t.Error("two nodes: no error")
	}
	c, err := newScaleCluster(30, 10, 60, 5, 6, 7)
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]int{}
	for n := range c.nodes {
		zones[c.zoneOf(n)]++
	}
	if len(zones) != 3 || zones["zone-a"] != 10 || zones["zone-c"] != 10 {
		t.Errorf("zones %v, want a third each", zones)
	}
	var headless, td int
	pods := map[int]bool{}
	for i := range c.services {
		if c.headless(i) {
			headless++
			if c.clusterIPs[i] != "" {
				t.Errorf("headless %d has a cluster IP", i)
			}
		}
		if c.trafficDistribution(i) {
			td++
		}
		ks := c.podsOf(i)
		if len(ks) != 5 {
			t.Errorf("service %d: %d pods, want 5", i, len(ks))
		}
		zs := map[string]bool{}
		for _, k := range ks {
			pods[k] = true
			zs[c.zoneOf(k/c.podsPerNode)] = true
		}
		if len(zs) < 2 {
			t.Errorf("service %d: pods in %v only", i, zs)
		}
	}
	if headless != 12 || td != 6 || len(pods) != c.pods() {
		t.Errorf("%d headless, %d with trafficDistribution, %d pods backing Services; want 12, 6, %d", headless, td, len(pods), c.pods())
	}
	names := c.queryNames(40)
	kinds := map[string]int{}
	for _, e := range names {
		switch {
		case strings.Contains(e.qname, ".pod."):
			kinds["pod"]++
		case strings.HasPrefix(e.qname, "hl-"):
			kinds["headless"]++
			if len(e.want) != 5 {
				t.Errorf("%s: %v", e.qname, e.want)
			}
		default:
			kinds["clusterIP"]++
		}
	}
	if kinds["pod"] != 10 || kinds["headless"] < 10 || kinds["clusterIP"] < 10 {
		t.Errorf("query names by kind %v", kinds)
	}
	if e := c.podExpect(3); e.qname != "10-128-0-4.scale-3.pod.cluster.local." || e.want[0] != "10.128.0.4" {
		t.Errorf("pod 3: %+v", e)
	}
}

// TestScaleObjects decodes the stored form of each kind the populate
// writes and checks what the servers read of it.
func TestScaleObjects(t *testing.T) {
	c, err := newScaleCluster(30, 10, 60, 5, 6, 7)
	if err != nil {
		t.Fatal(err)
	}
	created := metav1.Now().Rfc3339Copy()
	slice := c.scaleSlice(0, created)
	objs := append(c.scaleService(0, created), c.scaleNode(4, created), c.scalePod(3, created), slice, c.scaleService(4, created)[0])
	for _, o := range objs {
		kv, err := scaleKV(o)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := scheme.Codecs.UniversalDeserializer().Decode(kv.value, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", kv.key, err)
		}
		got.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		if !apiequality.Semantic.DeepEqual(got, o) {
			t.Errorf("%s: decoded %s", kv.key, asJSON(got))
		}
		want := map[string]string{"Pod": "/registry/pods/scale-3/svc-3-0", "Node": "/registry/minions/node-4",
			"Service": "/registry/services/specs/scale-", "IPAddress": "/registry/ipaddresses/10.", "EndpointSlice": "/registry/endpointslices/scale-0/svc-0-abcde"}
		kind := fmt.Sprintf("%T", o)
		kind = kind[strings.LastIndex(kind, ".")+1:]
		if !strings.HasPrefix(kv.key, want[kind]) {
			t.Errorf("%s stored at %s", kind, kv.key)
		}
	}
	pod := c.scalePod(3, created)
	if pod.Spec.NodeName != "node-0" || pod.Status.PodIP != "10.128.0.4" || pod.Labels["app"] != "svc-3" {
		t.Errorf("pod 3: node %s, IP %s, labels %v", pod.Spec.NodeName, pod.Status.PodIP, pod.Labels)
	}
	if n := c.scaleNode(25, created); n.Labels["topology.kubernetes.io/zone"] != "zone-c" {
		t.Errorf("node 25: labels %v", n.Labels)
	}
	if len(slice.Endpoints) != 5 || slice.Endpoints[0].Hints == nil || *slice.Endpoints[0].Zone != "zone-a" || slice.Labels[discoveryv1.LabelServiceName] != "svc-0" {
		t.Errorf("slice of svc-0: %s", asJSON(slice))
	}
	if svc := c.scaleService(0, created); len(svc) != 2 || svc[0].(*corev1.Service).Spec.TrafficDistribution == nil {
		t.Errorf("svc-0: %s", asJSON(svc))
	}
	if hl := c.scaleService(4, created); len(hl) != 1 || hl[0].(*corev1.Service).Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("hl-4: %s", asJSON(hl))
	}
	e, out := c.outageService(5, created)
	if len(out) != 2 || out[1].(*networkingv1.IPAddress).Name != e.want[0] || e.qname != "out-5.scale-5.svc.cluster.local." {
		t.Errorf("outage service: %+v %s", e, asJSON(out))
	}
	if e2, _ := c.outageService(6, created); e2.want[0] == e.want[0] || slices.Contains(c.clusterIPs, e2.want[0]) {
		t.Errorf("outage services share %s, or it is a Service's", e2.want[0])
	}
}

// TestScalePopulate writes a small cluster through a fake etcd and checks
// what the API lists of it.
func TestScalePopulate(t *testing.T) {
	client := fake.NewClientset()
	w := &scaleFakeEtcd{client: client}
	c, err := newScaleCluster(9, 4, 12, 4, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.populate(context.Background(), client, w, t.Logf); err != nil {
		t.Fatal(err)
	}
	got, err := c.countServed(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}
	if got["nodes"] != 9 || got["pods"] != 36 || got["services"] != 12 || got["endpointslices"] != 12 {
		t.Errorf("listed %v", got)
	}
	ns, _ := client.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if len(ns.Items) != 5 {
		t.Errorf("%d namespaces, want 5", len(ns.Items))
	}
	if e, objs := c.outageService(1, metav1.Now()); putObjects(t.Context(), w, objs) != nil {
		t.Errorf("outage service %s not written", e.qname)
	}
	if w.txns < 4 || w.keys != 9+12+9+12+36+2 {
		t.Errorf("%d transactions, %d keys; want 4 kinds in more, and 80 keys (9 IPAddress objects)", w.txns, w.keys)
	}
}

// scaleFakeEtcd is a kvWriter that decodes what it is given into a fake
// clientset.
type scaleFakeEtcd struct {
	client     *fake.Clientset
	mu         sync.Mutex
	txns, keys int
}

func (f *scaleFakeEtcd) create(_ context.Context, kvs []keyValue) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.txns++
	for _, kv := range kvs {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(kv.value, nil, nil)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", kv.key, err)
		}
		if want, _ := scaleKV(obj); want.key != kv.key {
			return 0, fmt.Errorf("object of %s stored at %s", want.key, kv.key)
		}
		if err := f.client.Tracker().Add(obj); err != nil {
			return 0, err
		}
		f.keys++
	}
	return int64(f.txns), nil
}
