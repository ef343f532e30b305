package bench

// The second part of TestScale: what node-local's watches cost the API
// server. Each watcher is the real stage, `dnsconfigurer serve --mode
// node-local --node-name node-<i>` with a kubeconfig of its own: it reads
// its Node's topology zone and watches the EndpointSlices of the cluster
// DNS's upstream Service (pkg/nodelocal topology_kube.go). The API server
// is measured before and after they start; then it is restarted and its
// audit log gives when each watcher came back.

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// nodeLocalGroup is the group of the watchers' users, which the audit
// policy logs.
const nodeLocalGroup = "dnsconfigurer:nodelocal"

// nodeLocalUsers are the watchers' users, one each, so that the audit log
// tells them apart.
type nodeLocalUsers struct {
	n         int
	auditPath string
}

func newNodeLocalUsers(n int) *nodeLocalUsers { return &nodeLocalUsers{n: n} }

func (u *nodeLocalUsers) name(i int) string { return "nodelocal-" + strconv.Itoa(i) }

// options add the users (in system:masters: RBAC is not what is
// measured).
func (u *nodeLocalUsers) options() []apiserver.Option {
	var opts []apiserver.Option
	for i := range u.n {
		opts = append(opts, apiserver.WithUser(u.name(i), "system:masters", nodeLocalGroup))
	}
	return opts
}

// nodeLocalAuditPolicy logs the watchers' requests, without their
// RequestReceived stage: a LIST or GET at ResponseComplete, a WATCH at
// ResponseStarted, each with its requestReceivedTimestamp.
const nodeLocalAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: [%q]
- level: None
`

// auditArgs are the API server's flags for the audit log of the
// watchers.
func (u *nodeLocalUsers) auditArgs(t *testing.T, dir string) []string {
	t.Helper()
	if u.n == 0 {
		return nil
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(fmt.Sprintf(nodeLocalAuditPolicy, nodeLocalGroup)), 0o644); err != nil {
		t.Fatal(err)
	}
	u.auditPath = filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + u.auditPath, "--audit-log-maxsize=0"}
}

// auditEvent is what the storm reads of an audit event.
type auditEvent struct {
	AuditID  string `json:"auditID"`
	Stage    string `json:"stage"`
	Verb     string `json:"verb"`
	Received string `json:"requestReceivedTimestamp"`
	User     struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource string `json:"resource"`
	} `json:"objectRef"`
}

// auditRequests reads the requests of an audit log (one per auditID) made
// at or after from, each with its client and time since zero.
func auditRequests(path string, from, zero time.Time) ([]stormRequest, map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return parseAudit(bufio.NewScanner(f), from, zero)
}

// parseAudit is auditRequests over the lines of sc; verbs counts the
// requests by verb and resource ("watch endpointslices").
func parseAudit(sc *bufio.Scanner, from, zero time.Time) ([]stormRequest, map[string]int, error) {
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	seen := map[string]bool{}
	verbs := map[string]int{}
	var out []stormRequest
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, nil, fmt.Errorf("audit line %q: %w", sc.Text(), err)
		}
		if seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		at, err := time.Parse(time.RFC3339Nano, e.Received)
		if err != nil {
			return nil, nil, fmt.Errorf("audit event %s: %w", e.AuditID, err)
		}
		if at.Before(from) {
			continue
		}
		res := ""
		if e.ObjectRef != nil {
			res = e.ObjectRef.Resource
		}
		verbs[e.Verb+" "+res]++
		out = append(out, stormRequest{client: e.User.Username, at: at.Sub(zero)})
	}
	return out, verbs, sc.Err()
}

// upstreamService is the Service node-local follows by default
// (--upstream-service).
const upstreamNS, upstreamName = "kube-system", "dnsconfigurer-dns-upstream"

// createUpstreamService creates the upstream Service and one
// EndpointSlice with one endpoint at addr's port.
func createUpstreamService(ctx context.Context, client kubernetes.Interface, addr string) error {
	host, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	_, err := client.CoreV1().Services(upstreamNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: upstreamName, Namespace: upstreamNS},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "dns-tcp", Port: int32(port), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The API server refuses a loopback endpoint: the one endpoint is not
	// ready (node-local skips it), and the stages ask the stub at
	// --cluster-upstream; their watch is what is measured.
	tcp, p32, name, ready, zone := corev1.ProtocolTCP, int32(port), "dns-tcp", false, scaleZones[0]
	host = "10.255.255.1"
	_, err = client.DiscoveryV1().EndpointSlices(upstreamNS).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: upstreamName + "-1", Namespace: upstreamNS,
			Labels: map[string]string{discoveryv1.LabelServiceName: upstreamName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &p32, Protocol: &tcp}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, Zone: &zone}},
	}, metav1.CreateOptions{})
	return err
}

// apiServerLoad is the API server's memory and CPU over a window.
type apiServerLoad struct {
	rssKiB   int64   // median of the window's samples
	cpuRate  float64 // CPU seconds a second
	watchers float64
}

// measureAPIServer samples the API server for d.
func measureAPIServer(ctx context.Context, t *testing.T, cp *apiserver.ControlPlane, admin kubernetes.Interface, d time.Duration) apiServerLoad {
	t.Helper()
	pids := cp.PIDs()
	api := pids[len(pids)-1]
	s := startRSSSampler(250*time.Millisecond, api)
	c0, from := cpuOf([]int{api}), time.Now()
	wait(ctx, t, d)
	c1, to := cpuOf([]int{api}), time.Now()
	s.stop()
	return apiServerLoad{rssKiB: medianKiB(s.between(api, from, to)), cpuRate: (c1 - c0).Seconds() / to.Sub(from).Seconds(),
		watchers: apiWatchers(ctx, admin)}
}

// scaleSliceChurn is the EndpointSlice churn under which the watchers'
// CPU is measured: every change anywhere in the cluster is an event the
// API server's watch cache filters for every watcher of EndpointSlices.
var scaleSliceChurn = flag.Int("scale-nodelocal-churn", 50, "TestScale: EndpointSlice changes per second (labels of the load's slices) while the API server's CPU is measured busy")

// measureIdleBusy waits for the control plane to settle and measures the
// API server at rest for 20 s, then for 20 s under scaleSliceChurn.
func measureIdleBusy(ctx context.Context, t *testing.T, cp *apiserver.ControlPlane, admin kubernetes.Interface, c *scaleCluster) (idle, busy apiServerLoad) {
	t.Helper()
	if took, ok := settle(ctx, cp.PIDs(), 2*time.Minute); !ok {
		t.Logf("node-local: control plane still busy after %v", took.Round(time.Second))
	}
	idle = measureAPIServer(ctx, t, cp, admin, 20*time.Second)
	cctx, cancel := context.WithCancel(ctx)
	var errs atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(max(*scaleSliceChurn, 1)))
		defer tick.Stop()
		sem := make(chan struct{}, 16)
		for n := 0; ; n++ {
			select {
			case <-cctx.Done():
				return
			case <-tick.C:
			}
			i := n * 7919 % c.services
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				patch := fmt.Sprintf(`{"metadata":{"labels":{"churn":"%d"}}}`, n)
				if _, err := admin.DiscoveryV1().EndpointSlices(c.namespace(i)).Patch(cctx, c.serviceName(i)+"-abcde", types.MergePatchType,
					[]byte(patch), metav1.PatchOptions{}); err != nil && cctx.Err() == nil {
					errs.Add(1)
				}
			})
		}
	})
	busy = measureAPIServer(ctx, t, cp, admin, 20*time.Second)
	cancel()
	wg.Wait()
	if n := errs.Load(); n > 0 {
		t.Logf("node-local: %d EndpointSlice changes failed", n)
	}
	return idle, busy
}

// nodeLocalPhase runs nl.n node-local stages against the API server and
// returns the report lines: what they cost it, per watcher and
// extrapolated to the Nodes, and how they came back after a
// restart of it.
func nodeLocalPhase(ctx context.Context, t *testing.T, cp *apiserver.ControlPlane, admin kubernetes.Interface, nl *nodeLocalUsers,
	bin, stubAddr string, c *scaleCluster) []string {
	t.Helper()
	if err := createUpstreamService(ctx, admin, stubAddr); err != nil {
		t.Fatalf("node-local: the upstream Service: %v", err)
	}
	dir := t.TempDir()
	if took, ok := settle(ctx, cp.PIDs(), time.Minute); !ok {
		t.Logf("node-local: control plane still busy after %v", took.Round(time.Second))
	}
	base, baseBusy := measureIdleBusy(ctx, t, cp, admin, c)
	t.Logf("node-local: API server before the watchers: RSS %s, CPU %.3f s/s at rest, %.3f s/s under %d EndpointSlice changes/s; %.0f watches",
		fmtMiB(base.rssKiB), base.cpuRate, baseBusy.cpuRate, *scaleSliceChurn, base.watchers)

	started := time.Now()
	procs := make([]*server, nl.n)
	tries := make([]int, nl.n)
	start := func(i int) {
		ucfg, err := cp.UserConfig(nl.name(i))
		if err != nil {
			t.Fatal(err)
		}
		kc := filepath.Join(dir, nl.name(i)+".kubeconfig")
		if err := apiserver.WriteKubeconfig(kc, ucfg); err != nil {
			t.Fatal(err)
		}
		addr := testkit.FreeAddr(t, "127.0.0.1")
		tries[i]++
		args := []string{"serve", "--mode", "node-local", "--listen", addr, "--cluster-upstream", stubAddr, "--cluster-domain", "cluster.local",
			"--resolv-conf", "", "--node-name", c.nodeName(i % c.nodes), "--kubeconfig", kc, "--udp-sockets", "1",
			"--lock-file", filepath.Join(dir, nl.name(i)+".lock")}
		if *scaleNLJitter != "" {
			args = append(args, "--watch-jitter", *scaleNLJitter)
		}
		procs[i] = startScaleServer(t, fmt.Sprintf("%s-%d", nl.name(i), tries[i]), dir, addr, "", []string{"GOMAXPROCS=1", quietEnv}, "", bin, args...)
	}
	for i := range nl.n {
		start(i)
		if i%25 == 24 {
			wait(ctx, t, 500*time.Millisecond)
		}
	}
	// Every watcher's watch is up. A stage whose port was taken between
	// FreeAddr and its bind (by another stage's connection) starts again
	// on another.
	want := base.watchers + float64(nl.n)
	for apiWatchers(ctx, admin) < want {
		for i, p := range procs {
			if !p.hasExited() {
				continue
			}
			if strings.Contains(tail(p.logPath, 2048), "address already in use") && tries[i] < 3 {
				start(i)
				continue
			}
			t.Fatalf("node-local %s exited: %v\n%s", p.name, p.waitErr, tail(p.logPath, 2048))
		}
		if time.Since(started) > 5*time.Minute {
			t.Fatalf("node-local: %.0f watches after 5 minutes, want %.0f", apiWatchers(ctx, admin), want)
		}
		wait(ctx, t, time.Second)
	}
	t.Logf("node-local: %d watchers watching %v after the first start", nl.n, time.Since(started).Round(time.Millisecond))
	var procRSS []rssSample
	for _, p := range procs {
		if u, err := readUsage(p.cmd.Process.Pid); err == nil {
			procRSS = append(procRSS, rssSample{rssKiB: u.anonKiB})
		}
	}
	with, withBusy := measureIdleBusy(ctx, t, cp, admin, c)
	t.Logf("node-local: API server with %d watchers: RSS %s, CPU %.3f s/s at rest, %.3f s/s under %d EndpointSlice changes/s; %.0f watches; each stage's RssAnon median %s (its VmRSS counts the binary's shared pages too)",
		nl.n, fmtMiB(with.rssKiB), with.cpuRate, withBusy.cpuRate, *scaleSliceChurn, with.watchers, fmtMiB(medianKiB(procRSS)))
	n := float64(nl.n)
	memPer := float64(with.rssKiB-base.rssKiB) / n
	cpuPer := (with.cpuRate - base.cpuRate) / n
	busyPer := (withBusy.cpuRate - baseBusy.cpuRate) / n
	watchPer := (with.watchers - base.watchers) / n

	// The restart storm.
	stop := time.Now()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	wait(ctx, t, time.Until(stop.Add(*scaleOutage)))
	startAt := time.Now()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for apiWatchers(ctx, admin) < want && time.Since(back) < 3*time.Minute {
		wait(ctx, t, time.Second)
	}
	wait(ctx, t, 5*time.Second)
	// The watchers come back as soon as the new process serves, before
	// its readiness: the storm is timed from the process's start.
	reqs, verbs, err := auditRequests(nl.auditPath, startAt, startAt)
	if err != nil {
		t.Fatal(err)
	}
	st := stormOf(nl.n, reqs)
	t.Logf("node-local: restart storm (times from the API server process's start; ready after %v): %s; requests by kind %v",
		back.Sub(startAt).Round(time.Millisecond), st, verbs)
	for _, p := range procs {
		p.stop()
	}

	nodes := float64(*scaleNodes)
	per := func(v float64, unit string) string { return fmt.Sprintf("%.3g %s", v, unit) }
	return []string{
		scaleLine("node-local watchers run", fmtCount(int64(nl.n), "stages"), "n/a (NodeLocal DNSCache watches nothing)"),
		scaleLine("node-local API server watches per watcher", per(watchPer, "watches"), "0 watches"),
		scaleLine("node-local API server RSS per watcher", per(memPer, "KiB"), "n/a"),
		scaleLine("node-local API server CPU per watcher", per(cpuPer*1000, "ms/s"), "n/a"),
		scaleLine(fmt.Sprintf("node-local API server RSS at %.0f watchers (linear from %d)", nodes, nl.n), fmtMiB(int64(memPer*nodes)), "n/a"),
		scaleLine(fmt.Sprintf("node-local API server CPU at %.0f watchers (linear from %d)", nodes, nl.n), per(cpuPer*nodes, "s/s"), "n/a"),
		scaleLine(fmt.Sprintf("node-local API server CPU per watcher under %d EndpointSlice changes/s", *scaleSliceChurn), per(busyPer*1000, "ms/s"), "n/a"),
		scaleLine(fmt.Sprintf("node-local API server CPU at %.0f watchers under %d EndpointSlice changes/s (linear from %d)", nodes, *scaleSliceChurn, nl.n),
			per(busyPer*nodes, "s/s"), "n/a"),
		scaleLine("node-local restart storm peak request rate", fmt.Sprintf("%d requests/s (%d in 100 ms)", st.peakPerSec, st.peakPer100), "n/a"),
		scaleLine("node-local restart storm spread (first request after the API server process start, p50/p90/last)",
			fmt.Sprintf("%.2f s / %.2f s / %.2f s, %d of %d back, ready at %.2f s", st.p50.Seconds(), st.p90.Seconds(), st.last.Seconds(),
				len(st.firsts), st.clients, back.Sub(startAt).Seconds()), "n/a"),
		scaleLine("node-local restart storm spread (each watcher's last request, its relist, p50/p90/last)",
			fmt.Sprintf("%.2f s / %.2f s / %.2f s", st.lastP50.Seconds(), st.lastP90.Seconds(), st.lastMax.Seconds()), "n/a"),
		scaleLine("node-local restart storm requests", fmt.Sprintf("%d requests (%s)", len(st.requests), kinds(verbs)), "n/a"),
	}
}

// kinds lists counts by kind, sorted: "12 list endpointslices, 300 watch
// endpointslices".
func kinds(by map[string]int) string {
	var out []string
	for k, n := range by {
		out = append(out, fmt.Sprintf("%d %s", n, k))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
