package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

const (
	envBench   = "DNSCONFIGURER_BENCH"
	envCoreDNS = "DNSCONFIGURER_COREDNS"
	envTestbin = "DNSCONFIGURER_TESTBIN"
	envArgs    = "DNSCONFIGURER_SERVE_ARGS"
)

// requireBench skips t unless the benchmarks were asked for.
func requireBench(t *testing.T) {
	t.Helper()
	if os.Getenv(envBench) != "1" {
		t.Skipf("set %s=1 to run the side-by-side benchmarks (about a minute each, real processes on 127.0.0.1)", envBench)
	}
}

// sideBySide runs run against dnsconfigurer and then CoreDNS, each in a
// subtest. dnsconfigurer's report must have no violations; table logs
// both reports.
func sideBySide[R any](t *testing.T, run func(t *testing.T, name string) R, violations func(R) []string, table func([]R) string) {
	t.Helper()
	var reports []R
	for _, name := range []string{"dnsconfigurer", "coredns"} {
		t.Run(name, func(t *testing.T) {
			rep := run(t, name)
			reports = append(reports, rep)
			if name == "dnsconfigurer" {
				for _, v := range violations(rep) {
					t.Error(v)
				}
			}
		})
	}
	if len(reports) > 0 {
		t.Log(table(reports))
	}
}

// corednsPath finds the coredns binary: $DNSCONFIGURER_COREDNS, then
// $DNSCONFIGURER_TESTBIN/coredns, then build.sh's cache directory. A path
// named by a variable must exist (it fails t); without either variable a
// missing binary skips t.
func corednsPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envCoreDNS); p != "" {
		if err := executable(p); err != nil {
			t.Fatalf("%s: %v", envCoreDNS, err)
		}
		return p
	}
	if d := os.Getenv(envTestbin); d != "" {
		p := filepath.Join(d, "coredns")
		if err := executable(p); err != nil {
			t.Fatalf("%s: %v (run test/testbin/build.sh)", envTestbin, err)
		}
		return p
	}
	dir, err := testbinCache()
	if err == nil {
		p := filepath.Join(dir, "coredns")
		if err = executable(p); err == nil {
			return p
		}
	}
	t.Skipf("no coredns: %v; run test/testbin/build.sh, or `cd /tmp && GOFLAGS=-mod=mod GOBIN=/tmp/cdns go install github.com/coredns/coredns@v1.15.0` and set %s=/tmp/cdns/coredns", err, envCoreDNS)
	return ""
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%q is not an executable", p)
	}
	return nil
}

// testbinCache is build.sh's default output directory:
// ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/testbin/<sha256 of go.sum>.
// go test runs in the package directory, two levels below the module root.
func testbinCache() (string, error) {
	b, err := os.ReadFile(filepath.Join("..", "testbin", "go.sum"))
	if err != nil {
		return "", fmt.Errorf("read test/testbin/go.sum: %w", err)
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".cache")
	}
	sum := sha256.Sum256(b)
	return filepath.Join(base, "dnsconfigurer", "testbin", hex.EncodeToString(sum[:])), nil
}

// server is one DNS server process under test.
type server struct {
	name    string
	cmd     *exec.Cmd
	dns     string // ip:port
	metrics string // URL of its Prometheus metrics
	logPath string
	exited  chan struct{}
	waitErr error
}

// startServer runs bin with args, its output in dir, and kills it when t
// ends.
func startServer(t *testing.T, name, dir, dnsAddr, metricsURL, bin string, args ...string) *server {
	t.Helper()
	return startScaleServer(t, name, dir, dnsAddr, metricsURL, nil, "", bin, args...)
}

// startScaleServer is startServer with an environment added to this
// process's and, when procs is set, in a memory cgroup (inCgroup).
func startScaleServer(t *testing.T, name, dir, dnsAddr, metricsURL string, env []string, procs, bin string, args ...string) *server {
	t.Helper()
	s := &server{name: name, dns: dnsAddr, metrics: metricsURL, logPath: filepath.Join(dir, name+".log"), exited: make(chan struct{})}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slices.Contains(env, quietEnv)
	env = slices.DeleteFunc(slices.Clone(env), func(e string) bool { return e == quietEnv })
	path, argv := inCgroup(procs, bin, args...)
	s.cmd = exec.Command(path, argv...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() && !quiet {
			t.Logf("%s output (last 4 KiB):\n%s", name, tail(s.logPath, 4096))
		}
	})
	return s
}

// alive fails t when s has exited during what ("the flood"), with the
// end of its output.
func (s *server) alive(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.exited:
		t.Fatalf("%s exited during %s: %v\n%s", s.name, what, s.waitErr, tail(s.logPath, 4096))
	default:
	}
}

// stop kills s and waits for it to exit.
func (s *server) stop() {
	s.cmd.Process.Kill()
	<-s.exited
}

func tail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// waitAnswer polls s with q until check accepts the reply, the process
// exits or 30 s pass.
func (s *server) waitAnswer(t *testing.T, q *dns.Msg, check func(*dns.Msg) error) {
	t.Helper()
	c := &dns.Client{Timeout: 300 * time.Millisecond}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		r, _, err := c.Exchange(q, s.dns)
		if err == nil {
			err = check(r)
		}
		if err == nil {
			return
		}
		last = err
		select {
		case <-s.exited:
			t.Fatalf("%s exited (%v) before answering %s:\n%s", s.name, s.waitErr, q.Question[0].Name, tail(s.logPath, 4096))
		case <-deadline.C:
			t.Fatalf("%s did not answer %s within 30 s: %v", s.name, q.Question[0].Name, last)
		case <-tick.C:
		}
	}
}

// usage is what /proc says about a process.
type usage struct {
	rssKiB, hwmKiB int64
	anonKiB        int64         // RssAnon: the heap and stacks, not the binary's pages
	cpu            time.Duration // utime + stime
}

// clockTick is USER_HZ, 100 on every Linux the project runs on.
const clockTick = 10 * time.Millisecond

func readUsage(pid int) (usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	cpu, err := parseStatCPU(stat)
	if err != nil {
		return usage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, err
	}
	defer status.Close()
	u, err := parseStatus(status)
	if err != nil {
		return usage{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	u.cpu = cpu
	return u, nil
}

// parseStatCPU returns utime + stime of a /proc/<pid>/stat line.
func parseStatCPU(stat []byte) (time.Duration, error) {
	// The command name may hold spaces and ')'; fields follow the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')'")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	// utime and stime are fields 14 and 15 of stat, 12 and 13 after ')'.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// parseStatus reads VmRSS, VmHWM and RssAnon (kB) of a /proc/<pid>/status.
func parseStatus(r io.Reader) (usage, error) {
	var u usage
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &u.rssKiB
		case "VmHWM":
			dst = &u.hwmKiB
		case "RssAnon":
			dst = &u.anonKiB
		default:
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return u, fmt.Errorf("%s: %w", k, err)
		}
		*dst = n
	}
	return u, sc.Err()
}

// goroutines scrapes go_goroutines from a Prometheus endpoint.
func goroutines(ctx context.Context, client *http.Client, url string) (int, error) {
	text, err := scrape(ctx, client, url)
	if err != nil {
		return 0, err
	}
	g, ok := metricSum(text, "go_goroutines")
	if !ok {
		return 0, fmt.Errorf("GET %s: no go_goroutines", url)
	}
	return int(g), nil
}

// gcFigures are a Go server's collector counters, from its metrics (both
// servers export client_golang's Go collector).
type gcFigures struct {
	collections int     // go_gc_duration_seconds_count: collections ended
	allocated   float64 // go_memstats_alloc_bytes_total: bytes allocated
}

// perChange is the bytes allocated per change over writes changes.
func (g gcFigures) perChange(writes int) float64 { return g.allocated / float64(max(writes, 1)) }

func (g gcFigures) minus(o gcFigures) gcFigures {
	return gcFigures{collections: g.collections - o.collections, allocated: g.allocated - o.allocated}
}

// readGC scrapes s's collector counters.
func readGC(ctx context.Context, s *server) (gcFigures, error) {
	text, err := scrape(ctx, &http.Client{Timeout: 5 * time.Second}, s.metrics)
	if err != nil {
		return gcFigures{}, err
	}
	n, ok := metricSum(text, "go_gc_duration_seconds_count")
	a, ok2 := metricSum(text, "go_memstats_alloc_bytes_total")
	if !ok || !ok2 {
		return gcFigures{}, fmt.Errorf("%s: no go_gc_duration_seconds_count or go_memstats_alloc_bytes_total at %s", s.name, s.metrics)
	}
	return gcFigures{collections: int(n), allocated: a}, nil
}

// scrape reads a Prometheus endpoint's text exposition (at most 16 MiB).
func scrape(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return string(b), err
}

// metricSum adds up the samples of metric in a text exposition whose labels
// include every one of labels (each `name="value"`); ok is false when there
// is none.
func metricSum(text, metric string, labels ...string) (sum float64, ok bool) {
	for line := range strings.Lines(text) {
		rest, found := strings.CutPrefix(strings.TrimSpace(line), metric)
		if !found || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		var set string
		if rest[0] == '{' {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			set, rest = rest[1:end], rest[end+1:]
		}
		if !hasLabels(set, labels) {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum, ok = sum+v, true
	}
	return sum, ok
}

func hasLabels(set string, labels []string) bool {
	pairs := strings.Split(set, ",")
	for _, l := range labels {
		if !slices.Contains(pairs, l) {
			return false
		}
	}
	return true
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// settle waits until the processes pids together use less than a tenth of
// a core over a second, for at most limit, and returns how long it waited
// and whether they settled. After a populate the API server still works
// through it (its watch cache, etcd's compaction); a server started then
// would pay for that work in its start-up time.
func settle(ctx context.Context, pids []int, limit time.Duration) (time.Duration, bool) {
	const window = time.Second
	start := time.Now()
	prev := cpuOf(pids)
	tick := time.NewTicker(window)
	defer tick.Stop()
	for time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return time.Since(start), false
		case <-tick.C:
		}
		cur := cpuOf(pids)
		if cur-prev < window/10 {
			return time.Since(start), true
		}
		prev = cur
	}
	return time.Since(start), false
}

// cpuOf is the CPU time the processes pids have used (a process gone
// counts nothing).
func cpuOf(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		if u, err := readUsage(pid); err == nil {
			sum += u.cpu
		}
	}
	return sum
}

// renice sets the nice value of every thread of process pid (eachThread).
func renice(pid, nice int) error {
	return eachThread(pid, "renice", func(tid int) error { return syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice) })
}

// niceOf is the nice value of thread tid, from /proc/<tid>/stat.
func niceOf(tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", tid))
	if err != nil {
		return 0, err
	}
	// The fields after the command, which ends at the last ')': state is
	// field 3, nice field 19.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 17 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command", tid, len(f))
	}
	return strconv.Atoi(f[16])
}

// setAffinity puts every thread of process pid on the CPUs of set
// (eachThread).
func setAffinity(pid int, set *unix.CPUSet) error {
	return eachThread(pid, "the CPUs of", func(tid int) error { return unix.SchedSetaffinity(tid, set) })
}

// eachThread calls set for every thread of process pid; what names it in
// errors. Linux keeps a nice value and the CPUs a thread may run on per
// thread, and a thread started later takes its creator's, so it passes
// over the threads until a pass finds none it has not set: one started
// during a pass is set by the next. A thread that ended since the listing
// is no error.
func eachThread(pid int, what string, set func(tid int) error) error {
	done := map[int]bool{}
	for range 10 {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return fmt.Errorf("%s %d: %w", what, pid, err)
		}
		fresh := false
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := set(tid); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("%s thread %d of %d: %w", what, tid, pid, err)
			}
			done[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
	return fmt.Errorf("%s %d: it kept starting threads", what, pid)
}

// cpuPin is DNSCONFIGURER_CHURN_PIN at work: while a server takes the
// query load, it and the load's process run on one CPU and every other
// process of the run on the rest, as a DNS server with a CPU of its own
// on a node away from the control plane.
type cpuPin struct {
	all, one, rest unix.CPUSet
}

// newCPUPin takes CPU cpu for the loaded server out of the CPUs this
// process may run on; it needs that CPU and one more.
func newCPUPin(cpu int) (*cpuPin, error) {
	p := &cpuPin{}
	if err := unix.SchedGetaffinity(0, &p.all); err != nil {
		return nil, fmt.Errorf("the CPUs of this process: %w", err)
	}
	if !p.all.IsSet(cpu) || p.all.Count() < 2 {
		return nil, fmt.Errorf("%s=%d: this process may run on %d CPUs; want CPU %d among them and one more", envChurnPin, cpu, p.all.Count(), cpu)
	}
	p.one.Set(cpu)
	p.rest = p.all
	p.rest.Clear(cpu)
	return p, nil
}

// apart puts loaded on the pinned CPU and others on the rest; back puts
// them all on every CPU again.
func (p *cpuPin) apart(loaded int, others []int) error {
	for _, pid := range others {
		if err := setAffinity(pid, &p.rest); err != nil {
			return err
		}
	}
	return setAffinity(loaded, &p.one)
}

func (p *cpuPin) back(pids []int) error {
	var errs []error
	for _, pid := range pids {
		errs = append(errs, setAffinity(pid, &p.all))
	}
	return errors.Join(errs...)
}

// threadsCPU is the time the threads of process pid have run, in
// nanoseconds from /proc/<pid>/task/<tid>/schedstat: /proc/<pid>/stat
// counts in 10 ms ticks, too coarse for a server at rest. A thread that
// ended is not counted; a Go server's threads live as long as it does.
func threadsCPU(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, fmt.Errorf("the threads of %d: %w", pid, err)
	}
	var sum time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, task.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // ended since the listing
		}
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, fmt.Errorf("/proc/%d/task/%s/schedstat: %q", pid, task.Name(), b)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/task/%s/schedstat: %w", pid, task.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}
