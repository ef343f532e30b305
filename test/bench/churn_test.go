package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// The knobs of TestChurn.
const (
	envChurnServices    = "DNSCONFIGURER_CHURN_SERVICES"
	envChurnHeadless    = "DNSCONFIGURER_CHURN_HEADLESS"
	envChurnRate        = "DNSCONFIGURER_CHURN_RATE"
	envChurnFor         = "DNSCONFIGURER_CHURN_FOR"
	envChurnQueryQPS    = "DNSCONFIGURER_CHURN_QUERY_QPS"
	envChurnQueryFor    = "DNSCONFIGURER_CHURN_QUERY_FOR"
	envChurnPopulateQPS = "DNSCONFIGURER_CHURN_POPULATE_QPS"
	envChurnPopulate    = "DNSCONFIGURER_CHURN_POPULATE"
	envChurnStarts      = "DNSCONFIGURER_CHURN_STARTS"
	envChurnControlNice = "DNSCONFIGURER_CHURN_CONTROL_NICE"
	envChurnQueryNice   = "DNSCONFIGURER_CHURN_QUERY_NICE"
	envChurnPin         = "DNSCONFIGURER_CHURN_PIN"
)

// How populate writes the objects: through the API server (client-go), or
// straight into its etcd (populateDirect).
const (
	populateAPI  = "api"
	populateEtcd = "etcd"
)

// churnServiceCIDR replaces test/apiserver's /16, which holds 65,534
// cluster IPs; a /12 is the largest range kube-apiserver accepts.
const churnServiceCIDR = "10.96.0.0/12"

const (
	// startBound bounds a server's start until every Service answers.
	startBound = 10 * time.Minute
	// changeBound is how long a change may take to be answered before it
	// counts as missed.
	changeBound = 30 * time.Second
	// queryDrain is how long the query load waits for its last replies.
	queryDrain = 2 * time.Second
)

// churnSettings are TestChurn's knobs, read from the environment.
type churnSettings struct {
	services    int           // ClusterIP Services
	headless    int           // headless Services, one EndpointSlice of endpointsPerSlice each
	rates       []int         // changes per second, one churn phase each
	churnFor    time.Duration // length of each churn phase
	queryQPS    int           // the fixed query load; 0 turns it off
	queryFor    time.Duration // the query load per server, without and with churn
	populateQPS int           // the populating client's rate limit
	populate    string        // populateAPI or populateEtcd
	starts      int           // starts of each server before the churn
	// controlNice is the nice value of the API server's and etcd's threads
	// once both servers have started (0: left alone): on a cluster the
	// control plane runs on other machines than the DNS servers.
	controlNice int
	// queryChild runs the query load in a process of its own at nice
	// value queryNice (churn_query_test.go).
	queryChild bool
	queryNice  int
	// pinned runs the server taking the query load and the load's process
	// on CPU pinCPU, and every other process of the run on the other CPUs
	// (cpuPin). It runs the load in a process of its own, at nice 0 unless
	// queryNice says otherwise.
	pinned bool
	pinCPU int
}

// envSetting is v, the value of the variable name, parsed: def when v is
// empty, and def with an error added to errs (naming kind, what it wants)
// when v does not parse or is outside lo..hi.
func envSetting[T int | time.Duration](v, name, kind string, parse func(string) (T, error), def, lo, hi T, errs *[]error) T {
	if v == "" {
		return def
	}
	n, err := parse(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		*errs = append(*errs, fmt.Errorf("%s=%q: want %s from %v to %v", name, v, kind, lo, hi))
		return def
	}
	return n
}

// parseChurnSettings reads the knobs through getenv (os.Getenv), with
// their defaults; an error names every bad variable.
func parseChurnSettings(getenv func(string) string) (churnSettings, error) {
	var errs []error
	whole := func(name string, def, lo, hi int) int {
		return envSetting(getenv(name), name, "a whole number", strconv.Atoi, def, lo, hi, &errs)
	}
	duration := func(name string, def, lo, hi time.Duration) time.Duration {
		return envSetting(getenv(name), name, "a duration", time.ParseDuration, def, lo, hi, &errs)
	}
	s := churnSettings{
		services:    whole(envChurnServices, 10000, 1, 500000),
		headless:    whole(envChurnHeadless, 200, 0, 20000),
		churnFor:    duration(envChurnFor, 30*time.Second, time.Second, 30*time.Minute),
		queryQPS:    whole(envChurnQueryQPS, 5000, 0, 50000),
		queryFor:    duration(envChurnQueryFor, 10*time.Second, time.Second, 10*time.Minute),
		populateQPS: whole(envChurnPopulateQPS, 500, 1, 10000),
		starts:      whole(envChurnStarts, 2, 1, 10),
		controlNice: whole(envChurnControlNice, 0, 0, 19),
		rates:       []int{10, 50},
		populate:    populateAPI,
	}
	switch v := strings.TrimSpace(getenv(envChurnPopulate)); v {
	case "", populateAPI:
	case populateEtcd:
		s.populate = v
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want %s or %s", envChurnPopulate, v, populateAPI, populateEtcd))
	}
	if v := strings.TrimSpace(getenv(envChurnQueryNice)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < -20 || n > 19 {
			errs = append(errs, fmt.Errorf("%s=%q: want a nice value from -20 to 19", envChurnQueryNice, v))
		}
		s.queryChild, s.queryNice = err == nil, n
	}
	if v := strings.TrimSpace(getenv(envChurnPin)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1023 {
			errs = append(errs, fmt.Errorf("%s=%q: want a CPU number from 0 to 1023", envChurnPin, v))
		} else {
			s.pinned, s.pinCPU, s.queryChild = true, n, true
		}
	}
	if v := getenv(envChurnRate); v != "" {
		s.rates = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 1000 {
				errs = append(errs, fmt.Errorf("%s=%q: want changes per second from 1 to 1000, comma-separated", envChurnRate, v))
				s.rates = []int{10, 50}
				break
			}
			s.rates = append(s.rates, n)
		}
	}
	if ids := floodSockets * 65536; float64(s.queryQPS)*(s.queryFor+time.Second).Seconds() > float64(ids) {
		errs = append(errs, fmt.Errorf("%s=%d for %s=%v: more than the load generator's %d queries", envChurnQueryQPS, s.queryQPS, envChurnQueryFor, s.queryFor, ids))
	}
	return s, errors.Join(errs...)
}

// TestChurn populates a real kube-apiserver with Services and headless
// Services with EndpointSlices, starts dnsconfigurer serve and CoreDNS's
// kubernetes plugin watching it, and then changes it at fixed rates while
// it polls both over DNS until they answer each change. README.md has the
// method and the figures.
func TestChurn(t *testing.T) {
	requireBench(t)
	set, err := parseChurnSettings(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	corednsBin := corednsPath(t)
	dcBin := buildbin.Dnsconfigurer(t)
	cp := apiserver.StartT(t, apiserver.WithAPIServerArgs("--service-cluster-ip-range="+churnServiceCIDR))
	ctx := t.Context()

	cfg := cp.Config()
	cfg.QPS, cfg.Burst = float32(set.populateQPS), set.populateQPS
	var c *churnCluster
	var pop populateStats
	if set.populate == populateEtcd {
		c, pop, err = populateDirect(ctx, apiserver.NewClient(t, cfg), dialEtcd(t, cp.EtcdURL()), set, t.Logf)
	} else {
		c, pop, err = populate(ctx, apiserver.NewClient(t, cfg), set, t.Logf)
	}
	if err != nil {
		t.Fatalf("populate: %v", err)
	}
	t.Log(pop.String())
	rep := &churnReport{set: set, populate: pop}

	dir := t.TempDir()
	up := startStub(t)
	all := c.expectations()
	// Each server starts alone, so neither shares the CPU or the API
	// server with the other's initial list, once the control plane has
	// settled after the populate. It starts set.starts times, in the order
	// A B B A A B..., so that what the control plane still does weighs on
	// both alike; the report has the mean and the fastest of its starts.
	settled := func() {
		if took, ok := settle(ctx, cp.PIDs(), time.Minute); ok {
			t.Logf("control plane settled in %v", took.Round(time.Second))
		} else {
			t.Logf("control plane still busy after %v; the next start-up time includes its work", took.Round(time.Second))
		}
	}
	timed := func(start func() *server) (*server, time.Duration) {
		settled()
		started := time.Now()
		s := start()
		took := awaitAll(t, s, all, started)
		t.Logf("%s: every Service answered %v after its start", s.name, took.Round(time.Millisecond))
		return s, took
	}
	// A server kind: how to start it, the running one, its start-ups.
	type starter struct {
		start  func() *server
		s      *server
		starts []time.Duration
	}
	dcS := &starter{start: func() *server { return startClusterDnsconfigurer(t, dir, dcBin, cp.Kubeconfig(), up.addr) }}
	cdS := &starter{start: func() *server { return startClusterCoreDNS(t, dir, corednsBin, cp.Kubeconfig()) }}
	for i := range set.starts {
		order := []*starter{dcS, cdS}
		if i%2 == 1 {
			order = []*starter{cdS, dcS}
		}
		for j, st := range order {
			// Every other server is stopped, but in the last round the
			// first one started keeps running: both take the churn.
			for _, o := range []*starter{dcS, cdS} {
				if o.s != nil && (o == st || i < set.starts-1 || j == 0) {
					o.s.stop()
					o.s = nil
				}
			}
			var took time.Duration
			st.s, took = timed(st.start)
			st.starts = append(st.starts, took)
		}
	}
	dc, cd := dcS.s, cdS.s
	if set.controlNice > 0 {
		for _, pid := range cp.PIDs() {
			if err := renice(pid, set.controlNice); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("the API server and etcd run at nice %d from here on", set.controlNice)
	}

	servers := []*server{dc, cd}
	rep.servers = []serverRun{{name: dc.name, starts: dcS.starts}, {name: cd.name, starts: cdS.starts}}
	for i, s := range servers {
		rep.servers[i].sync = mustUsage(t, s)
	}
	names := c.queryNames()
	var ctl *server
	if set.queryQPS > 0 {
		ctl = startControl(ctx, t, dir, dcBin, apiserver.NewClient(t, cp.Config()), up.addr, c.services)
	}
	var pin *cpuPin
	if set.pinned {
		if pin, err = newCPUPin(set.pinCPU); err != nil {
			t.Fatal(err)
		}
	}
	// loadOn runs the query load on s, on a CPU of their own with
	// DNSCONFIGURER_CHURN_PIN.
	loadOn := func(s *server) queryStats {
		if pin == nil {
			return queryLoad(t, s, names, set, nil)
		}
		others := append(cp.PIDs(), os.Getpid())
		for _, o := range []*server{dc, cd, ctl} {
			if o != s {
				others = append(others, o.cmd.Process.Pid)
			}
		}
		if err := pin.apart(s.cmd.Process.Pid, others); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := pin.back(append(others, s.cmd.Process.Pid)); err != nil {
				t.Fatal(err)
			}
		}()
		return queryLoad(t, s, names, set, &pin.one)
	}
	// load is loadOn, with the collections that ended meanwhile.
	load := func(s *server) queryStats {
		before := mustGC(t, s)
		st := loadOn(s)
		st.collections = mustGC(t, s).minus(before).collections
		return st
	}
	if set.queryQPS > 0 {
		for i, s := range servers {
			rep.servers[i].baseQuery = load(s)
		}
		rep.control = &serverRun{name: ctl.name, baseQuery: load(ctl)}
	}
	// Both servers at rest, side by side: what they cost with nothing to do.
	// Not right after the starts: a server's start leaves work a while
	// after it answers (collecting the list's garbage, giving pages back),
	// and the one started last would pay it in the window. The query loads
	// above come between; without them, a window as long is let pass.
	wait := func() {
		w := time.NewTimer(restWindow)
		defer w.Stop()
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-w.C:
		}
	}
	if set.queryQPS == 0 {
		wait()
	}
	restStart := each(t, servers, mustThreadsCPU)
	wait()
	for i, end := range each(t, servers, mustThreadsCPU) {
		rep.servers[i].rest = (end - restStart[i]) * time.Second / restWindow
	}

	cfg = cp.Config()
	cfg.QPS, cfg.Burst = 2000, 2000
	lanes := c.lanes(apiserver.NewClient(t, cfg))
	addrs := []string{dc.dns, cd.dns}
	for _, rate := range set.rates {
		ph := phaseRun{rate: rate}
		before, beforeGC := each(t, servers, mustUsage), each(t, servers, mustGC)
		pctx, cancel := context.WithTimeout(ctx, set.churnFor)
		res := drive(pctx, rate, lanes, addrs, changeBound)
		cancel()
		after, afterGC := each(t, servers, mustUsage), each(t, servers, mustGC)
		ph.took, ph.writes, ph.dropped, ph.writeErrs = res.took, res.writes, res.dropped, res.writeErrs
		for i := range servers {
			rep.servers[i].phases = append(rep.servers[i].phases, serverPhase{polls: res.polls[i], cpu: after[i].cpu - before[i].cpu,
				gc: afterGC[i].minus(beforeGC[i])})
		}
		t.Logf("churn %d/s: %d changes in %v, %d ticks dropped", rate, res.writes, res.took.Round(time.Millisecond), res.dropped)
		if set.queryQPS > 0 {
			// The same churn goes on while each server in turn takes the
			// query load.
			lctx, lcancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			var loaded driveResult
			wg.Go(func() { loaded = drive(lctx, rate, lanes, addrs, changeBound) })
			for i, s := range servers {
				rep.servers[i].phases[len(rep.servers[i].phases)-1].query = load(s)
			}
			rep.control.phases = append(rep.control.phases, serverPhase{query: load(ctl)})
			lcancel()
			wg.Wait()
			ph.loadedWrites = loaded.writes
			ph.writeErrs = append(ph.writeErrs, loaded.writeErrs...)
			for i := range servers {
				rep.servers[i].phases[len(rep.servers[i].phases)-1].loaded = loaded.polls[i]
			}
		}
		rep.phases = append(rep.phases, ph)
		for _, s := range servers {
			s.alive(t, fmt.Sprintf("the churn at %d/s", rate))
		}
	}
	for i, s := range servers {
		rep.servers[i].end = mustUsage(t, s)
	}
	rep.loadAvg = loadAvg()
	t.Log("\n" + rep.table())
	for _, v := range rep.violations() {
		t.Error(v)
	}
}

// startClusterDnsconfigurer runs `dnsconfigurer serve` in cluster mode
// watching the API server of kubeconfig, every other name to upstream,
// then $DNSCONFIGURER_SERVE_ARGS.
func startClusterDnsconfigurer(t *testing.T, dir, bin, kubeconfig, upstream string) *server {
	t.Helper()
	addr := testkit.FreeAddr(t, "127.0.0.1")
	maddr := testkit.FreeAddr(t, "127.0.0.1")
	args := []string{"serve", "--listen", addr, "--kubeconfig", kubeconfig, "--pods", "insecure",
		"--upstream", upstream, "--metrics-listen", maddr}
	args = append(args, strings.Fields(os.Getenv(envArgs))...)
	t.Logf("dnsconfigurer %s", strings.Join(args, " "))
	return startServer(t, "dnsconfigurer", dir, addr, "http://"+maddr+"/metrics", bin, args...)
}

// clusterCorefile is kubeadm's kubernetes and loadbalance lines for the
// cluster zone, watching the API server of a kubeconfig. kubeadm's `cache
// 30` is left out: it would answer a name asked before its change from the
// cache for up to 30 s, which measures the cache, not the programming.
const clusterCorefile = `cluster.local:%d {
    bind 127.0.0.1
    kubernetes cluster.local {
        kubeconfig %s test
        pods insecure
    }
    loadbalance
    prometheus %s
}
`

// startClusterCoreDNS runs coredns with clusterCorefile.
func startClusterCoreDNS(t *testing.T, dir, bin, kubeconfig string) *server {
	t.Helper()
	return runCoreDNS(t, dir, func(port int, metrics string) string {
		return fmt.Sprintf(clusterCorefile, port, kubeconfig, metrics)
	})
}

// awaitAll returns how long after started s answered every expectation:
// the time a sample of them (the last Service of each kind among them)
// was answered, or later if the sweep of all that follows finds one that
// still had to be waited for. It fails t when one is not answered within
// startBound or s exits.
func awaitAll(t *testing.T, s *server, all []expect, started time.Time) time.Duration {
	t.Helper()
	deadline := started.Add(startBound)
	pending := sampleOf(all, 64)
	p, err := newProber(s.dns)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var last error
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(pending) > 0 {
		// A pass stops at the first name not answered: the server is not
		// ready, and a silent one would make every question wait.
		for len(pending) > 0 {
			if err := p.ask(pending[0], 100*time.Millisecond); err != nil {
				last = fmt.Errorf("%s: %w", pending[0].qname, err)
				break
			}
			pending = pending[1:]
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-s.exited:
			t.Fatalf("%s exited (%v) before answering every Service:\n%s", s.name, s.waitErr, tail(s.logPath, 4096))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of a sample of Services unanswered %v after its start: %v", s.name, len(pending), startBound, last)
		}
	}
	took := time.Since(started)
	failed := sweep(s.dns, all, 16)
	for len(failed) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d names unanswered %v after its start, first %s: %v", s.name, len(failed), len(all), startBound, failed[0].e.qname, failed[0].err)
		}
		t.Logf("%s: %d names not answered yet after the sample, first %s: %v", s.name, len(failed), failed[0].e.qname, failed[0].err)
		<-tick.C
		again := make([]expect, len(failed))
		for i, f := range failed {
			again[i] = f.e
		}
		failed = sweep(s.dns, again, 16)
		took = time.Since(started)
	}
	return took
}

// sampleOf picks up to n of all, evenly spaced, always with the last one
// and the last one of a kind (the first headless Service follows the
// last ClusterIP one).
func sampleOf(all []expect, n int) []expect {
	if len(all) <= n {
		return all
	}
	var out []expect
	step := float64(len(all)-1) / float64(n-1)
	for i := range n {
		out = append(out, all[int(float64(i)*step+0.5)])
	}
	for i := 1; i < len(all); i++ {
		if len(all[i].want) != len(all[i-1].want) {
			out = append(out, all[i-1])
		}
	}
	return out
}

// failure is an expectation not met, with why.
type failure struct {
	e   expect
	err error
}

// sweep asks every expectation once (a timed-out one twice) from workers
// sockets and returns those not met.
func sweep(addr string, list []expect, workers int) []failure {
	var mu sync.Mutex
	var failed []failure
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			p, err := newProber(addr)
			if err != nil {
				mu.Lock()
				failed = append(failed, failure{list[w%len(list)], err})
				mu.Unlock()
				return
			}
			defer p.close()
			for i := w; i < len(list); i += workers {
				err := p.ask(list[i], time.Second)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = p.ask(list[i], time.Second)
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, failure{list[i], err})
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return failed
}

func mustUsage(t *testing.T, s *server) usage {
	t.Helper()
	u, err := readUsage(s.cmd.Process.Pid)
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	return u
}

// restWindow is how long both servers are watched at rest.
const restWindow = 20 * time.Second

// mustThreadsCPU is threadsCPU of s's process.
func mustThreadsCPU(t *testing.T, s *server) time.Duration {
	t.Helper()
	d, err := threadsCPU(s.cmd.Process.Pid)
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	return d
}

// mustGC reads s's collector counters or fails t.
func mustGC(t *testing.T, s *server) gcFigures {
	t.Helper()
	g, err := readGC(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// each is read of each server, in order (mustUsage, mustGC,
// mustThreadsCPU).
func each[T any](t *testing.T, servers []*server, read func(*testing.T, *server) T) []T {
	t.Helper()
	out := make([]T, len(servers))
	for i, s := range servers {
		out[i] = read(t, s)
	}
	return out
}

// queryLoad sends set.queryQPS queries per second of existing names to s
// for set.queryFor, from a process of its own on the CPUs cpus if they
// are not nil.
func queryLoad(t *testing.T, s *server, names []string, set churnSettings, cpus *unix.CPUSet) queryStats {
	t.Helper()
	if set.queryChild {
		st, err := queryLoadChild(t, s.dns, names, set.queryQPS, set.queryFor, set.queryNice, cpus)
		if err != nil {
			t.Fatalf("%s: query load: %v", s.name, err)
		}
		return st
	}
	res, err := flood(s.dns, func(n int) string { return names[n%len(names)] }, set.queryQPS, set.queryFor, queryDrain)
	if err != nil {
		t.Fatalf("%s: query load: %v", s.name, err)
	}
	return queryStatsOf(res)
}
