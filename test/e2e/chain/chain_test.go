package chain

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// The node: what kubelet's flags, the shim's and the servers' say.
const (
	clusterDNS    = "10.96.0.10"
	nodeLocalDNS  = "169.254.20.10"
	clusterDomain = "cluster.local"
	upstream1     = "192.0.2.53"
	upstream2     = "192.0.2.54"

	// The node's resolv.conf before and after the rewrite: a new upstream
	// and a new search domain, which only the new upstream serves.
	hostResolv    = "nameserver " + upstream1 + "\nsearch corp.example\n"
	newHostResolv = "nameserver " + upstream2 + "\nsearch corp2.example\n"

	// /metrics of the servers, on the namespace's loopback.
	clusterMetrics   = "127.0.0.1:9153"
	nodeLocalMetrics = "127.0.0.1:9253"
	shimMetrics      = "127.0.0.1:9353"
)

// The answers of the two upstream stubs for www.example.com (sorted), and
// the name under the new search domain.
var (
	stub1Answers    = []string{"2001:db8::53", "203.0.113.53"}
	stub2Answers    = []string{"198.51.100.54", "2001:db8::54"}
	intranetAnswers = []string{"198.51.100.99"}
)

// The cluster the cluster DNS serves (--objects): the autopath test's
// shop/web and other/db, and the headless shop/peers.
const (
	shopObjects  = "../testdata/shop.yaml"
	peersObjects = "../testdata/peers.yaml"
)

// kubeletFlags are the node settings kubelet has (render with them is the
// sandbox config kubelet sends); nodeFlags are the shim's.
func kubeletFlags(resolv string) []string {
	return []string{"--cluster-dns", clusterDNS, "--cluster-domain", clusterDomain, "--resolv-conf", resolv}
}

func nodeFlags(resolv string) []string {
	return append(kubeletFlags(resolv), "--node-local-dns", nodeLocalDNS)
}

// chain is the running chain: the harness, the servers and the shim.
type chain struct {
	h      *containerd.Harness
	http   *http.Client
	stub1  *testkit.Upstream
	stub2  *testkit.Upstream
	shim   *containerd.Client
	resolv string
}

// startChain starts containerd, the stubs, the cluster DNS, the node-local
// stage and the shim, all in the harness's network namespace.
func startChain(t *testing.T, ctx context.Context) *chain {
	t.Helper()
	var routes []netip.Prefix
	for _, p := range []string{clusterDNS + "/32", nodeLocalDNS + "/32", "192.0.2.0/24"} {
		routes = append(routes, netip.MustParsePrefix(p))
	}
	h := containerd.Start(t, containerd.Options{Routes: routes, HostResolvConf: hostResolv})
	buildbin.Dnsconfigurer(t) // build before anything is timed
	c := &chain{h: h, http: testkit.NetNSClient(h.NetNSPath), resolv: h.HostResolvConf}
	for _, a := range []string{clusterDNS, nodeLocalDNS, upstream1, upstream2} {
		if err := h.AddAddress(ctx, netip.MustParsePrefix(a+"/32")); err != nil {
			t.Fatal(err)
		}
	}
	c.stub1 = serveStub(t, h, upstream1+":53", upstreamStub(map[string][]string{"www.example.com.": stub1Answers}))
	c.stub2 = serveStub(t, h, upstream2+":53", upstreamStub(map[string][]string{"www.example.com.": stub2Answers, "intranet.corp2.example.": intranetAnswers}))

	dir := t.TempDir()
	objDir := filepath.Join(dir, "objects")
	if err := os.Mkdir(objDir, 0o755); err != nil {
		t.Fatal(err)
	}
	shop, err := os.ReadFile(shopObjects)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(objDir, "cluster.yaml"), shop, 0o644); err != nil {
		t.Fatal(err)
	}
	peers, err := os.ReadFile(peersObjects)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(objDir, "peers.yaml"), peers, 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := startProc(t, h, "cluster DNS", "serve", "--listen", clusterDNS+":53", "--cluster-domain", clusterDomain,
		"--objects", objDir, "--upstream-resolv-conf", c.resolv, "--metrics-listen", clusterMetrics, "--log-level", "debug")
	local := startProc(t, h, "node-local", "serve", "--mode", "node-local", "--listen", nodeLocalDNS+":53",
		"--cluster-upstream", clusterDNS+":53", "--cluster-domain", clusterDomain, "--resolv-conf", c.resolv, "--external", "direct",
		"--metrics-listen", nodeLocalMetrics, "--log-level", "debug")
	sock := filepath.Join(dir, "shim.sock")
	shim := startProc(t, h, "shim", append([]string{"shim", "--listen", sock, "--runtime-endpoint", h.Endpoint,
		"--metrics-listen", shimMetrics, "--log-level", "debug"}, nodeFlags(c.resolv)...)...)
	waitReady(t, c.http, cluster, clusterMetrics)
	waitReady(t, c.http, local, nodeLocalMetrics)

	c.shim = h.Dial(sock)
	testkit.WaitFor(t, 20*time.Second, func() error {
		if shim.HasExited() {
			t.Fatalf("shim exited: %v\n%s", shim.Cmd.ProcessState, shim.Output.String())
		}
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := c.shim.Runtime.Version(callCtx, &runtimeapi.VersionRequest{}); err != nil {
			return fmt.Errorf("shim not answering: %v\n%s", err, shim.Output.String())
		}
		return nil
	})
	return c
}

// podUnderTest is a pod started through the shim with a running container.
type podUnderTest struct {
	pod *corev1.Pod
	// firstHop is the server its resolv.conf points at.
	firstHop string
	sandbox  *containerd.Pod
	ctr      *containerd.Container
}

func newPod(name string, dnsPolicy corev1.DNSPolicy, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("00000000-0000-4000-8000-0000" + fmt.Sprintf("%08x", len(name)*7919+int(name[0]))),
			Annotations: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: "node-1", DNSPolicy: dnsPolicy, Containers: []corev1.Container{{Name: "main", Image: containerd.TestImage}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// run starts pod through the shim with the sandbox config kubelet would
// send now (kubelet reads the node's resolv.conf for every pod), starts a
// sleeping container and checks that its /etc/resolv.conf is what
// `dnsconfigurer render` gives with the shim's settings.
func (c *chain) run(t *testing.T, ctx context.Context, pod *corev1.Pod) *podUnderTest {
	t.Helper()
	want := buildbin.Render(t, pod, nodeFlags(c.resolv)...)
	k := buildbin.Render(t, kubeletView(pod), kubeletFlags(c.resolv)...)
	sb, err := c.shim.RunPod(ctx, containerd.PodSpec{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID),
		Hostname: k.Hostname, DNS: k.DNSConfig(), Annotations: pod.Annotations})
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := c.shim.StartContainer(ctx, sb, "main")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.shim.ResolvConf(ctx, ctr.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w := containerd.ResolvConfFor(want.DNSConfig()); got != w {
		t.Errorf("%s: /etc/resolv.conf =\n%s\nwant (render)\n%s", pod.Name, got, w)
	}
	p := &podUnderTest{pod: pod, sandbox: sb, ctr: ctr}
	if len(want.Nameservers) > 0 {
		p.firstHop = want.Nameservers[0]
	}
	return p
}

// lookup runs `testbin lookup host typ` in the pod's container: the pure Go
// resolver with the container's /etc/resolv.conf. It returns the sorted
// answers.
func (c *chain) lookup(ctx context.Context, p *podUnderTest, host, typ string) ([]string, error) {
	out, err := c.shim.Testbin(ctx, p.ctr.ID, "lookup", host, typ)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return lines, nil
}

// queryCounts are the queries each server had received at one moment.
type queryCounts struct {
	nodeLocal float64            // cache hits + misses
	cluster   map[string]float64 // by query type
	upstream  map[uint16]int     // both stubs, by query type
}

var typeLabel = regexp.MustCompile(`type="([^"]*)"`)

// counts reads the servers' counters. The metrics are updated as a reply
// is sent, so it reads until two reads 50ms apart agree.
func (c *chain) counts(t *testing.T) queryCounts {
	t.Helper()
	read := func() queryCounts {
		q := queryCounts{cluster: map[string]float64{}, upstream: map[uint16]int{}}
		m, err := scrape(c.http, nodeLocalMetrics)
		if err != nil {
			t.Fatal(err)
		}
		for series, v := range m { // by query type
			if strings.HasPrefix(series, "dnsconfigurer_nodelocal_cache_hits_total") || strings.HasPrefix(series, "dnsconfigurer_nodelocal_cache_misses_total") {
				q.nodeLocal += v
			}
		}
		m, err = scrape(c.http, clusterMetrics)
		if err != nil {
			t.Fatal(err)
		}
		for series, v := range m {
			if strings.HasPrefix(series, "dnsconfigurer_dnsserver_requests_total{") {
				if mt := typeLabel.FindStringSubmatch(series); mt != nil {
					q.cluster[mt[1]] += v
				}
			}
		}
		for _, s := range []*testkit.Upstream{c.stub1, c.stub2} {
			for k, v := range byType(s) {
				q.upstream[k] += v
			}
		}
		return q
	}
	q := read()
	testkit.Poll(time.Second, 50*time.Millisecond, func() bool {
		again := read()
		settled := again.String() == q.String()
		q = again
		return settled
	})
	return q
}

func (q queryCounts) String() string {
	return fmt.Sprintf("%v %v %v", q.nodeLocal, q.cluster, q.upstream)
}

// hop is what one server received during one lookup.
type hop struct{ total, a, aaaa, srv int }

func (h hop) String() string {
	if h.total == 0 {
		return "0"
	}
	var parts []string
	for _, p := range []struct {
		n    string
		v    int
		show bool
	}{{"A", h.a, h.a > 0}, {"AAAA", h.aaaa, h.aaaa > 0}, {"SRV", h.srv, h.srv > 0}} {
		if p.show {
			parts = append(parts, fmt.Sprintf("%s %d", p.n, p.v))
		}
	}
	return fmt.Sprintf("%d (%s)", h.total, strings.Join(parts, ", "))
}

// delta is what each server received between two counts.
func delta(before, after queryCounts) (nodeLocal int, cluster, upstream hop) {
	nodeLocal = int(after.nodeLocal - before.nodeLocal)
	for typ, v := range after.cluster {
		d := int(v - before.cluster[typ])
		cluster.total += d
		switch typ {
		case "A":
			cluster.a += d
		case "AAAA":
			cluster.aaaa += d
		case "SRV":
			cluster.srv += d
		}
	}
	for typ, v := range after.upstream {
		d := v - before.upstream[typ]
		upstream.total += d
		switch typ {
		case dns.TypeA:
			upstream.a += d
		case dns.TypeAAAA:
			upstream.aaaa += d
		case dns.TypeSRV:
			upstream.srv += d
		}
	}
	return nodeLocal, cluster, upstream
}

// TestChain runs the whole chain: pods of each dnsPolicy through the shim
// resolve cluster and external names through the node-local stage, the
// cluster DNS and the upstream stubs; then the node's resolv.conf is
// rewritten under the running chain.
func TestChain(t *testing.T) {
	containerd.Require(t)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	c := startChain(t, ctx)
	t.Logf("chain up in %v (containerd %s)", time.Since(begin).Round(time.Millisecond), c.h.ContainerdVersion)

	ndots2 := "2"
	pods := []*podUnderTest{
		c.run(t, ctx, newPod("cluster-first", corev1.DNSClusterFirst, nil)),
		c.run(t, ctx, newPod("autopath", corev1.DNSClusterFirst, func(p *corev1.Pod) {
			p.Annotations[policy.AnnotationDNSPolicy] = string(policy.ClusterFirstWithAutopath)
		})),
		// Not the ClusterFirst shape (no bare cluster domain in the
		// searches): see TestChain/none-shaped-like-cluster-first.
		c.run(t, ctx, newPod("none", corev1.DNSNone, func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{clusterDNS},
				Searches: []string{"shop.svc." + clusterDomain, "svc." + clusterDomain},
				Options:  []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots2}}}
		})),
		c.run(t, ctx, newPod("default", corev1.DNSDefault, nil)),
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, p := range pods {
		rc, _ := c.shim.ResolvConf(ctx, p.ctr.ID)
		t.Logf("%s (%s) /etc/resolv.conf:\n%s", p.pod.Name, dnsPolicyName(p.pod), rc)
	}

	lookups := []struct {
		name, host, typ string
		want            []string
		cluster         bool // a cluster name: a Default pod cannot resolve it
	}{
		{"same-namespace short name", "web", "IP", []string{"10.96.1.1"}, true},
		{"<svc>.<other-ns>", "db.other", "IP", []string{"10.96.2.2"}, true},
		{"headless pod hostname", "peer-0.peers", "IP", []string{"10.244.1.10"}, true},
		{"SRV of a named port", "_http._tcp.web", "SRV", []string{"0 100 80 web.shop.svc.cluster.local."}, true},
		{"external name", "www.example.com", "IP", stub1Answers, false},
	}
	table := []string{
		"| pod | lookup | answer | node-local | cluster DNS | upstream |",
		"|---|---|---|---|---|---|",
	}
	sent := map[string]int{} // "<policy> <host>": queries the pod sent
	for _, p := range pods {
		for _, lk := range lookups {
			before := c.counts(t)
			got, err := c.lookup(ctx, p, lk.host, lk.typ)
			nl, cl, up := delta(before, c.counts(t))
			answer := strings.Join(got, ", ")
			switch {
			case p.pod.Spec.DNSPolicy == corev1.DNSDefault && lk.cluster:
				// The node's resolver knows nothing of the cluster.
				if err == nil || !strings.Contains(err.Error(), "no such host") {
					t.Errorf("%s: %s %s = %v, %v; want no such host", p.pod.Name, lk.host, lk.typ, got, err)
				}
				answer = "NXDOMAIN (expected)"
			case err != nil:
				t.Errorf("%s: %s %s: %v", p.pod.Name, lk.host, lk.typ, err)
				answer = "error"
			case !slices.Equal(got, lk.want):
				t.Errorf("%s: %s %s = %v, want %v", p.pod.Name, lk.host, lk.typ, got, lk.want)
			}
			table = append(table, fmt.Sprintf("| %s | %s `%s` %s | %s | %d | %s | %s |", dnsPolicyName(p.pod), lk.name, lk.host, lk.typ, answer, nl, cl, up))
			sent[dnsPolicyName(p.pod)+" "+lk.host] = map[string]int{nodeLocalDNS: nl, clusterDNS: cl.total, upstream1: up.total}[p.firstHop]

			// What the pod itself sent, at its first hop.
			switch p.firstHop {
			case nodeLocalDNS:
				families := 2
				if lk.typ == "SRV" {
					families = 1
				}
				if nl > families {
					t.Errorf("%s: %s: the node-local stage received %d queries; autopath allows 1 per query type (%d)", p.pod.Name, lk.host, nl, families)
				}
				// Identical queries from one pod are answered from the
				// cache or coalesced: at most one per type goes on.
				if cl.a > 1 || cl.aaaa > 1 || cl.srv > 1 {
					t.Errorf("%s: %s: the cluster DNS received %v; autopath allows 1 per query type", p.pod.Name, lk.host, cl)
				}
			case clusterDNS:
				if nl != 0 {
					t.Errorf("%s: %s: the node-local stage received %d queries from a pod that does not use it", p.pod.Name, lk.host, nl)
				}
				if cl.total == 0 && err == nil {
					t.Errorf("%s: %s: the cluster DNS received no query", p.pod.Name, lk.host)
				}
			case upstream1:
				if nl != 0 || cl.total != 0 {
					t.Errorf("%s: %s: a Default pod's lookup reached the cluster servers (node-local %d, cluster %v)", p.pod.Name, lk.host, nl, cl)
				}
			}
		}
	}
	t.Logf("queries each server received per lookup (pure Go resolver in the container; total (by type)):\n%s", strings.Join(table, "\n"))
	// Where ClusterFirst walks the search list, autopath sends fewer.
	for _, host := range []string{"db.other", "www.example.com"} {
		cf, ap := sent[string(corev1.DNSClusterFirst)+" "+host], sent[string(policy.ClusterFirstWithAutopath)+" "+host]
		if ap >= cf {
			t.Errorf("%s: the autopath pod sent %d queries, the ClusterFirst pod %d; want fewer with autopath", host, ap, cf)
		}
	}
	if m, err := scrape(c.http, shimMetrics); err == nil {
		if v := m[`dnsconfigurer_cri_sandboxes_total{outcome="rewritten",source="sandbox"}`]; v != 1 {
			t.Errorf("shim: rewritten sandboxes = %v, want 1 (the autopath pod)", v)
		}
	} else {
		t.Errorf("shim metrics: %v", err)
	}

	// A None pod whose dnsConfig has the ClusterFirst shape but not the
	// node's searches (a common way to drop them). Without an API server
	// the shim sees only kubelet's dns_config.
	t.Run("none-shaped-like-cluster-first", func(t *testing.T) {
		c.run(t, ctx, newPod("none-cf-shape", corev1.DNSNone, func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{clusterDNS},
				Searches: []string{"shop.svc." + clusterDomain, "svc." + clusterDomain, clusterDomain},
				Options:  []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots2}}}
		}))
	})

	c.rewriteHostResolvConf(t, ctx, pods)
	t.Logf("TestChain took %v", time.Since(begin).Round(time.Millisecond))
}

// rewriteHostResolvConf rewrites the node's resolv.conf in place (a new
// upstream and a new search domain) under the running chain. Without a
// restart: every watcher (shim, cluster DNS, node-local) publishes it, the
// cluster DNS forwards to the new upstream, the node-local stage sends the
// new search domain in the autopath option, and new pods get the new file
// (Default) or the new host search (ClusterFirst), while running pods keep
// theirs.
func (c *chain) rewriteHostResolvConf(t *testing.T, ctx context.Context, pods []*podUnderTest) {
	const reloaded = `dnsconfigurer_hostresolv_reloads_total{result="ok"}`
	watchers := []struct{ name, addr string }{{"shim", shimMetrics}, {"cluster DNS", clusterMetrics}, {"node-local", nodeLocalMetrics}}
	before := map[string]float64{}
	for _, w := range watchers {
		m, err := scrape(c.http, w.addr)
		if err != nil {
			t.Fatal(err)
		}
		before[w.name] = m[reloaded]
	}
	stub2Before := byType(c.stub2)
	changed := time.Now()
	if err := os.WriteFile(c.resolv, []byte(newHostResolv), 0o644); err != nil {
		t.Fatal(err)
	}

	// Each process's watcher publishes the new file.
	for _, w := range watchers {
		var m testkit.Metrics
		testkit.Poll(10*time.Second, 20*time.Millisecond, func() bool {
			var err error
			if m, err = scrape(c.http, w.addr); err != nil {
				t.Fatal(err)
			}
			return m[reloaded] > before[w.name] && m["dnsconfigurer_hostresolv_file_healthy"] == 1
		})
		if m[reloaded] <= before[w.name] {
			t.Errorf("%s: the watcher did not publish the rewritten file in 10s (reloads ok %v)", w.name, m[reloaded])
			continue
		}
		t.Logf("%s: rewritten resolv.conf published after %v", w.name, time.Since(changed).Round(time.Millisecond))
	}

	// poll runs a lookup in p until it gives want or 20s pass.
	poll := func(p *podUnderTest, host string, want []string) {
		t.Helper()
		got, err := c.lookup(ctx, p, host, "IP")
		if err != nil || !slices.Equal(got, want) {
			testkit.Poll(20*time.Second, 100*time.Millisecond, func() bool {
				got, err = c.lookup(ctx, p, host, "IP")
				return err == nil && slices.Equal(got, want)
			})
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %s after the rewrite = %v, %v; want %v", p.pod.Name, host, got, err, want)
			c.diagnose(t, ctx)
			return
		}
		t.Logf("%s (%s): %s = %v after the rewrite (%v)", p.pod.Name, dnsPolicyName(p.pod), host, got, time.Since(changed).Round(time.Millisecond))
	}
	for _, p := range pods {
		switch dnsPolicyName(p.pod) {
		case string(corev1.DNSClusterFirst):
			// cluster DNS → the new upstream.
			poll(p, "www.example.com", stub2Answers)
		case string(policy.ClusterFirstWithAutopath):
			// node-local → cluster DNS → the new upstream; and the node's
			// new search domain, which reaches the cluster DNS only in the
			// node-local stage's autopath option.
			poll(p, "www.example.com", stub2Answers)
			poll(p, "intranet", intranetAnswers)
		case string(corev1.DNSDefault):
			// A running pod keeps the file it was given.
			rc, err := c.shim.ResolvConf(ctx, p.ctr.ID)
			if want := "search corp.example\nnameserver " + upstream1 + "\n"; err != nil || rc != want {
				t.Errorf("%s: /etc/resolv.conf = %q, %v; want it unchanged, %q", p.pod.Name, rc, err, want)
			}
		}
	}
	if after := byType(c.stub2); after[dns.TypeA] <= stub2Before[dns.TypeA] {
		t.Errorf("the new upstream received no A query (%v)", after)
	}

	// New pods. kubelet reads the file for each pod; the shim keeps its
	// config for a Default pod (which it cannot tell from None without an
	// API server) and recomputes a ClusterFirst pod's with its own
	// watcher's copy (run checks both against render on the new file).
	def := c.run(t, ctx, newPod("default-after", corev1.DNSDefault, nil))
	if rc, err := c.shim.ResolvConf(ctx, def.ctr.ID); err != nil || rc != "search corp2.example\nnameserver "+upstream2+"\n" {
		t.Errorf("new Default pod: /etc/resolv.conf = %q, %v; want the new file", rc, err)
	} else {
		t.Logf("new Default pod after the rewrite: /etc/resolv.conf\n%s", rc)
	}
	poll(def, "www.example.com", stub2Answers)
	poll(def, "intranet", intranetAnswers)
	cf := c.run(t, ctx, newPod("cluster-first-after", corev1.DNSClusterFirst, nil))
	if rc, err := c.shim.ResolvConf(ctx, cf.ctr.ID); err == nil {
		t.Logf("new ClusterFirst pod after the rewrite: /etc/resolv.conf\n%s", rc)
	}
	poll(cf, "intranet", intranetAnswers)
}

// dnsPolicyName names a pod's policy, the autopath annotation included.
func dnsPolicyName(p *corev1.Pod) string {
	if p.Annotations[policy.AnnotationDNSPolicy] != "" {
		return p.Annotations[policy.AnnotationDNSPolicy]
	}
	return string(p.Spec.DNSPolicy)
}

// diagnose logs what the namespace's sockets and the servers' counters say,
// for a lookup that failed.
func (c *chain) diagnose(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, args := range [][]string{{"ss", "-uanpm"}, {"ip", "neigh"}, {"nstat", "-az", "Udp*", "Ip*Discard*", "IpExtInNoRoutes"}} {
		out, err := c.h.Command(ctx, args[0], args[1:]...).CombinedOutput()
		t.Logf("%v (%v):\n%s", args, err, out)
	}
	for _, addr := range []string{nodeLocalMetrics, clusterMetrics} {
		m, err := scrape(c.http, addr)
		var lines []string
		for k, v := range m {
			if strings.Contains(k, "dnsconfigurer_nodelocal") || strings.Contains(k, "requests_total") || strings.Contains(k, "upstream") {
				lines = append(lines, fmt.Sprintf("%s %v", k, v))
			}
		}
		sort.Strings(lines)
		t.Logf("%s metrics (%v):\n%s", addr, err, strings.Join(lines, "\n"))
	}
}
