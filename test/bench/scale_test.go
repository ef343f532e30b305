package bench

// TestScale is issue 71's scale run: the 5,000-node load in a real
// kube-apiserver and etcd, dnsconfigurer serve with the deployed settings
// and CoreDNS 1.15 with kubeadm's Corefile watching it side by side under
// a steady query load, the API server killed and started again on the
// same etcd twice (the second time during a burst of changes), then both
// again under a 170 Mi memory cgroup, and then node-local's watchers'
// cost to the API server (scale_nodelocal_test.go). README.md has the
// method and the figures.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// envScale opts in to TestScale, with envBench.
const envScale = "DNSCONFIGURER_SCALE"

// TestScale's knobs besides the load (scale_cluster_test.go).
var (
	scaleQPS       = flag.Int("scale-qps", 200, "TestScale: steady lookups per second to each server")
	scaleNames     = flag.Int("scale-names", 2000, "TestScale: names the steady load asks (Services of both kinds and Pods)")
	scaleChurnRate = flag.Int("scale-churn", 5, "TestScale: changes per second while steady")
	scaleBurst     = flag.Int("scale-burst", 100, "TestScale: changes per second of the burst around the second restart")
	scaleSteady    = flag.Duration("scale-steady", 30*time.Second, "TestScale: the steady window (RSS, heap, CPU) before the first restart")
	scaleOutage    = flag.Duration("scale-outage", 10*time.Second, "TestScale: from the API server's stop to its start again")
	scaleRelist    = flag.Duration("scale-relist-window", 30*time.Second, "TestScale: the relist window after the API server's return")
	scaleMemLimit  = flag.String("scale-memory-limit", "170Mi", "TestScale: the memory cgroup of the last phase (CoreDNS's limit)")
	scaleGoMemLim  = flag.String("scale-gomemlimit", "288MiB", "TestScale: GOMEMLIMIT of serve outside the cgroup (the Deployment's: its memory limit, 288Mi); inside it, the cgroup's limit")
	scaleBetween   = flag.Duration("scale-between", 2*time.Minute+15*time.Second, "TestScale: from the first restart's return to the second's stop: longer than client-go's 2 min backoff reset, so the second restart does not start with the first one's backoff")
	scaleServers   = flag.Bool("scale-servers", true, "TestScale: run the cluster DNS part (false: the node-local part only)")
	scaleNodeLocal = flag.Int("scale-nodelocal", 300, "TestScale: node-local watchers run against the API server (0: skip that part)")
	scaleNLJitter  = flag.String("scale-nodelocal-jitter", "", "TestScale: the node-local stages' --watch-jitter (\"\": the stage's default)")
)

// requireScale skips t unless both DNSCONFIGURER_BENCH=1 and
// DNSCONFIGURER_SCALE=1.
func requireScale(t *testing.T) {
	t.Helper()
	requireBench(t)
	if os.Getenv(envScale) != "1" {
		t.Skipf("set %s=1 as well to run the 5,000-node scale run (about 20 minutes, several GiB of memory)", envScale)
	}
}

// scaleServer is one of the two servers of the run and its figures.
type scaleServer struct {
	name  string
	start func(procs string, env []string) *server // in a cgroup when procs is set
	s     *server
	load  *lookupLoad

	startTook          time.Duration
	steadyRSS, steadyA int64   // KiB, median over the steady window (VmRSS, RssAnon)
	heapBytes          float64 // go_memstats_heap_inuse_bytes, steady
	cpuRate            float64 // CPU seconds a second, steady
	peakRelist         int64   // KiB, VmHWM over the restarts
	sampledPeak        int64   // KiB, the largest VmRSS sample in the restarts' windows
	failed             int64   // lookups failed from each stop to the end of its relist window
	failedExamples     []lookupFailure
	answered           []time.Duration // per restart, from the return to the outage change answered (-1: never)
	sinceStart         []time.Duration // per restart, from the API server's new process to the outage change answered (-1: never)
	relistCPU          []time.Duration // per restart, CPU from the stop to the end of the relist window
	steadyCPU          []time.Duration // per restart, the steady rate's CPU over the same window
	oomKills           int64
	oomNote            string
	watchers           float64 // API server watches it added
}

func (s *scaleServer) pid() int { return s.s.cmd.Process.Pid }

func TestScale(t *testing.T) {
	requireScale(t)
	corednsBin := corednsPath(t)
	dcBin := buildbin.Dnsconfigurer(t)
	c, err := newScaleCluster(*scaleNodes, *scalePodsPerNode, *scaleServices, *scaleHeadless, *scaleTraffic, *scaleNamespaces)
	if err != nil {
		t.Fatal(err)
	}
	limit, err := resource.ParseQuantity(*scaleMemLimit)
	if err != nil {
		t.Fatalf("-scale-memory-limit %q: %v", *scaleMemLimit, err)
	}
	t.Logf("load: %d Nodes in %d zones, %d Pods (%d a node), %d Services (every %d-th headless, %d with trafficDistribution) with an EndpointSlice each, in %d namespaces",
		c.nodes, len(scaleZones), c.pods(), c.podsPerNode, c.services, c.headlessEvery, c.traffic, c.namespaces)

	dir := t.TempDir()
	nl := newNodeLocalUsers(*scaleNodeLocal)
	apiArgs := append([]string{"--service-cluster-ip-range=" + churnServiceCIDR}, nl.auditArgs(t, dir)...)
	opts := []apiserver.Option{apiserver.WithAPIServerArgs(apiArgs...)}
	opts = append(opts, nl.options()...)
	cp := apiserver.StartT(t, opts...)
	ctx := t.Context()
	cfg := cp.Config()
	cfg.QPS, cfg.Burst = 1000, 1000
	admin := apiserver.NewClient(t, cfg)
	etcd := dialEtcd(t, cp.EtcdURL())
	t0 := time.Now()
	if err := c.populate(ctx, admin, etcd, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("populate took %v", time.Since(t0).Round(time.Second))
	settleControl := func() {
		if took, ok := settle(ctx, cp.PIDs(), 2*time.Minute); ok {
			t.Logf("control plane settled in %v", took.Round(time.Second))
		} else {
			t.Logf("control plane still busy after %v", took.Round(time.Second))
		}
	}
	settleControl()
	logControl(t, cp, "after the populate")

	up := startStub(t)
	// Each part's lines are printed as soon as it ends, so that a part
	// that fails later does not lose them.
	if *scaleServers {
		printLines(clusterDNSPart(ctx, t, cp, c, admin, etcd, dir, dcBin, corednsBin, up.addr, limit.Value()))
	}
	if *scaleNodeLocal > 0 {
		printLines(nodeLocalPhase(ctx, t, cp, admin, nl, dcBin, up.addr, c))
	}
}

// printLines puts the report lines on stdout, once each and as they are
// (go test shows them with -v, or when the test fails).
func printLines(lines []string) {
	for _, l := range lines {
		fmt.Println(l)
	}
}

// clusterDNSPart runs both cluster DNS servers through the steady window,
// the two restarts and the cgroup phase, and returns the report lines;
// the targets about dnsconfigurer it misses fail t.
func clusterDNSPart(ctx context.Context, t *testing.T, cp *apiserver.ControlPlane, c *scaleCluster, admin kubernetes.Interface, etcd kvWriter,
	dir, dcBin, corednsBin, upstream string, limit int64) []string {
	t.Helper()
	var err error
	names := c.queryNames(*scaleNames)
	ours := &scaleServer{name: "dnsconfigurer"}
	ours.start = func(procs string, env []string) *server {
		return startDeployedServe(t, dir, dcBin, cp.Kubeconfig(), upstream, procs, env)
	}
	cd := &scaleServer{name: "coredns"}
	cd.start = func(procs string, env []string) *server {
		return startKubeadmCoreDNS(t, dir, corednsBin, cp.Kubeconfig(), upstream, procs, env)
	}
	servers := []*scaleServer{ours, cd}

	// Each starts alone, its watches counted at the API server.
	for _, s := range servers {
		before := apiWatchers(ctx, admin)
		started := time.Now()
		env := []string(nil)
		if s == ours {
			env = []string{"GOMEMLIMIT=" + *scaleGoMemLim}
		}
		s.s = s.start("", env)
		s.startTook = awaitAll(t, s.s, names, started)
		time.Sleep(2 * time.Second)
		s.watchers = apiWatchers(ctx, admin) - before
		t.Logf("%s: %d names answered %v after its start; %.0f watches at the API server", s.name, len(names), s.startTook.Round(time.Millisecond), s.watchers)
	}

	// The steady load on both and the churn, from here to the end of the
	// restarts.
	for _, s := range servers {
		if s.load, err = startLookupLoad(s.s.dns, names, *scaleQPS, 8, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ch := startScaleChurn(ctx, c, admin, etcd, *scaleChurnRate)
	sampler := startRSSSampler(100*time.Millisecond, ours.pid(), cd.pid())
	defer sampler.stop()

	// Steady: a while for the start's garbage to go, then the window.
	wait(ctx, t, 15*time.Second)
	steadyFrom := time.Now()
	cpu0 := cpuOfAll(servers)
	wait(ctx, t, *scaleSteady)
	cpu1 := cpuOfAll(servers)
	steadyTo := time.Now()
	for i, s := range servers {
		samples := sampler.between(s.pid(), steadyFrom, steadyTo)
		s.steadyRSS = medianKiB(samples)
		if u, err := readUsage(s.pid()); err == nil {
			s.steadyA = u.anonKiB
		}
		s.heapBytes = heapInuse(ctx, s.s)
		s.cpuRate = (cpu1[i] - cpu0[i]).Seconds() / steadyTo.Sub(steadyFrom).Seconds()
		n, ex := s.load.failedBetween(steadyFrom, steadyTo)
		t.Logf("%s steady: RSS %s (RssAnon %s), heap in use %.1f MiB, CPU %.3f s/s, %d of the lookups failed %v",
			s.name, fmtMiB(s.steadyRSS), fmtMiB(s.steadyA), s.heapBytes/(1<<20), s.cpuRate, n, ex)
	}
	logControl(t, cp, "steady, both servers watching")

	restart := func(label string, burst bool) {
		t.Helper()
		for _, s := range servers {
			if err := resetHWM(s.pid()); err != nil {
				t.Fatalf("%s: reset VmHWM: %v", s.name, err)
			}
		}
		if burst {
			ch.setRate(*scaleBurst)
			wait(ctx, t, 3*time.Second)
		}
		r := apiRestart(ctx, t, cp, c, etcd, ch, *scaleOutage, servers, label)
		wait(ctx, t, time.Until(r.back.Add(*scaleRelist)))
		end := time.Now()
		if burst {
			ch.setRate(*scaleChurnRate)
		}
		for i, s := range servers {
			u, err := readUsage(s.pid())
			if err != nil {
				t.Fatalf("%s after %s: %v", s.name, label, err)
			}
			s.peakRelist = max(s.peakRelist, u.hwmKiB)
			s.sampledPeak = max(s.sampledPeak, peakKiB(sampler.between(s.pid(), r.stopped, end)))
			n, ex := s.load.failedBetween(r.stopped, end)
			s.failed += n
			s.failedExamples = append(s.failedExamples, ex...)
			s.answered = append(s.answered, r.answered[i])
			since := time.Duration(-1)
			if r.answered[i] >= 0 {
				since = r.answered[i] + r.back.Sub(r.started)
			}
			s.sinceStart = append(s.sinceStart, since)
			// The relist starts when the new API server serves, before it
			// is ready: its CPU is counted from the stop.
			cpu := cpuOf([]int{s.pid()}) - r.cpuAtStop[i]
			s.relistCPU = append(s.relistCPU, cpu)
			s.steadyCPU = append(s.steadyCPU, time.Duration(s.cpuRate*float64(end.Sub(r.stopped))))
			t.Logf("%s, %s: VmHWM %s (steady %s), %d lookups failed %v, the outage change answered %s after the return, CPU %v from the stop to %v after the return",
				s.name, label, fmtMiB(u.hwmKiB), fmtMiB(s.steadyRSS), n, ex, fmtSeconds(r.answered[i]), cpu.Round(10*time.Millisecond), end.Sub(r.back).Round(time.Second))
		}
		logControl(t, cp, "after "+label)
	}
	restart("restart 1", false)
	wait(ctx, t, *scaleBetween-*scaleRelist)
	restart("restart 2 (during a burst)", true)
	ch.stop()
	t.Logf("churn: %d writes through the API, %d into etcd during the outages, %d write errors (%v)", ch.apiWrites.Load(), ch.etcdWrites.Load(), ch.errs.Load(), ch.lastErr())
	for _, s := range servers {
		s.load.stop()
		s.s.stop()
	}

	// The same under a memory cgroup at CoreDNS's limit: each started in
	// it, then one restart with a change during the outage.
	cgroupPhase(ctx, t, cp, c, etcd, servers, names, limit)

	var lines []string
	add := func(m string, f func(s *scaleServer) string) { lines = append(lines, scaleLine(m, f(ours), f(cd))) }
	add("steady RSS", func(s *scaleServer) string { return fmtMiB(s.steadyRSS) })
	add("steady Go heap in use", func(s *scaleServer) string { return fmt.Sprintf("%.1f MiB", s.heapBytes/(1<<20)) })
	add("peak RSS during relist", func(s *scaleServer) string { return fmtMiB(s.peakRelist) })
	add("peak RSS during relist / steady RSS", func(s *scaleServer) string {
		return fmt.Sprintf("%.2fx", float64(s.peakRelist)/float64(max(s.steadyRSS, 1)))
	})
	add("failed lookups during outage and relist", func(s *scaleServer) string { return fmtCount(s.failed, "lookups") })
	add("change answered after API server return", func(s *scaleServer) string { return fmtSeconds(worst(s.answered)) })
	for i := range ours.answered {
		add(fmt.Sprintf("change answered after API server return (restart %d)", i+1), func(s *scaleServer) string { return fmtSeconds(s.answered[i]) })
	}
	for i := range ours.sinceStart {
		add(fmt.Sprintf("change answered after API server process start (restart %d)", i+1), func(s *scaleServer) string { return fmtSeconds(s.sinceStart[i]) })
	}
	for i := range ours.relistCPU {
		add(fmt.Sprintf("CPU of the relist (restart %d, from the stop to %v after the return)", i+1, scaleRelist.Round(time.Second)), func(s *scaleServer) string {
			return fmt.Sprintf("%.2f s (at the steady rate: %.2f s)", s.relistCPU[i].Seconds(), s.steadyCPU[i].Seconds())
		})
	}
	add("start until every name answered", func(s *scaleServer) string { return fmtSeconds(s.startTook) })
	add("API server watches", func(s *scaleServer) string { return fmtCount(int64(s.watchers), "watches") })
	add("OOM kills under "+*scaleMemLimit, func(s *scaleServer) string { return fmtCount(s.oomKills, "kills") })

	for _, s := range servers {
		t.Logf("%s: largest VmRSS sample in the restarts (every 100 ms) %s, VmHWM %s", s.name, fmtMiB(s.sampledPeak), fmtMiB(s.peakRelist))
		if s.oomNote != "" {
			t.Logf("%s under %s: %s", s.name, *scaleMemLimit, s.oomNote)
		}
	}
	for _, v := range scaleViolations(ours, cd) {
		t.Error(v)
	}
	return lines
}

// scaleViolations are the targets about dnsconfigurer that it
// missed.
func scaleViolations(ours, cd *scaleServer) []string {
	var v []string
	if ours.steadyRSS > cd.steadyRSS/2 {
		v = append(v, fmt.Sprintf("steady RSS %s, more than half of CoreDNS's %s", fmtMiB(ours.steadyRSS), fmtMiB(cd.steadyRSS)))
	}
	if float64(ours.peakRelist) > 1.25*float64(ours.steadyRSS) {
		v = append(v, fmt.Sprintf("peak RSS during relist %s, more than 1.25× the steady %s", fmtMiB(ours.peakRelist), fmtMiB(ours.steadyRSS)))
	}
	if ours.failed > 0 {
		v = append(v, fmt.Sprintf("%d lookups failed during the outages and relists, want 0 (first: %v)", ours.failed, ours.failedExamples))
	}
	if w := worst(ours.answered); w < 0 || w > 5*time.Second {
		v = append(v, fmt.Sprintf("a change made during the outage answered %s after the API server's return, want 5 s at most", fmtSeconds(w)))
	}
	if ours.oomKills > 0 {
		v = append(v, fmt.Sprintf("OOM-killed %d times under the memory cgroup: %s", ours.oomKills, ours.oomNote))
	}
	return v
}

// worst is the longest of ds; -1 (never) if any is.
func worst(ds []time.Duration) time.Duration {
	var w time.Duration
	for _, d := range ds {
		if d < 0 {
			return -1
		}
		w = max(w, d)
	}
	return w
}

// wait sleeps d or fails t when ctx ends.
func wait(ctx context.Context, t *testing.T, d time.Duration) {
	t.Helper()
	if d <= 0 {
		return
	}
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(d):
	}
}

func cpuOfAll(servers []*scaleServer) []time.Duration {
	out := make([]time.Duration, len(servers))
	for i, s := range servers {
		out[i] = cpuOf([]int{s.pid()})
	}
	return out
}

// heapInuse scrapes go_memstats_heap_inuse_bytes (-1 when it cannot).
func heapInuse(ctx context.Context, s *server) float64 {
	text, err := scrape(ctx, &http.Client{Timeout: 5 * time.Second}, s.metrics)
	if err != nil {
		return -1
	}
	v, ok := metricSum(text, "go_memstats_heap_inuse_bytes")
	if !ok {
		return -1
	}
	return v
}

// apiMetrics is the API server's /metrics, read as the admin.
func apiMetrics(ctx context.Context, client kubernetes.Interface) (string, error) {
	b, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	return string(b), err
}

// apiWatchers is how many watches the API server serves
// (apiserver_longrunning_requests{verb="WATCH"}, else
// apiserver_registered_watchers); -1 when it cannot tell.
func apiWatchers(ctx context.Context, client kubernetes.Interface) float64 {
	text, err := apiMetrics(ctx, client)
	if err != nil {
		return -1
	}
	if v, ok := metricSum(text, "apiserver_longrunning_requests", `verb="WATCH"`); ok {
		return v
	}
	if v, ok := metricSum(text, "apiserver_registered_watchers"); ok {
		return v
	}
	return -1
}

// logControl logs the API server's and etcd's RSS.
func logControl(t *testing.T, cp *apiserver.ControlPlane, when string) {
	t.Helper()
	var parts []string
	for i, pid := range cp.PIDs() {
		if u, err := readUsage(pid); err == nil {
			parts = append(parts, fmt.Sprintf("%s RSS %s", []string{"etcd", "kube-apiserver"}[min(i, 1)], fmtMiB(u.rssKiB)))
		}
	}
	t.Logf("control plane %s: %s", when, strings.Join(parts, ", "))
}

// startDeployedServe runs `dnsconfigurer serve` as deploy/dnsserver does:
// --cluster-domain and --config with the ServerConfiguration of
// configmap.yaml (pods: verified, everything else defaulted), but for the
// addresses on 127.0.0.1, the API server of kubeconfig and the stub for
// the forward route; then $DNSCONFIGURER_SERVE_ARGS.
func startDeployedServe(t *testing.T, dir, bin, kubeconfig, upstream, procs string, env []string) *server {
	t.Helper()
	addr := testkit.FreeAddr(t, "127.0.0.1")
	maddr := testkit.FreeAddr(t, "127.0.0.1")
	conf := fmt.Sprintf(`apiVersion: dnsconfigurer.io/v1alpha1
kind: ServerConfiguration
listen: [%q]
metricsListen: %q
kubeconfig: %q
pods: verified
forward:
- zone: .
  upstreams: [%q]
`, addr, maddr, kubeconfig, upstream)
	path := filepath.Join(dir, "serve-"+strconv.Itoa(rand.IntN(1e9))+".yaml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--cluster-domain=cluster.local", "--config=" + path}, strings.Fields(os.Getenv(envArgs))...)
	t.Logf("dnsconfigurer %s (%s), env %v", strings.Join(args, " "), strings.ReplaceAll(strings.TrimSpace(conf), "\n", "; "), env)
	return startScaleServer(t, "dnsconfigurer", dir, addr, "http://"+maddr+"/metrics", env, procs, bin, args...)
}

// kubeadmCorefile is kubeadm's Corefile (Kubernetes 1.34,
// cmd/kubeadm/app/phases/addons/dns/manifests.go) with the API server of
// a kubeconfig, the stub upstream in place of /etc/resolv.conf, and every
// port on 127.0.0.1.
const kubeadmCorefile = `.:%[1]s {
    bind 127.0.0.1
    errors
    health %[2]s {
       lameduck 5s
    }
    ready %[3]s
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       kubeconfig %[4]s test
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus %[5]s
    forward . %[6]s {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`

// startKubeadmCoreDNS runs CoreDNS with kubeadmCorefile.
func startKubeadmCoreDNS(t *testing.T, dir, bin, kubeconfig, upstream, procs string, env []string) *server {
	t.Helper()
	addr := testkit.FreeAddr(t, "127.0.0.1")
	health, ready, maddr := testkit.FreeAddr(t, "127.0.0.1"), testkit.FreeAddr(t, "127.0.0.1"), testkit.FreeAddr(t, "127.0.0.1")
	_, port, _ := net.SplitHostPort(addr)
	path := filepath.Join(dir, "Corefile-"+strconv.Itoa(rand.IntN(1e9)))
	if err := os.WriteFile(path, []byte(fmt.Sprintf(kubeadmCorefile, port, health, ready, kubeconfig, maddr, upstream)), 0o644); err != nil {
		t.Fatal(err)
	}
	return startScaleServer(t, "coredns", dir, addr, "http://"+maddr+"/metrics", env, procs, bin, "-conf", path)
}

// scaleChurn changes the cluster at a rate while it runs: through the API
// (a new ClusterIP Service, or a label on a Pod, in turn) while the API
// server is up, and straight into etcd (a new Service and its IPAddress)
// while it is down.
type scaleChurn struct {
	rate       atomic.Int64
	down       atomic.Bool
	apiWrites  atomic.Int64
	etcdWrites atomic.Int64
	errs       atomic.Int64
	mu         sync.Mutex
	last       error
	cancel     context.CancelFunc
	done       sync.WaitGroup
}

func startScaleChurn(ctx context.Context, c *scaleCluster, client kubernetes.Interface, w kvWriter, rate int) *scaleChurn {
	ch := &scaleChurn{}
	ch.rate.Store(int64(rate))
	ctx, ch.cancel = context.WithCancel(ctx)
	sem := make(chan struct{}, 32)
	var n atomic.Int64
	ch.done.Go(func() {
		next := time.Now()
		for ctx.Err() == nil {
			r := ch.rate.Load()
			if r <= 0 {
				next = time.Now().Add(100 * time.Millisecond)
			} else {
				next = next.Add(time.Second / time.Duration(r))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			select {
			case sem <- struct{}{}:
			default:
				continue // 32 writes in flight: this tick is dropped
			}
			i := int(n.Add(1))
			ch.done.Go(func() {
				defer func() { <-sem }()
				ch.write(ctx, c, client, w, i)
			})
		}
	})
	return ch
}

func (ch *scaleChurn) write(ctx context.Context, c *scaleCluster, client kubernetes.Interface, w kvWriter, i int) {
	var err error
	switch {
	case ch.down.Load():
		_, objs := c.outageService(1_000_000+i, metav1.Now().Rfc3339Copy())
		if err = putObjects(ctx, w, objs); err == nil {
			ch.etcdWrites.Add(1)
		}
	case i%2 == 0:
		if _, err = apiService(ctx, client, "chg-"+strconv.Itoa(i), c.namespace(i)); err == nil {
			ch.apiWrites.Add(1)
		}
	default:
		k := (i * 7919) % c.pods()
		name, ns := c.podOf(k)
		patch := fmt.Sprintf(`{"metadata":{"labels":{"churn":"%d"}}}`, i)
		if _, err = client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
			ch.apiWrites.Add(1)
		}
	}
	if err != nil && ctx.Err() == nil {
		ch.errs.Add(1)
		ch.mu.Lock()
		ch.last = err
		ch.mu.Unlock()
	}
}

func (ch *scaleChurn) setRate(r int) { ch.rate.Store(int64(r)) }

func (ch *scaleChurn) lastErr() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.last
}

func (ch *scaleChurn) stop() { ch.cancel(); ch.done.Wait() }

// restartResult is one API server restart.
type restartResult struct {
	stopped, started, back time.Time       // its stop, the start of its new process, its readiness
	answered               []time.Duration // per server, from back to the outage change answered (-1: never)
	cpuAtStop              []time.Duration
}

// answerBound is how long after the API server's return an outage change
// is polled for.
const answerBound = 2 * time.Minute

// apiRestart stops the API server, writes a new Service into etcd in the
// middle of the outage, starts the API server again outage after its
// stop, and polls every server for the Service from its return.
func apiRestart(ctx context.Context, t *testing.T, cp *apiserver.ControlPlane, c *scaleCluster, w kvWriter, ch *scaleChurn,
	outage time.Duration, servers []*scaleServer, label string) restartResult {
	t.Helper()
	r := restartResult{stopped: time.Now()}
	for _, s := range servers {
		r.cpuAtStop = append(r.cpuAtStop, cpuOf([]int{s.pid()}))
	}
	if ch != nil {
		ch.down.Store(true)
	}
	if err := cp.StopAPIServer(); err != nil {
		t.Fatalf("%s: stop the API server: %v", label, err)
	}
	t.Logf("%s: API server stopped in %v", label, time.Since(r.stopped).Round(time.Millisecond))
	wait(ctx, t, time.Until(r.stopped.Add(outage/2)))
	e, objs := c.outageService(int(time.Now().UnixNano()%1e6), metav1.Now().Rfc3339Copy())
	if err := putObjects(ctx, w, objs); err != nil {
		t.Fatalf("%s: write %s into etcd: %v", label, e.qname, err)
	}
	for _, s := range servers {
		if err := askOnce(s.s.dns, e); err == nil {
			t.Fatalf("%s: %s answers %s before the API server is back", label, s.name, e.qname)
		}
	}
	wait(ctx, t, time.Until(r.stopped.Add(outage)))
	r.started = time.Now()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err := cp.StartAPIServer(sctx)
	cancel()
	if err != nil {
		t.Fatalf("%s: start the API server: %v", label, err)
	}
	r.back = time.Now()
	if ch != nil {
		ch.down.Store(false)
	}
	t.Logf("%s: API server down %v, its start took %v; polling for %s (%s)", label, r.back.Sub(r.stopped).Round(time.Millisecond),
		r.back.Sub(r.started).Round(time.Millisecond), e.qname, e.want[0])
	r.answered = make([]time.Duration, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			res := pollChange(s.s.dns, change{expect: e, written: r.back}, answerBound)
			r.answered[i] = -1
			if res.ok {
				r.answered[i] = res.lat
			} else {
				t.Logf("%s: %s did not answer %s within %v of the return: %s", label, s.name, e.qname, answerBound, res.last)
			}
		})
	}
	wg.Wait()
	return r
}

// askOnce asks addr about e once, with a 500 ms timeout.
func askOnce(addr string, e expect) error {
	p, err := newProber(addr)
	if err != nil {
		return err
	}
	defer p.close()
	return p.ask(e, 500*time.Millisecond)
}

// cgroupPhase starts each server again in a memory cgroup of limit bytes
// of its own (serve with GOMEMLIMIT at the limit, as the Deployment sets
// it from its memory limit), waits for its names, restarts the API server
// once with a change during the outage, and counts the OOM kills.
func cgroupPhase(ctx context.Context, t *testing.T, cp *apiserver.ControlPlane, c *scaleCluster, w kvWriter, servers []*scaleServer, names []expect, limit int64) {
	t.Helper()
	cgs := make([]*memCgroup, len(servers))
	for i, s := range servers {
		cg, err := newMemCgroup(t, fmt.Sprintf("dnsconfigurer-scale-%s-%d", s.name, os.Getpid()), limit)
		if err != nil {
			t.Fatalf("memory cgroup: %v", err)
		}
		cgs[i] = cg
		env := []string(nil)
		if i == 0 {
			env = []string{"GOMEMLIMIT=" + strconv.FormatInt(limit, 10)}
		}
		t.Logf("%s: in cgroup %s (limit %d bytes, v2 %v)", s.name, cg.dir, limit, cg.v2)
		s.s = s.start(cg.procsFile(), env)
		started := time.Now()
		if err := awaitNames(s.s, names, started, 10*time.Minute); err != nil {
			s.oomNote = "during its start: " + err.Error()
			t.Logf("%s under the cgroup: %v", s.name, err)
		} else {
			t.Logf("%s under the cgroup: every name answered %v after its start", s.name, time.Since(started).Round(time.Millisecond))
		}
	}
	live := []*scaleServer{}
	for _, s := range servers {
		if !s.s.hasExited() {
			live = append(live, s)
		}
	}
	if len(live) > 0 {
		for _, s := range live {
			_ = resetHWM(s.pid())
		}
		r := apiRestart(ctx, t, cp, c, w, nil, *scaleOutage, live, "restart under the cgroup")
		wait(ctx, t, time.Until(r.back.Add(*scaleRelist)))
		for i, s := range live {
			note := fmt.Sprintf("through the restart: outage change answered %s after the return", fmtSeconds(r.answered[i]))
			if u, err := readUsage(s.pid()); err == nil {
				note += ", VmHWM " + fmtMiB(u.hwmKiB)
			}
			if s.s.hasExited() {
				note = "killed during the restart and relist (" + s.s.waitErr.Error() + ")"
			}
			if s.oomNote == "" {
				s.oomNote = note
			}
		}
	}
	for i, s := range servers {
		n, err := cgs[i].oomKills()
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
		s.oomKills = n
		cache := "unread"
		if n := cgs[i].pageCacheBytes(); n >= 0 {
			cache = fmtMiB(n / 1024)
		}
		s.oomNote += fmt.Sprintf("; cgroup peak %s, page cache charged at the end %s", fmtMiB(cgs[i].peakBytes()/1024), cache)
		s.s.stop()
	}
}

// awaitNames waits until s answers every name right (a sample, then all),
// s exits or bound passes.
func awaitNames(s *server, names []expect, started time.Time, bound time.Duration) error {
	deadline := started.Add(bound)
	pending := sampleOf(names, 64)
	p, err := newProber(s.dns)
	if err != nil {
		return err
	}
	defer p.close()
	for len(pending) > 0 {
		if err := p.ask(pending[0], 100*time.Millisecond); err == nil {
			pending = pending[1:]
			continue
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited %v after its start: %v", time.Since(started).Round(time.Millisecond), s.waitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("names unanswered after " + bound.String())
		}
	}
	if failed := sweep(s.dns, names, 8); len(failed) > 0 {
		return fmt.Errorf("%d names wrong after the sample: %s: %v", len(failed), failed[0].e.qname, failed[0].err)
	}
	return nil
}
