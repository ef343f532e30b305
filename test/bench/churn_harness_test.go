package bench

// TestChurn's own tests: they run without DNSCONFIGURER_BENCH, against a
// fake DNS zone on 127.0.0.1 and client-go's fake clientset.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func TestParseChurnSettings(t *testing.T) {
	def := churnSettings{services: 10000, headless: 200, rates: []int{10, 50}, churnFor: 30 * time.Second,
		queryQPS: 5000, queryFor: 10 * time.Second, populateQPS: 500, populate: populateAPI, starts: 2}
	for _, c := range []struct {
		name    string
		env     map[string]string
		want    churnSettings
		wantErr []string // substrings, one per bad variable
	}{
		{name: "defaults", want: def},
		{name: "all set", env: map[string]string{
			envChurnServices: "50000", envChurnHeadless: "0", envChurnRate: "5, 100", envChurnFor: "1m",
			envChurnQueryQPS: "0", envChurnQueryFor: "2s", envChurnPopulateQPS: "50", envChurnPopulate: "etcd",
			envChurnStarts: "4", envChurnControlNice: "10", envChurnQueryNice: "-5", envChurnPin: "1",
		}, want: churnSettings{services: 50000, headless: 0, rates: []int{5, 100}, churnFor: time.Minute,
			queryQPS: 0, queryFor: 2 * time.Second, populateQPS: 50, populate: populateEtcd, starts: 4, controlNice: 10,
			queryChild: true, queryNice: -5, pinned: true, pinCPU: 1}},
		{name: "pinned: the load in a process of its own at nice 0", env: map[string]string{envChurnPin: "0"},
			want: func() churnSettings { s := def; s.pinned, s.queryChild = true, true; return s }()},
		{name: "populate through the API", env: map[string]string{envChurnPopulate: "api"}, want: def},
		{name: "bad numbers", env: map[string]string{envChurnServices: "10k", envChurnHeadless: "-1", envChurnRate: "10,0", envChurnStarts: "0",
			envChurnControlNice: "20", envChurnQueryNice: "-21", envChurnPin: "-1"},
			wantErr: []string{`DNSCONFIGURER_CHURN_SERVICES="10k"`, `DNSCONFIGURER_CHURN_HEADLESS="-1"`, `DNSCONFIGURER_CHURN_RATE="10,0"`, `DNSCONFIGURER_CHURN_STARTS="0"`,
				`DNSCONFIGURER_CHURN_CONTROL_NICE="20"`, `DNSCONFIGURER_CHURN_QUERY_NICE="-21"`, `DNSCONFIGURER_CHURN_PIN="-1"`}},
		{name: "bad populate", env: map[string]string{envChurnPopulate: "etcd3"},
			wantErr: []string{`DNSCONFIGURER_CHURN_POPULATE="etcd3": want api or etcd`}},
		{name: "bad durations", env: map[string]string{envChurnFor: "30", envChurnQueryFor: "1h"},
			wantErr: []string{`DNSCONFIGURER_CHURN_FOR="30"`, `DNSCONFIGURER_CHURN_QUERY_FOR="1h"`}},
		{name: "query load past the generator's IDs", env: map[string]string{envChurnQueryQPS: "50000", envChurnQueryFor: "20s"},
			wantErr: []string{"DNSCONFIGURER_CHURN_QUERY_QPS=50000 for DNSCONFIGURER_CHURN_QUERY_FOR=20s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseChurnSettings(func(k string) string { return c.env[k] })
			if len(c.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("got %+v, want %+v", got, c.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, settings %+v", got)
			}
			if n := len(strings.Split(err.Error(), "\n")); n != len(c.wantErr) {
				t.Errorf("%d errors, want %d: %v", n, len(c.wantErr), err)
			}
			for _, w := range c.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

func TestParseStatCPU(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 150 and 50 ticks.
	const rest = " S 1 2 3 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 12 0 1000 2000000 500 18446744073709551615"
	for _, c := range []struct {
		name, stat string
		want       time.Duration
		wantErr    string
	}{
		{"plain", "123 (coredns)" + rest, 2 * time.Second, ""},
		{"spaces and parentheses in the name", "123 (a) b (c))" + rest, 2 * time.Second, ""},
		{"no name", "123 coredns" + rest, 0, "no ')'"},
		{"short", "123 (x) S 1 2", 0, "3 fields"},
		{"not a number", "123 (x) S 1 2 3 0 -1 4194560 100 0 0 0 x 50", 0, "invalid syntax"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(c.stat))
			if testkit.WantErr(t, err, c.wantErr) && got != c.want {
				t.Errorf("got %v; want %v", got, c.want)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	const status = "Name:\tcoredns\nVmPeak:\t 2000000 kB\nVmHWM:\t   90000 kB\nVmRSS:\t   80000 kB\nRssAnon:\t   48000 kB\nRssFile:\t   32000 kB\nThreads:\t12\n"
	got, err := parseStatus(strings.NewReader(status))
	if err != nil {
		t.Fatal(err)
	}
	if want := (usage{rssKiB: 80000, hwmKiB: 90000, anonKiB: 48000}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseStatus(strings.NewReader("RssAnon:\tlots kB\n")); err == nil || !strings.Contains(err.Error(), "RssAnon") {
		t.Errorf("error %v, want one naming RssAnon", err)
	}
}

// TestReadUsageSelf reads this test process: the figures are there and
// CPU time only grows.
func TestReadUsageSelf(t *testing.T) {
	before, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.rssKiB <= 0 || before.anonKiB <= 0 || before.anonKiB > before.rssKiB || before.hwmKiB < before.rssKiB {
		t.Errorf("usage %+v: want 0 < RssAnon <= VmRSS <= VmHWM", before)
	}
	deadline := time.Now().Add(5 * time.Second)
	after := before
	for after.cpu <= before.cpu && time.Now().Before(deadline) {
		for i := range 1_000_000 {
			_ = fmt.Sprint(i) // burn CPU until a clock tick is counted
		}
		if after, err = readUsage(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if after.cpu <= before.cpu {
		t.Errorf("CPU time %v then %v: not counted", before.cpu, after.cpu)
	}
}

// startHeld starts a shell that waits for its stdin to close, then runs
// script in a subshell: a child started after whatever the test does to
// the shell meanwhile. out is the script's output.
func startHeld(t *testing.T, script string) (cmd *exec.Cmd, stdin io.WriteCloser, out *bytes.Buffer) {
	t.Helper()
	cmd = exec.Command("sh", "-c", "read _; sh -c '"+script+"'")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out = new(bytes.Buffer)
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, out
}

// TestRenice: every thread of a process takes the nice value, the ones it
// starts later too.
func TestRenice(t *testing.T) {
	// The subshell's stat shows that a child started after the renice
	// inherits it.
	cmd, stdin, out := startHeld(t, "cut -d\\) -f2 /proc/self/stat")
	if err := renice(cmd.Process.Pid, 7); err != nil {
		t.Fatal(err)
	}
	if got, err := niceOf(cmd.Process.Pid); err != nil || got != 7 {
		t.Errorf("nice %d (%v), want 7", got, err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(out.String()); len(f) < 17 || f[16] != "7" {
		t.Errorf("the child's stat after the command %q: nice is not 7", out.String())
	}
	if err := renice(1<<30, 7); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

// TestSetAffinity: every thread of a process takes the CPUs, the ones it
// starts later too, and cpuPin sets a loaded process apart from the rest
// and puts them back.
func TestSetAffinity(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	first := -1
	for cpu := 0; first < 0 && cpu < 1024; cpu++ {
		if all.IsSet(cpu) {
			first = cpu
		}
	}
	var one unix.CPUSet
	one.Set(first)
	// The subshell's Cpus_allowed_list shows that a child started after
	// the change takes the CPUs.
	start := func() (*exec.Cmd, io.WriteCloser, *bytes.Buffer) {
		return startHeld(t, "grep Cpus_allowed_list /proc/self/status")
	}
	cpusOf := func(pid int) unix.CPUSet {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(pid, &set); err != nil {
			t.Fatal(err)
		}
		return set
	}
	cmd, stdin, out := start()
	if err := setAffinity(cmd.Process.Pid, &one); err != nil {
		t.Fatal(err)
	}
	if got := cpusOf(cmd.Process.Pid); got != one {
		t.Errorf("CPUs of the process: %d of them, want CPU %d only", got.Count(), first)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("Cpus_allowed_list:\t%d\n", first); out.String() != want {
		t.Errorf("the later child: %q, want %q", out.String(), want)
	}
	if err := setAffinity(1<<30, &one); err == nil {
		t.Error("no error for a process that does not exist")
	}

	if all.Count() < 2 {
		t.Logf("one CPU: cpuPin is not tried")
		return
	}
	if _, err := newCPUPin(1 << 20); err == nil || !strings.Contains(err.Error(), envChurnPin) {
		t.Errorf("a CPU this process may not run on: %v, want an error naming %s", err, envChurnPin)
	}
	pin, err := newCPUPin(first)
	if err != nil {
		t.Fatal(err)
	}
	loaded, lin, _ := start()
	other, oin, _ := start()
	if err := pin.apart(loaded.Process.Pid, []int{other.Process.Pid}); err != nil {
		t.Fatal(err)
	}
	rest := all
	rest.Clear(first)
	if got := cpusOf(loaded.Process.Pid); got != one {
		t.Errorf("the loaded process: %d CPUs, want CPU %d only", got.Count(), first)
	}
	if got := cpusOf(other.Process.Pid); got != rest {
		t.Errorf("the other process: %d CPUs (CPU %d: %v), want the %d but CPU %d", got.Count(), first, got.IsSet(first), rest.Count(), first)
	}
	if err := pin.back([]int{loaded.Process.Pid, other.Process.Pid}); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{loaded.Process.Pid, other.Process.Pid} {
		if got := cpusOf(pid); got != all {
			t.Errorf("process %d after back: %d CPUs, want all %d", pid, got.Count(), all.Count())
		}
	}
	lin.Close()
	oin.Close()
	loaded.Wait()
	other.Wait()
}

// startKilled starts name with args, killed when t ends, and returns its
// pid.
func startKilled(t *testing.T, name string, args ...string) int {
	t.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// TestSettle: an idle process settles within a few seconds; processes
// that spin do not settle before the limit.
func TestSettle(t *testing.T) {
	idle := startKilled(t, "sleep", "60")
	if took, ok := settle(t.Context(), []int{idle}, 10*time.Second); !ok {
		t.Errorf("an idle process did not settle in %v", took)
	}
	// Four spinners keep above a tenth of a core even on a loaded machine.
	pids := []int{idle}
	for range 4 {
		pids = append(pids, startKilled(t, "sh", "-c", "while :; do :; done"))
	}
	if took, ok := settle(t.Context(), pids, 3*time.Second); ok {
		t.Errorf("spinning processes settled after %v", took)
	}
}

func TestEndpointAddr(t *testing.T) {
	for n, want := range map[uint32]string{0: "10.128.0.1", 254: "10.128.0.255", 255: "10.128.1.0", 1 << 16: "10.129.0.1"} {
		if got := endpointAddr(n); got != want {
			t.Errorf("endpointAddr(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestPollInterval(t *testing.T) {
	for since, want := range map[time.Duration]time.Duration{
		0:                      250 * time.Microsecond,
		time.Millisecond:       250 * time.Microsecond,
		4 * time.Millisecond:   500 * time.Microsecond,
		40 * time.Millisecond:  5 * time.Millisecond,
		time.Second:            10 * time.Millisecond,
		100 * time.Millisecond: 10 * time.Millisecond,
	} {
		if got := pollInterval(since); got != want {
			t.Errorf("pollInterval(%v) = %v, want %v", since, got, want)
		}
	}
}

func TestSampleOf(t *testing.T) {
	var all []expect
	for i := range 1000 {
		all = append(all, expect{fmt.Sprintf("svc-%d.", i), []string{"10.96.0.1"}})
	}
	for i := range 20 {
		all = append(all, expect{fmt.Sprintf("hl-%d.", i), make([]string, endpointsPerSlice)})
	}
	s := sampleOf(all, 64)
	names := make([]string, len(s))
	for i, e := range s {
		names[i] = e.qname
	}
	for _, want := range []string{"svc-0.", "svc-999.", "hl-19."} {
		if !slices.Contains(names, want) {
			t.Errorf("sample %v lacks %s", names, want)
		}
	}
	if len(s) < 64 || len(s) > 66 {
		t.Errorf("%d in the sample, want 64 and the last of each kind", len(s))
	}
	if got := sampleOf(all[:10], 64); len(got) != 10 {
		t.Errorf("a sample of 64 of 10 has %d", len(got))
	}
}

// fakeZone answers A questions from a table the test changes, NXDOMAIN
// for a name not in it.
type fakeZone struct {
	mu      sync.Mutex
	names   map[string]fakeAnswer
	queries atomic.Int64
}

type fakeAnswer struct {
	addrs    []string
	rcode    int
	truncate bool
}

func startFakeZone(t *testing.T) (*fakeZone, string) {
	t.Helper()
	z := &fakeZone{names: map[string]fakeAnswer{}}
	return z, serveUDPTCP(t, z)
}

func (z *fakeZone) set(name string, a fakeAnswer) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.names[strings.ToLower(name)] = a
}

func (z *fakeZone) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	z.queries.Add(1)
	q := r.Question[0]
	z.mu.Lock()
	a, ok := z.names[strings.ToLower(q.Name)]
	z.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(r)
	switch {
	case !ok:
		m.Rcode = dns.RcodeNameError
	default:
		m.Rcode = a.rcode
		m.Truncated = a.truncate
		for _, ip := range a.addrs {
			m.Answer = append(m.Answer, aRecord(q.Name, net.ParseIP(ip)))
		}
	}
	if r.IsEdns0() != nil {
		m.SetEdns0(4096, false)
	}
	w.WriteMsg(m)
}

// addrs are n endpoint addresses from the first.
func addrs(first uint32, n int) []string {
	var out []string
	for i := range n {
		out = append(out, endpointAddr(first+uint32(i)))
	}
	slices.Sort(out)
	return out
}

func TestExpectCheck(t *testing.T) {
	e := expect{"hl-1.ns.svc.cluster.local.", addrs(0, endpointsPerSlice)}
	reply := func(rcode int, ips []string, truncated bool) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(e.qname, dns.TypeA)
		m.Response, m.Rcode, m.Truncated = true, rcode, truncated
		for _, ip := range ips {
			m.Answer = append(m.Answer, aRecord(e.qname, net.ParseIP(ip)))
		}
		return m
	}
	shuffled := slices.Clone(e.want)
	slices.Reverse(shuffled)
	for _, c := range []struct {
		name    string
		r       *dns.Msg
		wantErr string
	}{
		{"exact, any order", reply(dns.RcodeSuccess, shuffled, false), ""},
		{"nxdomain", reply(dns.RcodeNameError, nil, false), "rcode NXDOMAIN"},
		{"truncated", reply(dns.RcodeSuccess, e.want, true), "truncated"},
		{"one old address", reply(dns.RcodeSuccess, append(slices.Clone(e.want[1:]), endpointAddr(999)), false), "missing [" + e.want[0] + "], extra [" + endpointAddr(999) + "]"},
		{"one more", reply(dns.RcodeSuccess, append(slices.Clone(e.want), endpointAddr(999)), false), "51 A records, want 50"},
		{"none", reply(dns.RcodeSuccess, nil, false), "0 A records, want 50: missing [10.128.0.1 10.128.0.10 10.128.0.11 … 47 more], extra []"},
	} {
		t.Run(c.name, func(t *testing.T) {
			testkit.WantErr(t, e.check(c.r), c.wantErr)
		})
	}
}

// TestPollChange polls a fake zone whose answers change while it polls:
// the change counts as answered at the first right answer, never before,
// and a change never answered right is missed once the bound has passed.
func TestPollChange(t *testing.T) {
	z, addr := startFakeZone(t)
	dead := startDead(t)
	old, next := addrs(0, 3), addrs(1, 3) // one address moved
	const bound = 300 * time.Millisecond
	for _, c := range []struct {
		name    string
		server  string
		initial *fakeAnswer   // before the write
		after   time.Duration // when the right answer appears; 0: never
		final   fakeAnswer
		wantOK  bool
		wantErr string
	}{
		{name: "answered at once", initial: &fakeAnswer{addrs: next}, wantOK: true},
		{name: "new name answered later", after: 60 * time.Millisecond, final: fakeAnswer{addrs: next}, wantOK: true},
		{name: "moved address answered later", initial: &fakeAnswer{addrs: old}, after: 40 * time.Millisecond, final: fakeAnswer{addrs: next}, wantOK: true},
		{name: "never", wantErr: "rcode NXDOMAIN"},
		{name: "stale forever", initial: &fakeAnswer{addrs: old}, wantErr: "missing [10.128.0.4], extra [10.128.0.1]"},
		{name: "an extra address", initial: &fakeAnswer{addrs: append(slices.Clone(next), "10.128.9.9")}, wantErr: "extra [10.128.9.9]"},
		{name: "truncated", initial: &fakeAnswer{addrs: next, truncate: true}, wantErr: "truncated"},
		{name: "servfail", initial: &fakeAnswer{rcode: dns.RcodeServerFailure}, wantErr: "rcode SERVFAIL"},
		{name: "silent server", server: dead.Addr, wantErr: "no reply"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := strings.ReplaceAll(c.name, " ", "-") + ".ns.svc.cluster.local."
			if c.initial != nil {
				z.set(name, *c.initial)
			}
			server := addr
			if c.server != "" {
				server = c.server
			}
			written := time.Now()
			if c.after > 0 {
				timer := time.AfterFunc(c.after, func() { z.set(name, c.final) })
				defer timer.Stop()
			}
			before := z.queries.Load()
			r := pollChange(server, change{kind: kindEndpoint, expect: expect{name, next}, written: written}, bound)
			took := time.Since(written)
			if r.ok != c.wantOK || r.kind != kindEndpoint {
				t.Fatalf("ok %v kind %q, want ok %v (last: %s)", r.ok, r.kind, c.wantOK, r.last)
			}
			if server == addr {
				if got := z.queries.Load() - before; got != int64(r.polls) {
					t.Errorf("%d polls counted, the zone saw %d", r.polls, got)
				}
			}
			if c.wantOK {
				if r.lat < c.after || r.lat > took {
					t.Errorf("latency %v: want from %v (the change) to %v (the poll's end)", r.lat, c.after, took)
				}
				if c.after == 0 && r.polls != 1 {
					t.Errorf("%d polls for an answer there from the start", r.polls)
				}
				if c.after > 0 && (r.polls < 3 || r.polls > 100) {
					t.Errorf("%d polls in %v: want paced polling (3 to 100)", r.polls, r.lat)
				}
				return
			}
			if !strings.Contains(r.last, c.wantErr) {
				t.Errorf("last %q, want %q", r.last, c.wantErr)
			}
			if took < bound || took > bound+pollTimeout {
				t.Errorf("gave up after %v, want %v", took, bound)
			}
		})
	}
}

// TestDrive runs the churn driver against two fake zones: one programs
// every change 5 ms after its write, the other never programs every
// fifth; one write fails.
func TestDrive(t *testing.T) {
	fast, fastAddr := startFakeZone(t)
	lossy, lossyAddr := startFakeZone(t)
	var calls, done atomic.Int64
	write := func(ctx context.Context) (change, error) {
		seq := int(calls.Add(1) - 1)
		if seq == 3 {
			return change{}, errors.New("write refused")
		}
		name := fmt.Sprintf("c%d.test.", seq)
		ans := fakeAnswer{addrs: []string{endpointAddr(uint32(seq))}}
		time.AfterFunc(5*time.Millisecond, func() {
			fast.set(name, ans)
			if seq%5 != 0 {
				lossy.set(name, ans)
			}
		})
		return change{kind: kindService, expect: expect{name, ans.addrs}, written: time.Now(), done: func() { done.Add(1) }}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	res := drive(ctx, 100, []writeFunc{write, write}, []string{fastAddr, lossyAddr}, 200*time.Millisecond)
	if took := time.Since(start); took > 400*time.Millisecond+200*time.Millisecond+pollTimeout {
		t.Errorf("drive took %v: the last polls were not bounded", took)
	}
	n := int(calls.Load())
	if n < 10 || n > 41 || res.dropped != 0 {
		t.Errorf("%d writes in 400 ms at 100/s, %d dropped", n, res.dropped)
	}
	if res.writes != n-1 || len(res.writeErrs) != 1 || int(done.Load()) != res.writes {
		t.Fatalf("%d writes, %d errors, %d done; want %d, 1, %d", res.writes, len(res.writeErrs), done.Load(), n-1, n-1)
	}
	if res.took <= 0 || res.took > 450*time.Millisecond {
		t.Errorf("took %v", res.took)
	}
	if len(res.polls[0]) != res.writes || len(res.polls[1]) != res.writes {
		t.Fatalf("polls %d and %d, want %d each", len(res.polls[0]), len(res.polls[1]), res.writes)
	}
	if m := missed(res.polls[0]); len(m) != 0 {
		t.Errorf("%d missed on the fast zone, first: %s", len(m), m[0].last)
	}
	wantMissed := (n-1)/5 + 1 // seq 0, 5, 10, ... below n
	if m := missed(res.polls[1]); len(m) != wantMissed {
		t.Errorf("%d missed on the lossy zone, want %d", len(m), wantMissed)
	}
	for _, lat := range latencies(res.polls[0], "") {
		if lat < 5*time.Millisecond {
			t.Errorf("latency %v before the change was programmed", lat)
		}
	}
}

// TestDriveSlowLane: writes of one kind that hang (a slow API server)
// fill their lane and drop its ticks, while the other lane keeps its rate.
func TestDriveSlowLane(t *testing.T) {
	z, addr := startFakeZone(t)
	release := make(chan struct{})
	stuck := func(ctx context.Context) (change, error) {
		<-release
		return change{}, errors.New("released")
	}
	var seq atomic.Int64
	quick := func(ctx context.Context) (change, error) {
		name := fmt.Sprintf("q%d.test.", seq.Add(1))
		z.set(name, fakeAnswer{addrs: []string{"10.128.0.1"}})
		return change{kind: kindService, expect: expect{name, []string{"10.128.0.1"}}, written: time.Now()}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	time.AfterFunc(450*time.Millisecond, func() { close(release) })
	res := drive(ctx, 400, []writeFunc{stuck, quick}, []string{addr}, time.Second)
	if len(res.writeErrs) != maxWritesInFlight || res.dropped == 0 {
		t.Fatalf("%d stuck writes, %d ticks dropped; want %d and some", len(res.writeErrs), res.dropped, maxWritesInFlight)
	}
	// The lanes take the ticks in turn: the quick one had as many as the
	// stuck one, give or take one.
	if stuckTicks := maxWritesInFlight + res.dropped; res.writes < stuckTicks-1 || res.writes > stuckTicks+1 {
		t.Errorf("%d quick writes, the stuck lane had %d ticks", res.writes, stuckTicks)
	}
	if m := missed(res.polls[0]); len(m) != 0 {
		t.Errorf("%d quick changes missed", len(m))
	}
}

// fakeAPI is a fake clientset that allocates cluster IPs, fails the create
// of svc-7 once before it happens and that of svc-9 once after it
// happened (as a timeout the API server had already acted on).
func fakeAPI(t *testing.T) *fake.Clientset {
	t.Helper()
	client := fake.NewClientset()
	var next int
	failed := map[string]bool{}
	client.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		svc := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
		switch {
		case svc.Name == "svc-7" && !failed[svc.Name]:
			failed[svc.Name] = true
			return true, nil, apierrors.NewServiceUnavailable("etcd busy")
		case svc.Name == "svc-9" && !failed[svc.Name]:
			failed[svc.Name] = true
			svc = svc.DeepCopy()
			next++
			svc.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", next/256, next%256)
			if err := client.Tracker().Create(corev1.SchemeGroupVersion.WithResource("services"), svc, svc.Namespace); err != nil {
				t.Error(err)
			}
			return true, nil, apierrors.NewTimeoutError("request timed out", 1)
		}
		if svc.Spec.ClusterIP == "" {
			next++
			svc.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", next/256, next%256)
		}
		return false, nil, nil
	})
	return client
}

func TestPopulate(t *testing.T) {
	client := fakeAPI(t)
	set := churnSettings{services: 120, headless: 3}
	c, st, err := populate(t.Context(), client, set, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if c.namespaces != 2 || st.namespaces != 2 {
		t.Errorf("%d namespaces, want 2 for 123 Services", c.namespaces)
	}
	if st.retries != 2 {
		t.Errorf("%d writes tried again, want 2 (svc-7, svc-9)", st.retries)
	}
	ips := map[string]bool{}
	for i, e := range c.services {
		ns := fmt.Sprintf("churn-%d", i%2)
		if want := fmt.Sprintf("svc-%d.%s.svc.cluster.local.", i, ns); e.qname != want {
			t.Fatalf("service %d is %s, want %s", i, e.qname, want)
		}
		svc, err := client.CoreV1().Services(ns).Get(t.Context(), fmt.Sprintf("svc-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(e.want) != 1 || e.want[0] != svc.Spec.ClusterIP || ips[svc.Spec.ClusterIP] {
			t.Fatalf("service %d: want %v, the API has %s (seen before: %v)", i, e.want, svc.Spec.ClusterIP, ips[svc.Spec.ClusterIP])
		}
		ips[svc.Spec.ClusterIP] = true
	}
	seen := map[string]bool{}
	for i, h := range c.headless {
		svc, err := client.CoreV1().Services(h.slice.Namespace).Get(t.Context(), fmt.Sprintf("hl-%d", i), metav1.GetOptions{})
		if err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Fatalf("headless %d: %v, cluster IP %q", i, err, svc.Spec.ClusterIP)
		}
		if got := h.slice.Labels["kubernetes.io/service-name"]; got != svc.Name {
			t.Errorf("slice %s belongs to %q", h.slice.Name, got)
		}
		a := sliceAddrs(h.slice)
		if len(a) != endpointsPerSlice {
			t.Errorf("slice %s: %d ready addresses", h.slice.Name, len(a))
		}
		for _, ip := range a {
			if seen[ip] {
				t.Errorf("address %s twice", ip)
			}
			seen[ip] = true
		}
	}
	if all := c.expectations(); len(all) != 123 || all[122].qname != "hl-2.churn-0.svc.cluster.local." {
		t.Errorf("%d expectations, last %v", len(all), all[len(all)-1])
	}
	for k := 1; k < 10; k++ {
		if st.deciles[k] < st.deciles[k-1] || st.deciles[k] == 0 {
			t.Errorf("deciles %v", st.deciles)
		}
	}
	names, created := c.queryNames(), make([]string, len(c.services))
	for i, e := range c.services {
		created[i] = e.qname
	}
	if slices.Equal(names, created) {
		t.Error("query names in creation order, want them shuffled")
	}
	slices.Sort(names)
	slices.Sort(created)
	if !slices.Equal(names, created) {
		t.Errorf("query names are not the ClusterIP Services' names")
	}
}

// TestChurnWrites checks the churn's writes against the fake API: a new
// Service answers its allocated IP, a moved endpoint changes exactly one
// address to one never used, and a busy slice is not written again
// before its change is done.
func TestChurnWrites(t *testing.T) {
	client := fakeAPI(t)
	c, _, err := populate(t.Context(), client, churnSettings{services: 3, headless: 1}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	lanes := c.lanes(client)
	create, move := lanes[0], lanes[1]
	ch, err := create(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services("churn-0").Get(t.Context(), "new-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ch.kind != kindService || ch.qname != "new-0.churn-0.svc.cluster.local." || !slices.Equal(ch.want, []string{svc.Spec.ClusterIP}) || ch.done != nil {
		t.Errorf("change %+v, the API has %s", ch, svc.Spec.ClusterIP)
	}

	before := sliceAddrs(c.headless[0].slice)
	ch, err = move(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ch.kind != kindEndpoint || ch.qname != "hl-0.churn-0.svc.cluster.local." || ch.done == nil {
		t.Fatalf("change %+v", ch)
	}
	slice, err := client.DiscoveryV1().EndpointSlices("churn-0").Get(t.Context(), "hl-0-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ch.want, sliceAddrs(slice)) {
		t.Errorf("want %v, the API has %v", ch.want, sliceAddrs(slice))
	}
	var gone, added []string
	for _, a := range before {
		if !slices.Contains(ch.want, a) {
			gone = append(gone, a)
		}
	}
	for _, a := range ch.want {
		if !slices.Contains(before, a) {
			added = append(added, a)
		}
	}
	if len(gone) != 1 || len(added) != 1 || added[0] != endpointAddr(endpointsPerSlice) {
		t.Errorf("moved %v to %v, want one address to %s", gone, added, endpointAddr(endpointsPerSlice))
	}

	// The only slice is busy: the next move creates a Service instead.
	if ch2, err := move(t.Context()); err != nil || ch2.kind != kindService || ch2.qname != "new-1.churn-0.svc.cluster.local." {
		t.Errorf("change %+v (%v) while the slice is busy, want new-1", ch2, err)
	}
	ch.done()
	if ch3, err := move(t.Context()); err != nil || ch3.kind != kindEndpoint || slices.Equal(ch3.want, ch.want) {
		t.Errorf("change %+v (%v) once the slice is free, want another move", ch3, err)
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewServiceUnavailable("x"), true},
		{apierrors.NewTimeoutError("x", 1), true},
		{apierrors.NewTooManyRequests("x", 1), true},
		{apierrors.NewInternalError(errors.New("x")), true},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, true},
		{apierrors.NewAlreadyExists(corev1.Resource("services"), "x"), false},
		{apierrors.NewBadRequest("x"), false},
		{apierrors.NewForbidden(corev1.Resource("services"), "x", errors.New("no")), false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// goodChurn is a report of two rates where dnsconfigurer is slow and
// CoreDNS fast, every change answered.
func goodChurn() *churnReport {
	polls := func(base time.Duration, n int) []pollResult {
		var out []pollResult
		for i := range n {
			kind := kindService
			if i%2 == 1 {
				kind = kindEndpoint
			}
			out = append(out, pollResult{kind: kind, ok: true, lat: base + time.Duration(i)*base/time.Duration(n), polls: 2 + i%3})
		}
		return out
	}
	q := func(p99 time.Duration, lost int) queryStats {
		return queryStats{sent: 50000, answered: 50000 - lost, lost: lost, p50: p99 / 4, p99: p99, collections: lost % 2}
	}
	r := &churnReport{
		set: churnSettings{services: 10000, headless: 200, rates: []int{10, 50}, churnFor: 30 * time.Second,
			queryQPS: 5000, queryFor: 10 * time.Second, populateQPS: 500},
		populate: populateStats{services: 10000, headless: 200, namespaces: 100, servicesTook: 50 * time.Second,
			headlessTook: 2 * time.Second, deciles: [10]time.Duration{4e9, 8e9, 13e9, 18e9, 23e9, 28e9, 33e9, 38e9, 44e9, 50e9}, retries: 1},
		phases: []phaseRun{
			{rate: 10, writes: 300, took: 30 * time.Second, loadedWrites: 200},
			{rate: 50, writes: 1500, took: 30 * time.Second, loadedWrites: 1000, dropped: 12},
		},
		loadAvg: "2.10 1.50 1.00",
	}
	r.servers = []serverRun{
		{name: "dnsconfigurer", starts: []time.Duration{2450 * time.Millisecond, 2650 * time.Millisecond},
			sync: usage{anonKiB: 48 << 10}, rest: 450 * time.Microsecond, end: usage{anonKiB: 94 << 10, hwmKiB: 160 << 10},
			baseQuery: q(360*time.Microsecond, 0),
			phases: []serverPhase{
				{polls: polls(190*time.Millisecond, 300), cpu: 18 * time.Second, gc: gcFigures{collections: 9, allocated: 300 * 80 << 10},
					query: q(12*time.Millisecond, 3), loaded: polls(200*time.Millisecond, 200)},
				{polls: polls(210*time.Millisecond, 1500), cpu: 18450 * time.Millisecond, gc: gcFigures{collections: 30, allocated: 1500 * 60 << 10},
					query: q(12300*time.Microsecond, 0), loaded: polls(220*time.Millisecond, 1000)},
			}},
		{name: "coredns", starts: []time.Duration{1640 * time.Millisecond, 1240 * time.Millisecond},
			sync: usage{anonKiB: 47 << 10}, rest: 150 * time.Microsecond, end: usage{anonKiB: 52 << 10, hwmKiB: 90 << 10},
			baseQuery: q(600*time.Microsecond, 0),
			phases: []serverPhase{
				{polls: polls(time.Millisecond, 300), cpu: 240 * time.Millisecond, gc: gcFigures{collections: 1, allocated: 300 * 20 << 10},
					query: q(6300*time.Microsecond, 0), loaded: polls(time.Millisecond, 200)},
				{polls: polls(time.Millisecond, 1500), cpu: 1050 * time.Millisecond, gc: gcFigures{collections: 4, allocated: 1500 * 20 << 10},
					query: q(6300*time.Microsecond, 0), loaded: polls(time.Millisecond, 1000)},
			}},
	}
	r.control = &serverRun{name: "control", baseQuery: q(300*time.Microsecond, 0),
		phases: []serverPhase{{query: q(900*time.Microsecond, 0)}, {query: q(1200*time.Microsecond, 1)}}}
	return r
}

func TestChurnTable(t *testing.T) {
	got := goodChurn().table()
	path := filepath.Join("testdata", "churn-table.md")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestChurnTable ./test/bench/ -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("table differs from %s (-update rewrites it):\n%s", path, got)
	}
}

func TestChurnViolations(t *testing.T) {
	wantViolations(t, goodChurn, (*churnReport).violations, []spoiled[*churnReport]{
		{"missed", func(r *churnReport) {
			r.servers[0].phases[1].polls[7] = pollResult{kind: kindEndpoint, polls: 900, last: "rcode NXDOMAIN"}
		}, "dnsconfigurer, churn 50/s: 1 of 1500 changes not answered within 30s, first a moved endpoint: rcode NXDOMAIN"},
		{"missed under load", func(r *churnReport) {
			r.servers[1].phases[0].loaded[0] = pollResult{kind: kindService, last: "no reply within 1s"}
		}, "coredns, churn 10/s under the query load: 1 of 200 changes"},
		{"write failed", func(r *churnReport) {
			r.phases[0].writeErrs = []error{errors.New("etcdserver: request timed out")}
		}, "churn 10/s: 1 writes failed, first: etcdserver: request timed out"},
		{"wrong rcode under churn", func(r *churnReport) { r.servers[0].phases[0].query.wrong = 4 }, "dnsconfigurer, churn 10/s: 4 of 50000 queries"},
		{"wrong rcode at rest", func(r *churnReport) { r.servers[1].baseQuery.wrong = 1 }, "coredns, no churn: 1 of 50000"},
		{"control: wrong rcode under churn", func(r *churnReport) { r.control.phases[1].query.wrong = 2 }, "control, churn 50/s: 2 of 50000 queries"},
		{"control: wrong rcode at rest", func(r *churnReport) { r.control.baseQuery.wrong = 3 }, "control, no churn: 3 of 50000"},
	})
}

func TestQueryStatsOf(t *testing.T) {
	r := floodResult{sent: 103, lost: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}}
	for i := range 100 {
		rcode := dns.RcodeSuccess
		if i == 50 {
			rcode = dns.RcodeServerFailure
		}
		r.replies = append(r.replies, floodReply{sent: time.Duration(i) * time.Millisecond, lat: time.Duration(100-i) * time.Millisecond, rcode: rcode})
	}
	want := queryStats{sent: 103, answered: 99, wrong: 1, lost: 3, p50: 50 * time.Millisecond, p99: 99 * time.Millisecond}
	if got := queryStatsOf(r); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestCountFormats(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int]string{200: "200", 10000: "10k", 100000: "100k", 12345: "12,345"} {
		if got := shortCount(n); got != want {
			t.Errorf("shortCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestPairedP99: the interval holds the p99 ratio of the polls and
// narrows to it when every change keeps the same ratio; first counts the
// changes answered strictly first.
func TestPairedP99(t *testing.T) {
	polls := func(lats ...time.Duration) []pollResult {
		out := make([]pollResult, len(lats))
		for i, l := range lats {
			out[i] = pollResult{ok: true, lat: l}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var spread, half []time.Duration
	for range 400 {
		d := time.Duration(500+rng.IntN(5000)) * time.Microsecond
		spread = append(spread, d)
		half = append(half, d/2)
	}
	other := slices.Clone(spread)
	rng.Shuffle(len(other), func(i, j int) { other[i], other[j] = other[j], other[i] })

	if lo, hi, first, n := pairedP99(polls(half...), polls(spread...)); lo != 0.5 || hi != 0.5 || first != 1 || n != 400 {
		t.Errorf("every change twice as fast: %.3f-%.3f, first %.2f of %d; want 0.5-0.5, first 1 of 400", lo, hi, first, n)
	}
	if lo, hi, first, _ := pairedP99(polls(spread...), polls(spread...)); lo != 1 || hi != 1 || first != 0 {
		t.Errorf("the same latencies: %.3f-%.3f, first %.2f; want 1-1, first 0 (a tie is not first)", lo, hi, first)
	}
	lo, hi, first, _ := pairedP99(polls(other...), polls(spread...))
	if lo > 1 || hi < 1 || lo >= hi || first < 0.4 || first > 0.6 {
		t.Errorf("the same latencies shuffled: %.3f-%.3f, first %.2f; want an interval around 1 and about half first", lo, hi, first)
	}
	// A change one server missed is left out of both.
	a, b := polls(half...), polls(spread...)
	a[0].ok = false
	if _, _, _, n := pairedP99(a, b); n != 399 {
		t.Errorf("one change missed: %d pairs, want 399", n)
	}
	if _, _, _, n := pairedP99(nil, b); n != 0 || intervalCell(nil, b) != "–" {
		t.Errorf("no pairs: n %d, cell %q", n, intervalCell(nil, b))
	}
}

// TestThreadsCPU: a process that spins gathers CPU time in its threads'
// schedstat, one that sleeps next to none, and one that does not exist is
// an error.
func TestThreadsCPU(t *testing.T) {
	spin, idle := startKilled(t, "sh", "-c", "while :; do :; done"), startKilled(t, "sleep", "60")
	testkit.WaitFor(t, 10*time.Second, func() error {
		if d, err := threadsCPU(spin); err != nil || d < 100*time.Millisecond {
			return fmt.Errorf("the spinning process: %v (%v), want 100 ms or more", d, err)
		}
		return nil
	})
	if d, err := threadsCPU(idle); err != nil || d > 50*time.Millisecond {
		t.Errorf("the sleeping process: %v (%v), want under 50 ms", d, err)
	}
	if _, err := threadsCPU(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

// TestReadGC: the collector counters of a Go collector's exposition (as
// both servers export) rise with a collection and with allocations, and an
// exposition without them is an error.
func TestReadGC(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer hs.Close()
	s := &server{name: "this process", metrics: hs.URL}
	before, err := readGC(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 64<<10))
	}
	goruntime.KeepAlive(keep)
	goruntime.GC()
	after, err := readGC(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	d := after.minus(before)
	if d.collections < 1 || d.allocated < 64*64<<10 {
		t.Errorf("after 4 MiB allocated and a collection: %+v", d)
	}
	empty := httptest.NewServer(promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}))
	defer empty.Close()
	if _, err := readGC(t.Context(), &server{name: "empty", metrics: empty.URL}); err == nil {
		t.Error("no error for an exposition without the counters")
	}
}
