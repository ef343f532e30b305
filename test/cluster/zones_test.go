package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
)

// zonesEnv runs TestClusterZones: "1" or "all" for the six cases and the
// upstream DNS specs, "cases" for the cases alone.
const zonesEnv = "DNSCONFIGURER_ZONES"

// The topology zones: the control-plane node and the first worker in
// zoneA, the second worker in zoneB. deploySpread puts one cluster DNS
// replica on each worker, so one in each zone.
const (
	zoneA = "zone-a"
	zoneB = "zone-b"
)

// zonePauseMS is each resolver's pause between two lookups.
const zonePauseMS = 20

// zoneLookups is how many lookups of a name a measured case takes on
// each node.
const zoneLookups = 1000

// zoneDrainDeadline bounds the time zone-a's clients may still get zone-a's
// deleted pods: the record TTL the node-local stage caches (5 s), and the
// EndpointSlice's way to the cluster DNS, with room.
const zoneDrainDeadline = 30 * time.Second

// upstreamAnswersMetric is node-local's count of the cluster DNS's answers,
// by the answering pod's topology zone relative to the node's ("same",
// "other", ...).
const upstreamAnswersMetric = "dnsconfigurer_nodelocal_cluster_upstream_answers_total"

// The headless Services of the cases, all over the same three backends.
var zoneServices = []struct{ name, distribution string }{
	{"pz", corev1.ServiceTrafficDistributionPreferSameZone},
	{"pn", corev1.ServiceTrafficDistributionPreferSameNode},
	{"pu", ""},
}

// zoneBackend is a pod behind the headless Services, one per node.
type zoneBackend struct{ name, node, zone, ip string }

// zoneClient is a resolver pod: one lookup loop on a node.
type zoneClient struct{ name, node, zone string }

// zoneRun is TestClusterZones' cluster: the zones, backends and clients.
type zoneRun struct {
	c        *Cluster
	ns       string
	zone     map[string]string // by node name
	backends []zoneBackend
	clients  []zoneClient
}

// TestClusterZones brings up three nodes in two topology zones, deploys
// dnsconfigurer with a cluster DNS replica in each zone and the node-local
// stage on every node, and runs issue 59's cases while glibc, musl and Go
// resolvers on every node look up headless Services. Each case prints one
// line on standard output, for a check outside the test to read:
//
//	zone: CASE: lookups N cross-zone M failed F
//
// cross-zone counts answers holding another zone's endpoints; for
// nodelocal-upstream, forwards not answered by a cluster DNS pod of the
// node's zone (node-local's upstream answers metric).
func TestClusterZones(t *testing.T) {
	want := os.Getenv(zonesEnv)
	if want == "" {
		t.Skipf("set $%s=1 (or cases, without the upstream DNS specs) to run the topology zone cluster", zonesEnv)
	}
	if !slices.Contains([]string{"1", "all", "cases"}, want) {
		t.Fatalf("$%s=%q: want 1, all or cases", zonesEnv, want)
	}
	opts := Options{Nodes: 3, ProxyMode: ProxyIPTables}
	withCluster(t, opts, "three nodes in two topology zones", func(t *testing.T, c *Cluster, st *steps) {
		z := &zoneRun{c: c, zone: map[string]string{}}
		for i, n := range c.Nodes {
			z.zone[n.Name] = zoneA
			if i == 2 {
				z.zone[n.Name] = zoneB
			}
		}
		if !st.run(t, "deploy", z.deploy) {
			return
		}
		// The namespace lives as long as the cluster's steps.
		z.ns = namespace(t, c)
		if !st.run(t, "clients", z.setUp) {
			return
		}
		st.run(t, "headless", z.headless)
		st.run(t, "nodelocal-upstream", z.nodeLocalUpstream)
		st.run(t, "zone-dns-pod-killed", z.dnsPodKilled)
		st.run(t, "headless-zone-drained", z.drained)
		if want != "cases" {
			st.run(t, "conformance", func(t *testing.T) {
				p, f, s := testConformance(t, c)
				fmt.Printf("multinode: e2e dns zones: passed %d failed %d skipped %d\n", p, f, s)
			})
		}
	})
}

// deploy labels the nodes' zones, deploys as TestClusterMultiNode does
// (the cluster DNS replicas off the control-plane node, on two distinct
// nodes) and checks there is one replica in each zone.
func (z *zoneRun) deploy(t *testing.T) {
	ctx := testContext(t, 12*time.Minute)
	if err := z.c.LabelZones(ctx, z.zone); err != nil {
		t.Fatal(err)
	}
	deploySpread(t, z.c)
	nodes, err := z.c.dnsPodNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var zones []string
	for _, n := range nodes {
		zones = append(zones, z.zone[n])
	}
	if slices.Sort(zones); !slices.Equal(zones, []string{zoneA, zoneB}) {
		t.Fatalf("cluster DNS pods on %v, in zones %v: want one in each zone", nodes, zones)
	}
}

// fqdn is a Service's absolute name: one query, no search list.
func (z *zoneRun) fqdn(svc string) string {
	return svc + "." + z.ns + ".svc." + ClusterDomain + "."
}

// setUp starts a backend on every node, the headless Services over them,
// waits until every node's stage and every cluster DNS pod answers them,
// then starts the resolvers on every node.
func (z *zoneRun) setUp(t *testing.T) {
	c := z.c
	ctx := testContext(t, 8*time.Minute)
	if err := buildResolvers(ctx, c.path("resolvers")); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		p := toolsPod("backend-" + strconv.Itoa(i))
		p.Labels = map[string]string{"app": "zone-backend"}
		p.Spec.NodeName = n.Name
		got := runPod(t, c, z.ns, p)
		z.backends = append(z.backends, zoneBackend{name: p.Name, node: n.Name, zone: z.zone[n.Name], ip: got.Status.PodIP})
	}
	for _, s := range zoneServices {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: s.name},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone,
				Selector:  map[string]string{"app": "zone-backend"},
				Ports:     []corev1.ServicePort{{Name: "http", Port: 80}},
			},
		}
		if s.distribution != "" {
			svc.Spec.TrafficDistribution = &s.distribution
		}
		if _, err := c.Client.CoreV1().Services(z.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.waitServed(ctx); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		for _, r := range resolvers {
			cl := zoneClient{name: r.pod + "-" + strconv.Itoa(i), node: n.Name, zone: z.zone[n.Name]}
			var names []string
			for _, s := range zoneServices {
				names = append(names, z.fqdn(s.name))
			}
			p := c.resolverPod(cl.name, r.image, append([]string{r.binary, strconv.Itoa(zonePauseMS)}, names...))
			p.Spec.NodeName = n.Name
			runPod(t, c, z.ns, p)
			z.clients = append(z.clients, cl)
		}
	}
}

// waitServed waits until each cluster DNS pod, and each node's stage,
// answers the unset Service with every backend, and the others with
// some: the new Service has reached every server.
func (z *zoneRun) waitServed(ctx context.Context) error {
	pods, err := z.c.Client.CoreV1().Pods(DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: dnsPodSelector})
	if err != nil {
		return err
	}
	type server struct {
		node *Node
		addr netip.Addr
	}
	var servers []server
	for _, p := range pods.Items {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			return fmt.Errorf("cluster DNS pod %s: %w", p.Name, err)
		}
		servers = append(servers, server{z.c.first(), ip})
	}
	for _, n := range z.c.Nodes {
		servers = append(servers, server{n, z.c.nodeLocalDNS()})
	}
	all := z.ips(func(zoneBackend) bool { return true })
	for _, s := range servers {
		for _, svc := range zoneServices {
			name := z.fqdn(svc.name)
			err := waitFor(ctx, fmt.Sprintf("%s at %s from %s", name, s.addr, s.node.Name), func(ctx context.Context) (bool, error) {
				got, err := s.node.lookupAOn(ctx, s.addr, name)
				if err != nil {
					return false, err
				}
				if svc.distribution == "" {
					return slices.Equal(got, all), fmt.Errorf("answer %v, want %v", got, all)
				}
				return len(got) > 0, fmt.Errorf("no answer")
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// ips are the sorted addresses of the backends keep keeps.
func (z *zoneRun) ips(keep func(zoneBackend) bool) []string {
	var ips []string
	for _, b := range z.backends {
		if keep(b) {
			ips = append(ips, b.ip)
		}
	}
	return sortedSet(ips)
}

// zoneOf is the zone of the backend at ip, or "".
func (z *zoneRun) zoneOf(ip string) string {
	for _, b := range z.backends {
		if b.ip == ip {
			return b.zone
		}
	}
	return ""
}

// zoneFigures are a case's counts.
type zoneFigures struct {
	lookups, crossZone, failed int
	wrong                      []string // failed lookups and unexpected answers
}

// print writes the case's line.
func (f zoneFigures) print(name string) {
	fmt.Printf("zone: %s: lookups %d cross-zone %d failed %d\n", name, f.lookups, f.crossZone, f.failed)
}

// add counts the client's lookups of name in w: failed ones, answers
// holding another zone's endpoint, and answers other than want's (nil:
// any answer).
func (f *zoneFigures) add(cl zoneClient, lines []lookupLine, w window, name string, z *zoneRun, want func(l lookupLine) []string) {
	for _, l := range lines {
		if l.name != name || l.at.Before(w.from) || !l.at.Before(w.to) {
			continue
		}
		f.lookups++
		if !l.ok {
			f.failed++
			f.wrong = append(f.wrong, fmt.Sprintf("%s %s on %s: %s failed after %d ms: %s", l.at.Format("15:04:05.000"), cl.name, cl.node, name, l.tookMS, l.detail))
			continue
		}
		got := sortedSet(strings.Split(l.detail, ","))
		if slices.ContainsFunc(got, func(ip string) bool { return z.zoneOf(ip) != cl.zone }) {
			f.crossZone++
		}
		if want == nil {
			continue
		}
		if exp := want(l); !slices.Equal(got, exp) {
			f.wrong = append(f.wrong, fmt.Sprintf("%s %s on %s (%s): %s answered %v, want %v", l.at.Format("15:04:05.000"), cl.name, cl.node, cl.zone, name, got, exp))
		}
	}
}

// report fails t with the first wrong lookups.
func (f zoneFigures) report(t *testing.T, what string) {
	t.Helper()
	if len(f.wrong) > 0 {
		t.Errorf("%s: %d of %d lookups failed or answered wrong:\n%s", what, len(f.wrong), f.lookups, strings.Join(f.wrong[:min(len(f.wrong), 20)], "\n"))
	}
}

// lines reads every client's lookup lines.
func (z *zoneRun) lines(ctx context.Context) (map[string][]lookupLine, error) {
	out := map[string][]lookupLine{}
	for _, cl := range z.clients {
		l, err := z.c.lookupLines(ctx, z.ns, cl.name)
		if err != nil {
			return nil, err
		}
		out[cl.name] = l
	}
	return out, nil
}

// waitLookups polls the clients' logs until the clients keep keeps, on
// each of their nodes, have looked name up n times since from; it returns
// the lines read last.
func (z *zoneRun) waitLookups(ctx context.Context, from time.Time, name string, n int, keep func(zoneClient) bool) (map[string][]lookupLine, error) {
	var lines map[string][]lookupLine
	err := waitFor(ctx, fmt.Sprintf("%d lookups of %s per node", n, name), func(ctx context.Context) (bool, error) {
		var err error
		if lines, err = z.lines(ctx); err != nil {
			return false, err
		}
		perNode := map[string]int{}
		for _, cl := range z.clients {
			if !keep(cl) {
				continue
			}
			perNode[cl.node] += 0
			for _, l := range lines[cl.name] {
				if l.name == name && !l.at.Before(from) {
					perNode[cl.node]++
				}
			}
		}
		for node, got := range perNode {
			if got < n {
				return false, fmt.Errorf("%s: %d", node, got)
			}
		}
		return true, nil
	})
	return lines, err
}

// headless measures the three headless Services at once, at least
// zoneLookups lookups of each per node: PreferSameZone answers the
// client's zone's backends, PreferSameNode the node's own, unset all.
func (z *zoneRun) headless(t *testing.T) {
	ctx := testContext(t, 5*time.Minute)
	from := time.Now()
	everyone := func(zoneClient) bool { return true }
	lines, err := z.waitLookups(ctx, from, z.fqdn("pz"), zoneLookups, everyone)
	if err != nil {
		t.Fatal(err)
	}
	w := window{name: "headless", from: from, to: time.Now()}
	all := z.ips(func(zoneBackend) bool { return true })
	cases := []struct {
		name, svc string
		want      func(cl zoneClient) []string
		// crossZone: answers are to hold another zone's endpoints.
		crossZone bool
	}{
		{"headless-prefersamezone", "pz", func(cl zoneClient) []string {
			return z.ips(func(b zoneBackend) bool { return b.zone == cl.zone })
		}, false},
		{"headless-prefersamenode", "pn", func(cl zoneClient) []string {
			return z.ips(func(b zoneBackend) bool { return b.node == cl.node })
		}, false},
		{"headless-unset", "pu", func(zoneClient) []string { return all }, true},
	}
	for _, tc := range cases {
		var f zoneFigures
		for _, cl := range z.clients {
			want := tc.want(cl)
			f.add(cl, lines[cl.name], w, z.fqdn(tc.svc), z, func(lookupLine) []string { return want })
		}
		f.print(tc.name)
		f.report(t, tc.name)
		if tc.crossZone && f.crossZone == 0 {
			t.Errorf("%s: no answer held another zone's endpoints", tc.name)
		}
		if !tc.crossZone && f.crossZone > 0 {
			t.Errorf("%s: %d of %d answers held another zone's endpoints", tc.name, f.crossZone, f.lookups)
		}
	}
}

// nodeLocalUpstream sends zoneLookups queries through each node's stage,
// each for a name of its own (so each is forwarded), and reads node-local's
// upstream answers by zone before and after: every answer must come from
// the node's zone's cluster DNS pod.
func (z *zoneRun) nodeLocalUpstream(t *testing.T) {
	ctx := testContext(t, 5*time.Minute)
	var f zoneFigures
	// Forwards answered in the node's zone, by node; elsewhere, by the
	// metric's zone label (other, or service: the Service address,
	// either zone).
	same, away := map[string]int{}, map[string]int{}
	for _, n := range z.c.Nodes {
		before, ok, err := z.upstreamAnswers(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		prefix := "zq-" + strings.ToLower(rand.String(6))
		for i := range zoneLookups {
			name := fmt.Sprintf("%s-%d.%s.svc.%s.", prefix, i, z.ns, ClusterDomain)
			f.lookups++
			r, err := n.exchangeOn(ctx, z.c.nodeLocalDNS(), new(dns.Msg).SetQuestion(name, dns.TypeA))
			switch {
			case err != nil:
				f.failed++
				f.wrong = append(f.wrong, fmt.Sprintf("%s: %s: %v", n.Name, name, err))
			case r.Rcode != dns.RcodeNameError:
				f.failed++
				f.wrong = append(f.wrong, fmt.Sprintf("%s: %s: %s, want NXDOMAIN", n.Name, name, dns.RcodeToString[r.Rcode]))
			}
		}
		after, ok, err := z.upstreamAnswers(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("%s: node-local has no metric %s", n.Name, upstreamAnswersMetric)
		}
		for zone, v := range after {
			d := v - before[zone]
			if zone == "same" {
				same[n.Name] += d
				continue
			}
			f.crossZone += d
			away[zone] += d
		}
		t.Logf("%s (%s): upstream answers by zone before %v, after %v", n.Name, z.zone[n.Name], before, after)
	}
	f.print("nodelocal-upstream")
	f.report(t, "nodelocal-upstream")
	if f.crossZone > 0 {
		t.Errorf("%d forwards answered outside the node's topology zone, want 0 (by the metric's zone label: %v)", f.crossZone, away)
	}
	for _, n := range z.c.Nodes {
		if same[n.Name] < zoneLookups {
			t.Errorf("%s: %d forwards answered in its zone for %d names of their own", n.Name, same[n.Name], zoneLookups)
		}
	}
}

// upstreamAnswers reads node n's upstreamAnswersMetric by its zone label.
func (z *zoneRun) upstreamAnswers(ctx context.Context, n *Node) (map[string]int, bool, error) {
	return n.metricSeries(ctx, "http://127.0.0.1:9353/metrics", upstreamAnswersMetric, "zone")
}

// dnsPodKilled deletes zone-a's cluster DNS pod at once (grace period 0)
// while zone-a's clients resolve, with zone-a's nodes cordoned so that its
// replacement runs in zone-b, and ends once zone-a's stages have forwarded
// to zone-b's pods: no lookup may fail, and no PreferSameZone or
// PreferSameNode answer may hold zone-b's endpoints (zone-b's cluster DNS
// answers for the client's zone, which the topology option carries).
func (z *zoneRun) dnsPodKilled(t *testing.T) {
	c := z.c
	ctx := testContext(t, 6*time.Minute)
	pods, err := c.Client.CoreV1().Pods(DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: dnsPodSelector})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return z.zone[p.Spec.NodeName] == zoneA && p.DeletionTimestamp == nil })
	if i < 0 {
		t.Fatalf("no cluster DNS pod in %s", zoneA)
	}
	victim := pods.Items[i]
	inA := func(cl zoneClient) bool { return cl.zone == zoneA }
	before := map[string]map[string]int{}
	for _, n := range c.Nodes {
		if z.zone[n.Name] == zoneA {
			before[n.Name], _, _ = z.upstreamAnswers(ctx, n)
		}
	}
	from := time.Now()
	// Lookups before the kill, in the window.
	if _, err := z.waitLookups(ctx, from, z.fqdn("pz"), 50, inA); err != nil {
		t.Fatal(err)
	}
	// The replacement goes to zone-b: zone-a's stages must fall back.
	for _, n := range c.Nodes {
		if z.zone[n.Name] == zoneA {
			if err := c.cordon(ctx, n.Name, true); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := c.cordon(ctx, n.Name, false); err != nil {
					t.Error(err)
				}
			})
		}
	}
	grace := int64(0)
	if err := c.Client.CoreV1().Pods(DeployNamespace).Delete(ctx, victim.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("deleted %s on %s (%s) at %s", victim.Name, victim.Spec.NodeName, zoneA, killed.Format("15:04:05.000"))
	if err := z.waitReplaced(ctx, victim.UID); err != nil {
		t.Error(err)
	}
	back := time.Now()
	nodes, _ := c.dnsPodNodes(ctx)
	t.Logf("cluster DNS pods on %v again after %s", nodes, back.Sub(killed).Round(time.Millisecond))
	// Zone-a's stages forward to zone-b's pods now: wait for some of
	// those forwards (the cache holds answers for the record TTL).
	err = waitFor(ctx, "forwards answered in "+zoneB+" for "+zoneA, func(ctx context.Context) (bool, error) {
		for name, b := range before {
			now, _, err := z.upstreamAnswers(ctx, c.NodeByName(name))
			if err != nil {
				return false, err
			}
			if now["other"]-b["other"] < 20 {
				return false, fmt.Errorf("%s: %d", name, now["other"]-b["other"])
			}
		}
		return true, nil
	})
	if err != nil {
		t.Error(err)
	}
	// Lookups after the replacement is ready, in the window.
	lines, err := z.waitLookups(ctx, time.Now(), z.fqdn("pz"), 50, inA)
	if err != nil {
		t.Fatal(err)
	}
	w := window{name: "zone-dns-pod-killed", from: from, to: time.Now()}
	var ev eventFigures
	var f zoneFigures
	for _, cl := range z.clients {
		if !inA(cl) {
			continue
		}
		ev.add(lines[cl.name], w, cl.name)
		f.add(cl, lines[cl.name], w, z.fqdn("pz"), z, nil)
		f.add(cl, lines[cl.name], w, z.fqdn("pn"), z, nil)
	}
	for _, n := range c.Nodes {
		if b, ok := before[n.Name]; ok {
			after, _, _ := z.upstreamAnswers(ctx, n)
			t.Logf("%s: upstream answers by zone over the kill: before %v, after %v", n.Name, b, after)
		}
	}
	f.lookups, f.failed = ev.lookups, ev.failed
	f.print("zone-dns-pod-killed")
	t.Logf("zone-dns-pod-killed: longest gap between successful lookups %d ms", ev.longestGapMS)
	if ev.failed > 0 {
		t.Errorf("%d of %d lookups in %s failed:\n%s", ev.failed, ev.lookups, zoneA, strings.Join(ev.bad[:min(len(ev.bad), 20)], "\n"))
	}
	if f.crossZone > 0 {
		t.Errorf("%d PreferSameZone/PreferSameNode answers in %s held %s's endpoints", f.crossZone, zoneA, zoneB)
	}
}

// waitReplaced waits until the cluster DNS Deployment has its replicas
// Ready again, none of them the deleted pod uid: the Deployment's status
// lags a delete with no grace period, so WaitRollout alone returns early.
func (z *zoneRun) waitReplaced(ctx context.Context, uid types.UID) error {
	d, err := z.c.Client.AppsV1().Deployments(DeployNamespace).Get(ctx, DNSDeployment, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := 1
	if d.Spec.Replicas != nil {
		want = int(*d.Spec.Replicas)
	}
	return waitFor(ctx, "the cluster DNS pod replaced", func(ctx context.Context) (bool, error) {
		pods, err := z.c.Client.CoreV1().Pods(DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: dnsPodSelector})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, p := range pods.Items {
			if p.UID == uid {
				return false, fmt.Errorf("pod %s still there", p.Name)
			}
			if p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}) {
				ready++
			}
		}
		return ready == want, fmt.Errorf("%d of %d Ready", ready, want)
	})
}

// drained deletes zone-a's backends while every client resolves: zone-a's
// clients must get zone-b's backend within zoneDrainDeadline (polled at
// their stages), no lookup may fail, and zone-b's clients keep their own.
// cross-zone counts zone-a's answers holding zone-b's backend: the fallback.
func (z *zoneRun) drained(t *testing.T) {
	c := z.c
	ctx := testContext(t, 5*time.Minute)
	pz := z.fqdn("pz")
	inA := func(cl zoneClient) bool { return cl.zone == zoneA }
	from := time.Now()
	if _, err := z.waitLookups(ctx, from, pz, 50, inA); err != nil {
		t.Fatal(err)
	}
	gone := z.ips(func(b zoneBackend) bool { return b.zone == zoneA })
	left := z.ips(func(b zoneBackend) bool { return b.zone == zoneB })
	deleted := time.Now()
	for _, b := range z.backends {
		if b.zone == zoneA {
			if err := c.Client.CoreV1().Pods(z.ns).Delete(ctx, b.name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dctx, cancel := context.WithDeadline(ctx, deleted.Add(zoneDrainDeadline))
	defer cancel()
	err := waitFor(dctx, fmt.Sprintf("%s answered %v in %s", pz, left, zoneA), func(ctx context.Context) (bool, error) {
		for _, n := range c.Nodes {
			if z.zone[n.Name] != zoneA {
				continue
			}
			got, err := n.lookupAOn(ctx, c.nodeLocalDNS(), pz)
			if err != nil {
				return false, err
			}
			if !slices.Equal(got, left) {
				return false, fmt.Errorf("%s: %v", n.Name, got)
			}
		}
		return true, nil
	})
	converged := time.Now()
	if err != nil {
		t.Errorf("zone-a's pods deleted: %v", err)
	} else {
		t.Logf("zone-a's clients get %v %s after the delete", left, converged.Sub(deleted).Round(time.Millisecond))
	}
	// Lookups after the change, in the window.
	settled := converged.Add(time.Second)
	lines, err := z.waitLookups(ctx, settled, pz, 50, func(zoneClient) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	w := window{name: "headless-zone-drained", from: deleted, to: time.Now()}
	var f zoneFigures
	var others zoneFigures
	for _, cl := range z.clients {
		if !inA(cl) {
			others.add(cl, lines[cl.name], w, pz, z, func(lookupLine) []string { return left })
			continue
		}
		f.add(cl, lines[cl.name], w, pz, z, func(l lookupLine) []string {
			if l.at.Before(settled) {
				// Before: either zone-a's old answer (cached) or zone-b's.
				if got := sortedSet(strings.Split(l.detail, ",")); len(got) > 0 && !slices.ContainsFunc(got, func(ip string) bool { return !slices.Contains(gone, ip) }) {
					return got
				}
			}
			return left
		})
	}
	f.print("headless-zone-drained")
	f.report(t, "headless-zone-drained")
	others.report(t, "headless-zone-drained in "+zoneB)
	if f.crossZone == 0 {
		t.Errorf("no lookup in %s got %s's endpoints after the drain", zoneA, zoneB)
	}
}
