package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// eventNames are what the lookup pods resolve: a Service of another
// namespace and an external name, through the search list as pods do.
var eventNames = []string{"kubernetes.default", "www.example.com"}

// eventPauseMS is each lookup pod's pause between lookups: 20 to 40
// lookups a second per pod.
const eventPauseMS = 25

// eventSettle is how long each event runs under the lookups once its
// commands are done.
const eventSettle = 10 * time.Second

// killObserve is how long a killed node stays off: past the node
// controller's grace period (50 s), so its pods' endpoints are taken out
// before it comes back, as for a node that does not return at once.
const killObserve = 75 * time.Second

// lookupPod is one resolving pod: on node, behind the node-local stage
// (ClusterFirst) or straight at the cluster DNS Service through kube-proxy
// (direct).
type lookupPod struct {
	name, node string
	direct     bool
}

// eventRun is one topology's events: the lookup pods, the windows, the
// log lines read so far.
type eventRun struct {
	c     *Cluster
	topo  string
	ns    string
	pods  []lookupPod
	mu    sync.Mutex
	wins  []window
	lines map[string][]lookupLine // by pod, read before the pod's node was killed
}

// testEvents rolls, scales, restarts and kills while a Go resolver on
// every node looks names up behind the node-local stage, and another
// straight at the cluster DNS. Every event: no failed lookup behind
// node-local (on a killed node's peers for the kill); the direct pods'
// figures are reported, since kube-proxy sends them to a dead pod until
// EndpointSlices follow.
func testEvents(t *testing.T, c *Cluster, topo string) {
	ctx := testContext(t, 30*time.Minute)
	r := &eventRun{c: c, topo: topo, ns: c.ControlPlane.Namespace(t), lines: map[string][]lookupLine{}}
	if err := buildResolvers(ctx, c.path("resolvers")); err != nil {
		t.Fatal(err)
	}
	r.startPods(t, ctx)

	events := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"dns-rollout", func(ctx context.Context) error {
			return r.rolloutRestart(ctx, "deployment", DeployNamespace, DNSDeployment)
		}},
		{"nodelocal-rollout", func(ctx context.Context) error {
			return r.rolloutRestart(ctx, "daemonset", NodeNamespace, NodeLocalDS)
		}},
		{"agent-restart", func(ctx context.Context) error {
			if c.Agent == AgentNRI {
				return r.rolloutRestart(ctx, "daemonset", NodeNamespace, NRIDS)
			}
			// The shim is a node process here (kubelet's runtime
			// endpoint), restarted node by node as a package upgrade does.
			for _, n := range c.Nodes {
				if err := c.RestartOn(ctx, n, "shim"); err != nil {
					return err
				}
			}
			return nil
		}},
		{"dns-scale-2-1-2", func(ctx context.Context) error {
			for _, n := range []string{"1", "2"} {
				if _, err := c.Kubectl(ctx, "-n", DeployNamespace, "scale", "deployment/"+DNSDeployment, "--replicas="+n); err != nil {
					return err
				}
				if err := c.WaitRollout(ctx, "deployment", DeployNamespace, DNSDeployment); err != nil {
					return err
				}
			}
			return nil
		}},
		{"apiserver-restart", func(ctx context.Context) error {
			return c.ControlPlane.RestartAPIServer(ctx)
		}},
	}
	for _, e := range events {
		r.event(t, ctx, e.name, e.run)
	}
	r.killNode(t, ctx)
	r.report(t)
}

// startPods starts two lookup pods on every node and waits for them.
func (r *eventRun) startPods(t *testing.T, ctx context.Context) {
	for _, n := range r.c.Nodes {
		for _, direct := range []bool{false, true} {
			p := lookupPod{name: "near-" + n.Name, node: n.Name, direct: direct}
			if direct {
				p.name = "direct-" + n.Name
			}
			if _, err := r.c.Client.CoreV1().Pods(r.ns).Create(ctx, r.podSpec(p), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			r.pods = append(r.pods, p)
		}
	}
	err := waitFor(ctx, "lookup pods running", func(ctx context.Context) (bool, error) {
		for _, p := range r.pods {
			got, err := r.c.Client.CoreV1().Pods(r.ns).Get(ctx, p.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if got.Status.Phase != corev1.PodRunning {
				return false, fmt.Errorf("%s: %s", p.name, got.Status.Phase)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// podSpec is a lookup pod: Go's resolver in a loop, pinned to its node;
// a direct pod's only nameserver is the cluster DNS's upstream Service.
func (r *eventRun) podSpec(p lookupPod) *corev1.Pod {
	pod := r.c.resolverPod(p.name, BusyboxImage, append([]string{"resolveloop-go", strconv.Itoa(eventPauseMS)}, eventNames...))
	pod.Spec.NodeName = p.node
	if p.direct {
		ndots := "5"
		pod.Spec.DNSPolicy = corev1.DNSNone
		pod.Spec.DNSConfig = &corev1.PodDNSConfig{
			Nameservers: []string{ClusterDNSUpstream.String()},
			Searches:    []string{r.ns + ".svc." + ClusterDomain, "svc." + ClusterDomain, ClusterDomain},
			Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}},
		}
	}
	return pod
}

// event runs one event between two settle periods and records its window.
func (r *eventRun) event(t *testing.T, ctx context.Context, name string, run func(ctx context.Context) error) {
	from := time.Now()
	if err := sleepCtx(ctx, eventSettle/2); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx); err != nil {
		t.Errorf("event %s: %v", name, err)
	}
	if err := sleepCtx(ctx, eventSettle); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.wins = append(r.wins, window{name: name, from: from, to: time.Now()})
	r.mu.Unlock()
	t.Logf("event %s: %s", name, time.Since(from).Round(time.Second))
}

// sleepCtx waits d or until ctx ends: an event's measured time under
// lookups, not a wait for a condition.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rolloutRestart restarts a Deployment's or DaemonSet's pods as kubectl
// rollout restart does, and waits for the rollout.
func (r *eventRun) rolloutRestart(ctx context.Context, kind, ns, name string) error {
	if _, err := r.c.Kubectl(ctx, "-n", ns, "rollout", "restart", kind+"/"+name); err != nil {
		return err
	}
	// The controller sees the new template after the command returns.
	if err := waitFor(ctx, kind+" "+name+" generation observed", func(ctx context.Context) (bool, error) {
		switch kind {
		case "deployment":
			d, err := r.c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && d.Status.ObservedGeneration >= d.Generation, err
		default:
			d, err := r.c.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && d.Status.ObservedGeneration >= d.Generation, err
		}
	}); err != nil {
		return err
	}
	return r.c.WaitRollout(ctx, kind, ns, name)
}

// killNode kills the node running a cluster DNS pod (not the first),
// keeps it off past the node controller's grace period, and boots it
// again. The killed node's lookup pods are read before it goes.
func (r *eventRun) killNode(t *testing.T, ctx context.Context) {
	nodes, err := r.c.dnsPodNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(nodes, func(n string) bool { return n != r.c.first().Name })
	if i < 0 {
		t.Fatalf("no cluster DNS pod off the first node: %v", nodes)
	}
	victim := r.c.NodeByName(nodes[i])
	for _, p := range r.pods {
		if p.node != victim.Name {
			continue
		}
		lines, err := r.podLines(ctx, p.name)
		if err != nil {
			t.Fatal(err)
		}
		r.lines[p.name] = lines
	}
	name := "kill-node"
	r.event(t, ctx, name, func(ctx context.Context) error {
		if err := r.c.KillNode(ctx, victim); err != nil {
			return err
		}
		t.Logf("killed %s at %s", victim.Name, time.Now().Format("15:04:05.000"))
		if err := sleepCtx(ctx, killObserve); err != nil {
			return err
		}
		if err := r.c.ReviveNode(ctx, victim); err != nil {
			return err
		}
		t.Logf("%s Ready again at %s", victim.Name, time.Now().Format("15:04:05.000"))
		return r.c.WaitRollout(ctx, "deployment", DeployNamespace, DNSDeployment)
	})
}

// report reads every lookup pod's log and prints each event's figures:
// behind node-local (the pods asserted on) and, apart, the direct pods.
func (r *eventRun) report(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	for _, p := range r.pods {
		if _, ok := r.lines[p.name]; ok {
			continue
		}
		lines, err := r.podLines(ctx, p.name)
		if err != nil {
			t.Fatal(err)
		}
		r.lines[p.name] = lines
	}
	for _, w := range r.wins {
		for _, direct := range []bool{false, true} {
			var f eventFigures
			for _, p := range r.pods {
				if p.direct != direct {
					continue
				}
				f.add(r.lines[p.name], w, p.name)
			}
			name := r.topo + "/" + w.name
			if direct {
				name += "/direct"
			}
			fmt.Printf("multinode: event %s: lookups %d failed %d longest-gap-ms %d\n", name, f.lookups, f.failed, f.longestGapMS)
			if direct {
				continue
			}
			perNode := float64(f.lookups) / float64(len(r.c.Nodes)) / w.to.Sub(w.from).Seconds()
			if w.name != "kill-node" && perNode < 20 {
				t.Errorf("event %s: %.1f lookups/s per node, want at least 20", w.name, perNode)
			}
			if f.failed > 0 {
				t.Errorf("event %s: %d of %d lookups behind node-local failed:\n%s", w.name, f.failed, f.lookups, strings.Join(f.bad[:min(len(f.bad), 20)], "\n"))
			}
		}
	}
}

// eventFigures are one event's counts over a set of pods.
type eventFigures struct {
	lookups, failed, longestGapMS int
	bad                           []string
}

// add counts a pod's lines inside w: every lookup, the failed ones, and
// the longest time between two successful lookups (from the window's
// start, and to its end).
func (f *eventFigures) add(lines []lookupLine, w window, pod string) {
	last := w.from
	seen := false
	for _, l := range lines {
		if l.at.Before(w.from) || !l.at.Before(w.to) {
			continue
		}
		seen = true
		f.lookups++
		if !l.ok {
			f.failed++
			f.bad = append(f.bad, fmt.Sprintf("%s %s %s: failed after %d ms: %s", l.at.Format("15:04:05.000"), pod, l.name, l.tookMS, l.detail))
			continue
		}
		if l.name == "kubernetes.default" && l.detail != "10.96.0.1" {
			f.failed++
			f.bad = append(f.bad, fmt.Sprintf("%s %s %s: %s, want 10.96.0.1", l.at.Format("15:04:05.000"), pod, l.name, l.detail))
		}
		f.longestGapMS = max(f.longestGapMS, int(l.at.Sub(last).Milliseconds()))
		last = l.at
	}
	if seen {
		f.longestGapMS = max(f.longestGapMS, int(w.to.Sub(last).Milliseconds()))
	}
}

func (r *eventRun) podLines(ctx context.Context, pod string) ([]lookupLine, error) {
	return r.c.lookupLines(ctx, r.ns, pod)
}

// lookupLines returns the lookup lines a resolver pod's container "c" has
// printed.
func (c *Cluster) lookupLines(ctx context.Context, ns, pod string) ([]lookupLine, error) {
	rc, err := c.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "c"}).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("logs of %s: %w", pod, err)
	}
	defer rc.Close()
	var lines []lookupLine
	sc := bufio.NewScanner(io.LimitReader(rc, 64<<20))
	for sc.Scan() {
		if l, ok := parseLookup(sc.Text()); ok {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}
