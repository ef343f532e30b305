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

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// The node: what kubelet's flags, the shim's and the servers' say.
const (
	clusterDNS    = "10.96.0.10"
	nodeLocalDNS  = "169.254.20.10"
	clusterDomain = "cluster.local"
	upstream1     = "192.0.2.53"
	upstream2     = "192.0.2.54"

	// The node's resolv.conf before and after the rewrite.
	hostResolv    = "nameserver " + upstream1 + "\nsearch corp.example\n"
	newHostResolv = "nameserver " + upstream2 + "\nsearch corp.example\n"

	// /metrics of the servers, on the namespace's loopback.
	clusterMetrics   = "127.0.0.1:9153"
	nodeLocalMetrics = "127.0.0.1:9253"
	shimMetrics      = "127.0.0.1:9353"
)

// The answers of the two upstream stubs for www.example.com.
var (
	stub1Answers = []string{"2001:db8::53", "203.0.113.53"}
	stub2Answers = []string{"198.51.100.54", "2001:db8::54"}
)

// objects are the cluster the cluster DNS serves (--objects).
const objects = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.1.1
  ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: other}
spec:
  clusterIP: 10.96.2.2
  ports: [{name: postgres, port: 5432, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: peers, namespace: shop}
spec:
  clusterIP: None
  ports: [{name: gossip, port: 7946, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: peers-abcde
  namespace: shop
  labels: {kubernetes.io/service-name: peers}
addressType: IPv4
ports: [{name: gossip, port: 7946, protocol: TCP}]
endpoints:
- addresses: [10.244.1.10]
  hostname: peer-0
  conditions: {ready: true}
`

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
	stub1  *counter
	stub2  *counter
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
	binary(t) // build before anything is timed
	c := &chain{h: h, http: nsHTTP(h), resolv: h.HostResolvConf}
	for _, a := range []string{clusterDNS, nodeLocalDNS, upstream1, upstream2} {
		if err := h.AddAddress(ctx, netip.MustParsePrefix(a+"/32")); err != nil {
			t.Fatal(err)
		}
	}
	c.stub1 = newCounter(upstreamStub(stub1Answers[1], stub1Answers[0]))
	c.stub2 = newCounter(upstreamStub(stub2Answers[0], stub2Answers[1]))
	serveStub(t, h, upstream1+":53", c.stub1)
	serveStub(t, h, upstream2+":53", c.stub2)

	dir := t.TempDir()
	objDir := filepath.Join(dir, "objects")
	if err := os.Mkdir(objDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(objDir, "cluster.yaml"), []byte(objects), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := startProc(t, h, "cluster DNS", "serve", "--listen", clusterDNS+":53", "--cluster-domain", clusterDomain,
		"--objects", objDir, "--upstream-resolv-conf", c.resolv, "--metrics-listen", clusterMetrics)
	local := startProc(t, h, "node-local", "serve", "--mode", "node-local", "--listen", nodeLocalDNS+":53",
		"--cluster-upstream", clusterDNS+":53", "--cluster-domain", clusterDomain, "--resolv-conf", c.resolv,
		"--metrics-listen", nodeLocalMetrics)
	sock := filepath.Join(dir, "shim.sock")
	shim := startProc(t, h, "shim", append([]string{"shim", "--listen", sock, "--runtime-endpoint", h.Endpoint,
		"--metrics-listen", shimMetrics}, nodeFlags(c.resolv)...)...)
	waitReady(t, c.http, cluster, clusterMetrics)
	waitReady(t, c.http, local, nodeLocalMetrics)

	c.shim = h.Dial(sock)
	var last error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if shim.exitedEarly() {
			t.Fatalf("shim exited: %v\n%s", shim.cmd.ProcessState, shim.log.String())
		}
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		_, last = c.shim.Runtime.Version(callCtx, &runtimeapi.VersionRequest{})
		cancel()
		if last == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shim not answering: %v\n%s", last, shim.log.String())
		}
	}
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
	want := render(t, pod, nodeFlags(c.resolv)...)
	k := render(t, kubeletView(pod), kubeletFlags(c.resolv)...)
	sb, err := c.shim.RunPod(ctx, containerd.PodSpec{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID),
		Hostname: k.Hostname, DNS: k.dns(), Annotations: pod.Annotations})
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
	if w := containerd.ResolvConfFor(want.dns()); got != w {
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
		q.nodeLocal = m["dnsconfigurer_nodelocal_cache_hits_total"] + m["dnsconfigurer_nodelocal_cache_misses_total"]
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
		for _, s := range []*counter{c.stub1, c.stub2} {
			for k, v := range s.snapshot() {
				q.upstream[k] += v
			}
		}
		return q
	}
	q := read()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		again := read()
		if again.String() == q.String() {
			return q
		}
		q = again
	}
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
// upstream) under the running chain: the cluster DNS forwards to the new
// upstream, and a new Default pod gets the new nameserver, without a
// restart.
func (c *chain) rewriteHostResolvConf(t *testing.T, ctx context.Context, pods []*podUnderTest) {
	t.Helper()
	before := c.stub2.snapshot()
	changed := time.Now()
	if err := os.WriteFile(c.resolv, []byte(newHostResolv), 0o644); err != nil {
		t.Fatal(err)
	}

	// The cluster DNS's forwarding follows the file: poll the external
	// name from the ClusterFirst pod (cluster DNS, then upstream) and from
	// the autopath pod (node-local, cluster DNS, upstream).
	for _, p := range pods {
		if p.firstHop != clusterDNS && p.firstHop != nodeLocalDNS || p.pod.Spec.DNSPolicy == corev1.DNSNone {
			continue
		}
		var got []string
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			got, err = c.lookup(ctx, p, "www.example.com", "IP")
			if err == nil && slices.Equal(got, stub2Answers) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || !slices.Equal(got, stub2Answers) {
			t.Errorf("%s: www.example.com after the rewrite = %v, %v; want the new upstream's %v", p.pod.Name, got, err, stub2Answers)
			continue
		}
		t.Logf("%s (%s): www.example.com answered by the new upstream %v after the rewrite", p.pod.Name, dnsPolicyName(p.pod), time.Since(changed).Round(time.Millisecond))
	}
	if after := c.stub2.snapshot(); after[dns.TypeA] <= before[dns.TypeA] {
		t.Errorf("the new upstream received no A query (%v)", after)
	}

	// A new Default pod: kubelet reads the file for it, the shim keeps
	// kubelet's config for a pod it cannot tell from None without an API
	// server, and containerd writes it.
	p := c.run(t, ctx, newPod("default-after", corev1.DNSDefault, nil))
	rc, err := c.shim.ResolvConf(ctx, p.ctr.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "search corp.example\nnameserver " + upstream2 + "\n"; rc != want {
		t.Errorf("new Default pod: /etc/resolv.conf = %q, want %q", rc, want)
	}
	if got, err := c.lookup(ctx, p, "www.example.com", "IP"); err != nil || !slices.Equal(got, stub2Answers) {
		t.Errorf("new Default pod: www.example.com = %v, %v; want %v", got, err, stub2Answers)
	}
	t.Logf("new Default pod after the rewrite: /etc/resolv.conf\n%s", rc)

	// The Default pod started before keeps the file it was given.
	for _, old := range pods {
		if old.pod.Spec.DNSPolicy != corev1.DNSDefault {
			continue
		}
		rc, err := c.shim.ResolvConf(ctx, old.ctr.ID)
		if err != nil || !strings.Contains(rc, "nameserver "+upstream1) {
			t.Errorf("old Default pod: /etc/resolv.conf = %q, %v; want it unchanged (nameserver %s)", rc, err, upstream1)
		}
	}
}

// dnsPolicyName names a pod's policy, the autopath annotation included.
func dnsPolicyName(p *corev1.Pod) string {
	if p.Annotations[policy.AnnotationDNSPolicy] != "" {
		return p.Annotations[policy.AnnotationDNSPolicy]
	}
	return string(p.Spec.DNSPolicy)
}
