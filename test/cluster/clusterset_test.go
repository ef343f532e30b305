package cluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

// clustersetEnv runs TestClusterClusterset: "1".
const clustersetEnv = "DNSCONFIGURER_CLUSTERSET"

// clustersetZone is the clusterset zone both clusters' cluster DNS
// answers, and clusterAID cluster A's id in imported EndpointSlices.
const (
	clustersetZone = "clusterset.local"
	clusterAID     = "cluster-a"
)

// The exported Services of cluster A: csWeb a ClusterIP Service over a
// Deployment, csDB a headless one over a StatefulSet (stable hostnames)
// and a Deployment (csExtra, pods without a hostname) that the test
// scales.
const (
	csWeb      = "web"
	csDB       = "db"
	csExtra    = "db-extra"
	csReplicas = 2
	// csRollRounds is how many times roll restarts and scales A's
	// Deployments.
	csRollRounds = 3
)

// clustersetSettle is how long the lookups run before and after the
// endpoints roll: past the imported records' TTL in node-local's cache.
const clustersetSettle = 15 * time.Second

// TestClusterClusterset is issue 70's proof on real clusters (with
// $DNSCONFIGURER_CLUSTERSET=1):
//
//   - two clusters of the harness run at once, A and B, each with its own
//     network namespace, control plane, node, containerd and kubelet.
//     Nothing joins them, so their addresses overlap (pods on
//     10.233.0.0/24, Services on 10.96.0.0/12 in both) and B's pods cannot
//     reach A's: what is proved is the names, not the traffic;
//   - both get the mcs-api CRDs and deploy/ with the clusterset zone on
//     (deployClusterset). B's node-local stage is deploy/'s; A's runs with
//     --external=direct, so only the names the cluster DNS routes
//     specially, the clusterset zone among them, reach the cluster DNS;
//   - A exports a ClusterIP Service over a Deployment and a headless one
//     over a StatefulSet and a Deployment. The test is the MCS controller
//     (mcsController): it imports both into A and B and mirrors A's
//     EndpointSlices into both all along;
//   - in B, glibc, musl and Go resolvers look up, through node-local, both
//     Services' clusterset names and each StatefulSet pod's
//     <hostname>.cluster-a name, while A's Deployments restart and scale.
//
// No lookup may fail and no answer be wrong: web's clusterset IP, each
// pod's own address, and for the headless Service the StatefulSet's pods
// plus only addresses A published. Both clusters' stages must answer as A
// has it before and after the roll. It prints one line per resolver:
//
//	clusterset: RESOLVER: lookups N failed M wrong K
func TestClusterClusterset(t *testing.T) {
	if os.Getenv(clustersetEnv) != "1" {
		t.Skipf("set $%s=1 to run two clusters joined by the Multi-Cluster Services API", clustersetEnv)
	}
	withCluster(t, Options{}, "cluster A, the exporting cluster", func(t *testing.T, a *Cluster, stA *steps) {
		r := &clustersetRun{a: a}
		if !stA.run(t, "deploy-a", func(t *testing.T) { r.mcsA = r.deploy(t, a, true) }) {
			return
		}
		withCluster(t, Options{}, "cluster B, the importing cluster", func(t *testing.T, b *Cluster, st *steps) {
			r.b = b
			if !st.run(t, "deploy-b", func(t *testing.T) { r.mcsB = r.deploy(t, b, false) }) {
				return
			}
			// The namespaces live as long as cluster B's steps.
			r.ns = namespace(t, a)
			namespaceNamed(t, b, r.ns)
			if !st.run(t, "export", r.export) {
				return
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.ctl.run(ctx) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("MCS controller: %v", err)
				}
			})
			if !st.run(t, "imported", r.imported) {
				return
			}
			if !st.run(t, "resolvers", r.resolvers) {
				return
			}
			st.run(t, "roll", r.roll)
			st.run(t, "lookups", r.check)
		})
	})
}

// clustersetRun is TestClusterClusterset's state.
type clustersetRun struct {
	a, b       *Cluster
	mcsA, mcsB mcsclient.Interface
	ns         string
	ctl        *mcsController
	webIP      string            // web's ClusterIP in A, its clusterset IP
	dbPods     map[string]string // the StatefulSet's pods' addresses, by hostname
	from, to   time.Time         // the measured span
	rolled     window
}

// deploy installs the CRDs and deploy/ with the clusterset zone on c;
// direct: its node-local stage with --external=direct (see
// deployClusterset).
func (r *clustersetRun) deploy(t *testing.T, c *Cluster, direct bool) mcsclient.Interface {
	ctx := testContext(t, 12*time.Minute)
	mcs, err := installMCSCRDs(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := deployClusterset(ctx, c, direct); err != nil {
		t.Fatal(err)
	}
	return mcs
}

// csPodSpec is the backends' pod: a container that sleeps and stops at
// once.
func csPodSpec(l map[string]string) corev1.PodTemplateSpec {
	p := toolsPod("x")
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: p.Spec}
}

// export creates A's backends, Services and ServiceExports, and the
// controller's imports of them in A and B.
func (r *clustersetRun) export(t *testing.T) {
	a := r.a
	ctx := testContext(t, 6*time.Minute)
	replicas := int32(csReplicas)
	one := int32(1)
	webLabels := map[string]string{"app": csWeb}
	stsLabels := map[string]string{"app": csDB, "kind": "sts"}
	extraLabels := map[string]string{"app": csDB, "kind": "extra"}
	apps := a.Client.AppsV1()
	if _, err := apps.Deployments(r.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: csWeb},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: webLabels}, Template: csPodSpec(webLabels)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := apps.StatefulSets(r.ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: csDB},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, ServiceName: csDB, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: stsLabels}, Template: csPodSpec(stsLabels),
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := apps.Deployments(r.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: csExtra},
		Spec:       appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: extraLabels}, Template: csPodSpec(extraLabels)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	port := []corev1.ServicePort{{Name: "http", Port: 80}}
	web, err := a.Client.CoreV1().Services(r.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: csWeb},
		Spec:       corev1.ServiceSpec{Selector: webLabels, Ports: port},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.webIP = web.Spec.ClusterIP
	if _, err := a.Client.CoreV1().Services(r.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: csDB},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": csDB}, Ports: port},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{csWeb, csDB} {
		if _, err := r.mcsA.MulticlusterV1beta1().ServiceExports(r.ns).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct{ kind, name string }{{"deployment", csWeb}, {"deployment", csExtra}} {
		if err := a.WaitRollout(ctx, w.kind, r.ns, w.name); err != nil {
			t.Fatal(err)
		}
	}
	r.dbPods = map[string]string{}
	for i := range csReplicas {
		host := csDB + "-" + strconv.Itoa(i)
		p, err := waitPodRunning(ctx, a, r.ns, host)
		if err != nil {
			t.Fatal(err)
		}
		r.dbPods[host] = p.Status.PodIP
	}
	t.Logf("cluster A: %s's ClusterIP %s; %s's StatefulSet pods %v", csWeb, r.webIP, csDB, r.dbPods)
	src := mcsCluster{name: clusterAID, c: a, mcs: r.mcsA}
	r.ctl = &mcsController{source: src, ns: r.ns, targets: []mcsCluster{src, {name: "cluster-b", c: r.b, mcs: r.mcsB}}}
	if err := r.ctl.importExports(ctx); err != nil {
		t.Fatal(err)
	}
}

// names are what B's pods look up, as users write them (no final dot:
// the search list is tried first, as ndots says).
func (r *clustersetRun) names() []string {
	names := []string{r.svcName(csWeb), r.svcName(csDB)}
	for _, h := range slices.Sorted(maps.Keys(r.dbPods)) {
		names = append(names, r.hostName(h))
	}
	return names
}

func (r *clustersetRun) svcName(svc string) string {
	return svc + "." + r.ns + ".svc." + clustersetZone
}

func (r *clustersetRun) hostName(host string) string {
	return host + "." + clusterAID + "." + r.svcName(csDB)
}

// dbReady is A's current ready addresses of the headless Service.
func (r *clustersetRun) dbReady(ctx context.Context) ([]string, error) {
	sl, err := r.a.Client.DiscoveryV1().EndpointSlices(r.ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{discoveryv1.LabelServiceName: csDB}.String(),
	})
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, s := range sl.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ips = append(ips, e.Addresses...)
			}
		}
	}
	return sortedSet(ips), nil
}

// waitAnswers waits until c's node-local stage answers every name with
// what A has now.
func (r *clustersetRun) waitAnswers(ctx context.Context, c *Cluster) error {
	n := c.first()
	want := map[string][]string{r.svcName(csWeb): {r.webIP}}
	for h, ip := range r.dbPods {
		want[r.hostName(h)] = []string{ip}
	}
	return waitFor(ctx, "the clusterset names answered at "+c.nodeLocalDNS().String(), func(ctx context.Context) (bool, error) {
		db, err := r.dbReady(ctx)
		if err != nil {
			return false, err
		}
		want[r.svcName(csDB)] = db
		for name, w := range want {
			got, err := n.lookupAOn(ctx, c.nodeLocalDNS(), name+".")
			if err != nil {
				return false, err
			}
			if !slices.Equal(got, w) {
				return false, fmt.Errorf("%s: %v, want %v", name, got, w)
			}
		}
		return true, nil
	})
}

// imported waits until both clusters' node-local stages answer the
// imports as A has them.
func (r *clustersetRun) imported(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	for _, c := range []*Cluster{r.a, r.b} {
		begin := time.Now()
		if err := r.waitAnswers(ctx, c); err != nil {
			syncs, last := r.ctl.stats()
			t.Fatalf("%v (controller: %d slice writes, last error %v)", err, syncs, last)
		}
		t.Logf("answered in %s after %s", c.Dir, time.Since(begin).Round(time.Millisecond))
	}
}

// resolvers starts the lookup loops in B, one pod per resolver.
func (r *clustersetRun) resolvers(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	b := r.b
	if err := buildResolvers(ctx, b.path("resolvers")); err != nil {
		t.Fatal(err)
	}
	for _, res := range resolvers {
		p := b.resolverPod(res.pod, res.image, append([]string{res.binary, strconv.Itoa(pauseMS)}, r.names()...))
		runPod(t, b, r.ns, p)
	}
	r.from = time.Now()
}

// roll rolls A's endpoints while B's pods resolve, csRollRounds times: a
// rollout restart of web's Deployment, then db-extra scaled to 3,
// restarted and scaled back to 1. The StatefulSet is left alone: its
// hostnames' names stay.
func (r *clustersetRun) roll(t *testing.T) {
	a := r.a
	ctx := testContext(t, 12*time.Minute)
	if err := sleepCtx(ctx, clustersetSettle); err != nil {
		t.Fatal(err)
	}
	r.rolled.from = time.Now()
	ev := &eventRun{c: a}
	scale := func(n int) error {
		if _, err := a.Kubectl(ctx, "-n", r.ns, "scale", "deployment/"+csExtra, "--replicas="+strconv.Itoa(n)); err != nil {
			return err
		}
		return a.WaitRollout(ctx, "deployment", r.ns, csExtra)
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"restart " + csWeb, func() error { return ev.rolloutRestart(ctx, "deployment", r.ns, csWeb) }},
		{"scale " + csExtra + " to 3", func() error { return scale(3) }},
		{"restart " + csExtra, func() error { return ev.rolloutRestart(ctx, "deployment", r.ns, csExtra) }},
		{"scale " + csExtra + " to 1", func() error { return scale(1) }},
	}
	for round := range csRollRounds {
		for _, step := range steps {
			if err := step.run(); err != nil {
				t.Fatalf("round %d: %s: %v", round+1, step.name, err)
			}
			t.Logf("round %d: %s done at %s", round+1, step.name, time.Now().Format("15:04:05.000"))
		}
	}
	r.rolled.to = time.Now()
	// Both follow A: their stages answer db with A's endpoints now (A's
	// stage with --external=direct, through its clusterset route).
	for _, c := range []*Cluster{r.a, r.b} {
		if err := r.waitAnswers(ctx, c); err != nil {
			t.Error(err)
		}
	}
	if err := sleepCtx(ctx, clustersetSettle); err != nil {
		t.Fatal(err)
	}
	r.to = time.Now()
	syncs, last := r.ctl.stats()
	t.Logf("A's endpoints rolled from %s to %s; the controller wrote %d slices (last error %v)",
		r.rolled.from.Format("15:04:05.000"), r.rolled.to.Format("15:04:05.000"), syncs, last)
}

// clustersetFigures are one resolver's counts.
type clustersetFigures struct {
	lookups, failed, wrong, duringRoll int
	bad                                []string
}

// check reads B's resolver pods' lines from the measured span and checks
// each: no failure, and each answer right (see TestClusterClusterset);
// and that B's cluster DNS answered the clusterset zone.
func (r *clustersetRun) check(t *testing.T) {
	if r.from.IsZero() || r.to.IsZero() {
		t.Fatal("the lookups did not run their span")
	}
	ctx := testContext(t, 3*time.Minute)
	dbHosts := sortedSet(slices.Collect(maps.Values(r.dbPods)))
	for _, res := range resolvers {
		lines, err := r.b.lookupLines(ctx, r.ns, res.pod)
		if err != nil {
			t.Fatal(err)
		}
		var f clustersetFigures
		perName := map[string]int{}
		dbAnswers := map[string]bool{} // the headless Service's answers
		for _, l := range lines {
			if l.at.Before(r.from) || !l.at.Before(r.to) {
				continue
			}
			f.lookups++
			perName[l.name]++
			if !l.at.Before(r.rolled.from) && l.at.Before(r.rolled.to) {
				f.duringRoll++
			}
			at := l.at.Format("15:04:05.000")
			if !l.ok {
				f.failed++
				f.bad = append(f.bad, fmt.Sprintf("%s %s: failed after %d ms: %s", at, l.name, l.tookMS, l.detail))
				continue
			}
			got := sortedSet(strings.Split(l.detail, ","))
			var why string
			switch {
			case l.name == r.svcName(csWeb):
				if !slices.Equal(got, []string{r.webIP}) {
					why = fmt.Sprintf("want %s", r.webIP)
				}
			case l.name == r.svcName(csDB):
				dbAnswers[l.detail] = true
				if !r.ctl.seenAll(csDB, got) || !containsAll(got, dbHosts) {
					why = fmt.Sprintf("want the StatefulSet's %v and only addresses A published", dbHosts)
				}
			default:
				host, _, _ := strings.Cut(l.name, ".")
				if !slices.Equal(got, []string{r.dbPods[host]}) {
					why = fmt.Sprintf("want %s", r.dbPods[host])
				}
			}
			if why != "" {
				f.wrong++
				f.bad = append(f.bad, fmt.Sprintf("%s %s: %v, %s", at, l.name, got, why))
			}
		}
		fmt.Printf("clusterset: %s: lookups %d failed %d wrong %d\n", res.pod, f.lookups, f.failed, f.wrong)
		t.Logf("%s: %d lookups while A's endpoints rolled; %d distinct answers for %s; by name %v", res.pod, f.duringRoll, len(dbAnswers), csDB, perName)
		if len(dbAnswers) < 2 {
			t.Errorf("%s: %s answered %v all along: B never saw A's endpoints roll", res.pod, r.svcName(csDB), slices.Collect(maps.Keys(dbAnswers)))
		}
		if len(f.bad) > 0 {
			t.Errorf("%s: %d failed, %d wrong:\n%s", res.pod, f.failed, f.wrong, strings.Join(f.bad[:min(len(f.bad), 30)], "\n"))
		}
		for _, name := range r.names() {
			if perName[name] < 50 {
				t.Errorf("%s: %d lookups of %s, want at least 50", res.pod, perName[name], name)
			}
		}
		if f.duringRoll == 0 {
			t.Errorf("%s: no lookup while A's endpoints rolled", res.pod)
		}
	}
	r.checkServed(t, ctx)
}

// checkServed checks that B's cluster DNS answered queries of the
// clusterset zone (its requests metric, labelled by zone), and that B's
// node-local stage had queries: the pods' names went through node-local
// to the cluster DNS.
func (r *clustersetRun) checkServed(t *testing.T, ctx context.Context) {
	b := r.b
	pods, err := b.Client.CoreV1().Pods(DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: dnsPodSelector})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range pods.Items {
		series, _, err := b.first().metricSeries(ctx, "http://"+p.Status.PodIP+":9153/metrics", "dnsconfigurer_dnsserver_requests_total", "zone")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("cluster B's DNS pod %s: requests by zone %v", p.Name, series)
		for z, v := range series {
			if strings.TrimSuffix(z, ".") == clustersetZone {
				total += v
			}
		}
	}
	if total == 0 {
		t.Errorf("cluster B's DNS counted no request in zone %s", clustersetZone)
	}
	q, err := b.nodeLocalQueries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster B's node-local stage: %d queries (cache hits and misses); its cluster DNS: %d in %s", q, total, clustersetZone)
	if q == 0 {
		t.Error("cluster B's node-local stage had no query")
	}
}

// containsAll reports whether every element of want is in got.
func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}
