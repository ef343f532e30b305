package bench

// The harness of TestScale (scale_test.go): its report lines, the memory
// cgroup a server runs under, the /proc sampler, the query load that
// counts every failed lookup, and the reading of a relist storm. Their
// own tests are in scale_unit_test.go and run without DNSCONFIGURER_BENCH.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scaleLine is one measure of TestScale, exactly as issue 71 asks:
// "scale: MEASURE: ours X coredns Y", the units in the values.
func scaleLine(measure, ours, coredns string) string {
	return fmt.Sprintf("scale: %s: ours %s coredns %s", measure, ours, coredns)
}

// fmtMiB is KiB as "12.3 MiB"; a negative value is unknown ("n/a").
func fmtMiB(kib int64) string {
	if kib < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(kib)/1024)
}

// fmtSeconds is d as "1.23 s"; a negative d means never ("not answered").
func fmtSeconds(d time.Duration) string {
	if d < 0 {
		return "not answered"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// fmtCount is n and what it counts: "3 lookups".
func fmtCount(n int64, what string) string {
	return fmt.Sprintf("%d %s", n, what)
}

// memCgroup is a memory cgroup of its own for one server: cgroup v2 where
// the memory controller is there (memory.max, memory.events), else v1
// (memory.limit_in_bytes, memory.oom_control).
type memCgroup struct {
	dir string
	v2  bool
}

// cgroupRoots are where the two hierarchies are mounted.
var (
	cgroupV2Root = "/sys/fs/cgroup"
	cgroupV1Root = "/sys/fs/cgroup/memory"
)

// newMemCgroup creates a cgroup named name below this process's own (or
// the root) with limit bytes of memory and no swap, removed when t ends.
func newMemCgroup(t *testing.T, name string, limit int64) (*memCgroup, error) {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	_, v1Path, err := parseProcCgroup(string(self))
	if err != nil {
		return nil, err
	}
	var cg *memCgroup
	if ctrl, err := os.ReadFile(filepath.Join(cgroupV2Root, "cgroup.controllers")); err == nil && slices.Contains(strings.Fields(string(ctrl)), "memory") {
		// Below the root: a new cgroup's controllers are those its
		// parent's subtree_control enables, and the root, unlike a cgroup
		// of ours, may enable them while it holds processes (the v2 "no
		// internal processes" rule does not bind it).
		sub, err := os.ReadFile(filepath.Join(cgroupV2Root, "cgroup.subtree_control"))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(strings.Fields(string(sub)), "memory") {
			if err := os.WriteFile(filepath.Join(cgroupV2Root, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
				return nil, fmt.Errorf("enable the memory controller in %s: %w", cgroupV2Root, err)
			}
		}
		cg = &memCgroup{dir: filepath.Join(cgroupV2Root, name), v2: true}
	} else if _, err := os.Stat(filepath.Join(cgroupV1Root, "memory.limit_in_bytes")); err == nil {
		cg = &memCgroup{dir: filepath.Join(cgroupV1Root, v1Path, name)}
	} else {
		return nil, errors.New("no memory cgroup controller: neither cgroup v2 with memory nor a v1 memory hierarchy")
	}
	if err := os.Mkdir(cg.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create cgroup %s: %w", cg.dir, err)
	}
	t.Cleanup(func() { cg.remove() })
	writes := [][2]string{{"memory.limit_in_bytes", strconv.FormatInt(limit, 10)}}
	if cg.v2 {
		writes = [][2]string{{"memory.max", strconv.FormatInt(limit, 10)}, {"memory.swap.max", "0"}}
	} else if _, err := os.Stat(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes")); err == nil {
		// memsw must be at least the memory limit: set after it.
		writes = append(writes, [2]string{"memory.memsw.limit_in_bytes", strconv.FormatInt(limit, 10)})
	}
	for _, w := range writes {
		if err := os.WriteFile(filepath.Join(cg.dir, w[0]), []byte(w[1]), 0o644); err != nil && w[0] != "memory.swap.max" {
			return nil, fmt.Errorf("cgroup %s: write %s: %w", cg.dir, w[0], err)
		}
	}
	return cg, nil
}

// parseProcCgroup reads /proc/<pid>/cgroup: the v2 path ("0::") and the
// path in the v1 memory hierarchy ("N:memory:"), either empty when absent.
func parseProcCgroup(s string) (v2, v1 string, err error) {
	for line := range strings.Lines(s) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2 = f[2]
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			v1 = f[2]
		}
	}
	if v2 == "" && v1 == "" {
		return "", "", fmt.Errorf("/proc/self/cgroup: no cgroup found in %q", s)
	}
	return v2, v1, nil
}

// procsFile is the file a process is moved into the cgroup by.
func (cg *memCgroup) procsFile() string { return filepath.Join(cg.dir, "cgroup.procs") }

// eventsFile holds the oom_kill counter: memory.events (v2),
// memory.oom_control (v1).
func (cg *memCgroup) eventsFile() string {
	if cg.v2 {
		return filepath.Join(cg.dir, "memory.events")
	}
	return filepath.Join(cg.dir, "memory.oom_control")
}

// oomKills is how many processes the kernel's OOM killer killed in the
// cgroup.
func (cg *memCgroup) oomKills() (int64, error) {
	f, err := os.Open(cg.eventsFile())
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ev, err := parseCgroupEvents(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", cg.eventsFile(), err)
	}
	n, ok := ev["oom_kill"]
	if !ok {
		return 0, fmt.Errorf("%s: no oom_kill counter (kernel before 4.13?)", cg.eventsFile())
	}
	return n, nil
}

// peakBytes is the cgroup's memory high-water mark, -1 when the kernel
// does not keep one.
func (cg *memCgroup) peakBytes() int64 {
	name := "memory.max_usage_in_bytes"
	if cg.v2 {
		name = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(cg.dir, name))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// pageCacheBytes is the page cache the cgroup is charged for now
// (memory.stat: file in v2, cache in v1), -1 when unread. The kernel
// reclaims it at the limit: a peak at the limit with page cache charged is
// not a near OOM kill. A server that reads its binary back after a release
// (memrelease) is charged for those pages, as a pod that starts first on
// its node is.
func (cg *memCgroup) pageCacheBytes() int64 {
	key := "cache"
	if cg.v2 {
		key = "file"
	}
	f, err := os.Open(filepath.Join(cg.dir, "memory.stat"))
	if err != nil {
		return -1
	}
	defer f.Close()
	st, err := parseCgroupEvents(f)
	if err != nil {
		return -1
	}
	if n, ok := st[key]; ok {
		return n
	}
	return -1
}

// remove kills what is left in the cgroup and removes it.
func (cg *memCgroup) remove() {
	if b, err := os.ReadFile(cg.procsFile()); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
	}
	for range 50 {
		if err := os.Remove(cg.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// parseCgroupEvents reads "key value" lines: memory.events (v2) or
// memory.oom_control (v1), which both count oom_kill.
func parseCgroupEvents(r io.Reader) (map[string]int64, error) {
	out := map[string]int64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("line %q: want a key and a value", sc.Text())
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		out[f[0]] = n
	}
	return out, sc.Err()
}

// inCgroup is the command line that runs bin with args in the cgroup of
// procs (a cgroup.procs file): a shell writes its own pid there and then
// execs bin, so the pid is bin's and every page bin touches is charged to
// the cgroup. Empty procs runs bin as is.
func inCgroup(procs, bin string, args ...string) (string, []string) {
	if procs == "" {
		return bin, args
	}
	return "/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, procs, bin}, args...)
}

// quietEnv in startScaleServer's env is not passed on: it keeps the
// process's output out of a failed test's log (the many node-local stages).
const quietEnv = "DNSCONFIGURER_SCALE_QUIET=1"

// hasExited reports whether s's process has ended.
func (s *server) hasExited() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// resetHWM resets VmHWM of process pid to its current RSS (Linux 4.0+,
// clear_refs 5), so that a later VmHWM is the peak since.
func resetHWM(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200)
}

// rssSample is one reading of a process's resident memory.
type rssSample struct {
	at     time.Time
	rssKiB int64
}

// rssSampler reads VmRSS of processes every interval until stop.
type rssSampler struct {
	mu      sync.Mutex
	samples map[int][]rssSample // by pid
	quit    chan struct{}
	done    sync.WaitGroup
}

func startRSSSampler(interval time.Duration, pids ...int) *rssSampler {
	s := &rssSampler{samples: map[int][]rssSample{}, quit: make(chan struct{})}
	s.done.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			now := time.Now()
			for _, pid := range pids {
				if u, err := readUsage(pid); err == nil {
					s.mu.Lock()
					s.samples[pid] = append(s.samples[pid], rssSample{now, u.rssKiB})
					s.mu.Unlock()
				}
			}
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	})
	return s
}

func (s *rssSampler) stop() { close(s.quit); s.done.Wait() }

// between is pid's samples in [from, to).
func (s *rssSampler) between(pid int, from, to time.Time) []rssSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []rssSample
	for _, x := range s.samples[pid] {
		if !x.at.Before(from) && x.at.Before(to) {
			out = append(out, x)
		}
	}
	return out
}

// peakKiB is the largest sample, -1 without one.
func peakKiB(samples []rssSample) int64 {
	peak := int64(-1)
	for _, x := range samples {
		peak = max(peak, x.rssKiB)
	}
	return peak
}

// medianKiB is the median sample, -1 without one.
func medianKiB(samples []rssSample) int64 {
	if len(samples) == 0 {
		return -1
	}
	v := make([]int64, len(samples))
	for i, x := range samples {
		v[i] = x.rssKiB
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// lookupLoad asks one server a fixed set of names at a steady rate, each
// question on its own (no retry), and keeps the time of every failed
// lookup: no reply within the timeout, an error rcode, or a wrong answer.
type lookupLoad struct {
	asked    atomic.Int64
	mu       sync.Mutex
	failures []lookupFailure
	quit     chan struct{}
	done     sync.WaitGroup
}

// lookupFailure is one failed lookup: when it was asked and why it failed.
type lookupFailure struct {
	at     time.Time
	qname  string
	reason string
}

// startLookupLoad sends qps questions per second to addr, from workers
// sockets, taking names in turn, each answered within timeout or failed.
func startLookupLoad(addr string, names []expect, qps, workers int, timeout time.Duration) (*lookupLoad, error) {
	l := &lookupLoad{quit: make(chan struct{})}
	if len(names) == 0 || qps <= 0 {
		return nil, errors.New("lookup load: no names or no rate")
	}
	workers = max(min(workers, qps), 1)
	var next atomic.Int64
	for w := range workers {
		p, err := newProber(addr)
		if err != nil {
			close(l.quit)
			l.done.Wait()
			return nil, err
		}
		every := time.Duration(float64(time.Second) * float64(workers) / float64(qps))
		l.done.Go(func() {
			defer p.close()
			// The workers' ticks are staggered over one interval.
			time.Sleep(every * time.Duration(w) / time.Duration(workers))
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-l.quit:
					return
				case <-tick.C:
				}
				e := names[int(next.Add(1)-1)%len(names)]
				at := time.Now()
				l.asked.Add(1)
				if err := p.ask(e, timeout); err != nil {
					reason := err.Error()
					if errors.Is(err, os.ErrDeadlineExceeded) {
						reason = "no reply within " + timeout.String()
						// A late reply must not be taken for the next
						// question's: drop the socket.
						p.close()
						if np, err := newProber(addr); err == nil {
							p = np
						}
					}
					l.mu.Lock()
					l.failures = append(l.failures, lookupFailure{at: at, qname: e.qname, reason: reason})
					l.mu.Unlock()
				}
			}
		})
	}
	return l, nil
}

func (l *lookupLoad) stop() { close(l.quit); l.done.Wait() }

// failedBetween counts the lookups asked in [from, to) that failed, and
// gives up to three examples.
func (l *lookupLoad) failedBetween(from, to time.Time) (int64, []lookupFailure) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return countFailures(l.failures, from, to)
}

func countFailures(fs []lookupFailure, from, to time.Time) (int64, []lookupFailure) {
	var n int64
	var ex []lookupFailure
	for _, f := range fs {
		if f.at.Before(from) || !f.at.Before(to) {
			continue
		}
		n++
		if len(ex) < 3 {
			ex = append(ex, f)
		}
	}
	return n, ex
}

// storm is how a crowd of clients came back to a restarted API server:
// the times (since its return) of each client's first request after it.
type storm struct {
	clients    int             // clients expected back
	firsts     []time.Duration // one per client that came back, sorted
	requests   []time.Duration // every request after the return, sorted
	peakPerSec int             // most requests in any one second
	peakPer100 int             // most requests in any 100 ms
	p50, p90   time.Duration   // of firsts
	last       time.Duration
	// lastP50, lastP90 and lastMax are of each client's last request:
	// its relist, when the resumed watch failed (nodeLocal.watchJitter
	// spreads them).
	lastP50, lastP90, lastMax time.Duration
	missing                   int // clients not back
}

// stormOf reads requests (client, time since the return), keeping those
// at or after 0.
func stormOf(clients int, reqs []stormRequest) storm {
	s := storm{clients: clients}
	first, last := map[string]time.Duration{}, map[string]time.Duration{}
	for _, r := range reqs {
		if r.at < 0 {
			continue
		}
		s.requests = append(s.requests, r.at)
		if f, ok := first[r.client]; !ok || r.at < f {
			first[r.client] = r.at
		}
		last[r.client] = max(last[r.client], r.at)
	}
	for _, f := range first {
		s.firsts = append(s.firsts, f)
	}
	lasts := slices.Sorted(maps.Values(last))
	if n := len(lasts); n > 0 {
		s.lastP50, s.lastP90, s.lastMax = lasts[(n-1)/2], lasts[(n*9-1)/10], lasts[n-1]
	}
	slices.Sort(s.firsts)
	slices.Sort(s.requests)
	s.peakPerSec = peakIn(s.requests, time.Second)
	s.peakPer100 = peakIn(s.requests, 100*time.Millisecond)
	if n := len(s.firsts); n > 0 {
		s.p50 = s.firsts[(n-1)/2]
		s.p90 = s.firsts[(n*9-1)/10]
		s.last = s.firsts[n-1]
	}
	s.missing = max(clients-len(s.firsts), 0)
	return s
}

// stormRequest is one request of the storm: its client and when it came
// after the API server's return.
type stormRequest struct {
	client string
	at     time.Duration
}

// peakIn is the most of the sorted times that fall in any window w.
func peakIn(sorted []time.Duration, w time.Duration) int {
	peak, lo := 0, 0
	for hi := range sorted {
		for sorted[hi]-sorted[lo] >= w {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	return peak
}

func (s storm) String() string {
	return fmt.Sprintf("%d of %d watchers back, first requests after the return p50 %v, p90 %v, last %v; each watcher's last request p50 %v, p90 %v, last %v; %d requests, peak %d/s (%d in 100 ms)",
		len(s.firsts), s.clients, s.p50.Round(time.Millisecond), s.p90.Round(time.Millisecond), s.last.Round(time.Millisecond),
		s.lastP50.Round(time.Millisecond), s.lastP90.Round(time.Millisecond), s.lastMax.Round(time.Millisecond),
		len(s.requests), s.peakPerSec, s.peakPer100)
}
