package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodenet"
)

// The name the transparent-mode proofs ask for, and its answer.
const (
	kubernetesName = "kubernetes.default.svc.cluster.local"
	kubernetesIP   = "10.96.0.1"
)

// testTransparent: deploy/'s node-local stage takes the cluster DNS Service
// IP over on the node, so a ClusterFirst pod, whose resolv.conf names only
// 10.96.0.10, is answered by it (counted at the stage, over UDP and TCP).
// With the stage stopped, its addresses and notrack table are gone from the
// node and the same lookups are answered by the cluster DNS pods through
// kube-proxy (counted there); back, it answers again. Then a rolling
// restart (maxSurge, SO_REUSEPORT) under a pod querying in a loop: no
// lookup fails.
func testTransparent(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	runPod(t, c, ns, toolsPod("client"))
	ctx := testContext(t, 6*time.Minute)
	rc, err := c.exec(ctx, ns, "client", "cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	if got := parseResolvConf(rc).nameservers; len(got) != 1 || got[0] != ClusterDNS.String() {
		t.Fatalf("ClusterFirst pod's nameservers %q, want only %s", got, ClusterDNS)
	}
	dig := func(t *testing.T, transport string) {
		t.Helper()
		out, err := c.exec(ctx, ns, "client", "dig", "+short", "+tries=1", "+time=2", transport, kubernetesName, "A")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(out); got != kubernetesIP {
			t.Fatalf("dig %s %s: %q, want %s", transport, kubernetesName, got, kubernetesIP)
		}
	}
	// digCounted asks over UDP and TCP and returns how many queries count
	// saw meanwhile.
	digCounted := func(t *testing.T, count func(context.Context) (int, error)) int {
		t.Helper()
		before, err := count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dig(t, "+notcp")
		dig(t, "+tcp")
		after, err := count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return after - before
	}

	t.Run("served by node-local", func(t *testing.T) {
		if present, err := c.nodeLocalSetup(); err != nil || !present {
			t.Fatalf("node-local's addresses and notrack table on the node: %v (%v)", present, err)
		}
		if n := digCounted(t, c.nodeLocalQueries); n != 2 {
			t.Errorf("%d queries at the node-local stage for a UDP and a TCP lookup of the Service IP, want 2", n)
		}
	})

	ds := c.Client.AppsV1().DaemonSets(NodeNamespace)
	setSelector := func(t *testing.T, patch string) {
		t.Helper()
		if _, err := ds.Patch(ctx, NodeLocalDS, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("falls back while stopped", func(t *testing.T) {
		// No node matches: the controller deletes the pod, which tears
		// the node's set-up down on SIGTERM.
		setSelector(t, `{"spec":{"template":{"spec":{"nodeSelector":{"dnsconfigurer.test/none":"true"}}}}}`)
		err := waitFor(ctx, "no node-local pod and no set-up on the node", func(ctx context.Context) (bool, error) {
			pods, err := c.Client.CoreV1().Pods(NodeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=node-local-dns"})
			if err != nil {
				return false, err
			}
			present, err := c.nodeLocalSetup()
			return len(pods.Items) == 0 && !present && err == nil, fmt.Errorf("%d pods, set-up present %v (%v)", len(pods.Items), present, err)
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := digCounted(t, c.clusterDNSQueries); n < 2 {
			t.Errorf("%d queries at the cluster DNS pods for a UDP and a TCP lookup, want at least 2", n)
		}
	})
	t.Run("back", func(t *testing.T) {
		setSelector(t, `{"spec":{"template":{"spec":{"nodeSelector":{"dnsconfigurer.test/none":null}}}}}`)
		if err := c.WaitRollout(ctx, "daemonset", NodeNamespace, NodeLocalDS); err != nil {
			t.Fatal(err)
		}
		err := waitFor(ctx, "node-local's set-up on the node", func(ctx context.Context) (bool, error) {
			present, err := c.nodeLocalSetup()
			return present, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := digCounted(t, c.nodeLocalQueries); n != 2 {
			t.Errorf("%d queries at the node-local stage, want 2", n)
		}
	})
	t.Run("rolling restart", func(t *testing.T) { testNodeLocalRestart(t, c, ns) })
}

// testNodeLocalRestart restarts the node-local DaemonSet (kubectl rollout
// restart: a surge pod first, then the old one stops) while the pod client
// in ns looks a name up in a loop, one UDP query per lookup and no retry,
// and counts the lookups that failed.
func testNodeLocalRestart(t *testing.T, c *Cluster, ns string) {
	ctx := testContext(t, 4*time.Minute)
	// The loop ends when /tmp/stop appears, or after 180 s at most.
	loop := `end=$(( $(date +%s) + 180 )); n=0; fail=0
while [ ! -e /tmp/stop ] && [ "$(date +%s)" -lt "$end" ]; do
  r=$(dig +short +tries=1 +time=2 ` + kubernetesName + ` A)
  [ "$r" = "` + kubernetesIP + `" ] || { fail=$((fail+1)); echo "$(date +%T) $r" >> /tmp/failures; }
  n=$((n+1)); echo "$n $fail" > /tmp/count.new; mv /tmp/count.new /tmp/count
done`
	if _, err := c.exec(ctx, ns, "client", "sh", "-c", "rm -f /tmp/stop /tmp/count /tmp/failures; ("+loop+") >/dev/null 2>&1 &"); err != nil {
		t.Fatal(err)
	}
	counts := func() (n, fail int) {
		out, err := c.exec(ctx, ns, "client", "sh", "-c", "cat /tmp/count 2>/dev/null || echo 0 0")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscan(out, &n, &fail); err != nil {
			t.Fatalf("loop count %q: %v", out, err)
		}
		return n, fail
	}
	// The loop runs before the restart begins.
	if err := waitFor(ctx, "the lookup loop", func(context.Context) (bool, error) {
		n, _ := counts()
		return n >= 20, fmt.Errorf("%d lookups", n)
	}); err != nil {
		t.Fatal(err)
	}
	old, err := c.nodeLocalPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logs := c.keepDNSLogs(ctx)
	if out, err := c.Kubectl(ctx, "-n", NodeNamespace, "rollout", "restart", "daemonset/"+NodeLocalDS); err != nil {
		t.Fatalf("rollout restart: %v\n%s", err, out)
	}
	// Done when the old pods are gone and the new one is available. The
	// old pod's lameduck (5 s) keeps both there for a while: a surge.
	surged := false
	err = waitFor(ctx, "the restart", func(ctx context.Context) (bool, error) {
		now, err := c.nodeLocalPods(ctx)
		if err != nil {
			return false, err
		}
		surged = surged || len(now) == 2
		for _, uid := range now {
			for _, o := range old {
				if uid == o {
					return false, fmt.Errorf("old pod %s still there", o)
				}
			}
		}
		return len(now) == 1, fmt.Errorf("pods %v", now)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !surged {
		t.Error("never saw the new pod next to the old one: no surge (maxSurge)")
	}
	c.checkHandover(t, logs, old)
	if err := c.WaitRollout(ctx, "daemonset", NodeNamespace, NodeLocalDS); err != nil {
		t.Fatal(err)
	}
	// Some lookups after the old pod's exit, then stop the loop.
	n0, _ := counts()
	if err := waitFor(ctx, "lookups after the restart", func(context.Context) (bool, error) {
		n, _ := counts()
		return n >= n0+20, fmt.Errorf("%d lookups", n)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.exec(ctx, ns, "client", "touch", "/tmp/stop"); err != nil {
		t.Fatal(err)
	}
	n, fail := counts()
	if fail != 0 {
		out, _ := c.exec(ctx, ns, "client", "cat", "/tmp/failures")
		t.Errorf("%d of %d lookups failed through the rolling restart:\n%s", fail, n, out)
	} else {
		t.Logf("rolling restart of node-local: %d lookups (one UDP query each, no retry), 0 failed", n)
	}
	if present, err := c.nodeLocalSetup(); err != nil || !present {
		t.Errorf("after the restart, node-local's set-up present %v (%v)", present, err)
	}
}

// checkHandover checks from the node-local pods' logs that the old pods
// were stopped (their lameduck began) only after the new pod served DNS.
// Both pods' probes reach whichever instance the kernel picks for the
// shared health port: were the old instance to answer the new pod's
// readiness, the DaemonSet would stop it while the new one still waits
// for the cluster DNS.
func (c *Cluster) checkHandover(t *testing.T, logs *dnsLogs, old []types.UID) {
	t.Helper()
	now, err := c.nodeLocalPods(context.Background())
	if err != nil || len(now) != 1 {
		t.Errorf("node-local pods after the restart: %v (%v)", now, err)
		return
	}
	served, ok := logs.first(string(now[0]), `msg="serving DNS"`)
	if !ok {
		t.Errorf("the new pod %s never logged serving DNS", now[0])
		return
	}
	for _, o := range old {
		stopped, ok := logs.first(string(o), `msg="lameduck`)
		switch {
		case !ok:
			t.Errorf("the old pod %s never logged its lameduck", o)
		case stopped.Before(served):
			t.Errorf("the old pod %s was stopped at %s, before the new one served DNS at %s", o, stopped.Format("15:04:05.000"), served.Format("15:04:05.000"))
		default:
			t.Logf("rolling restart of node-local: the new pod served DNS %.2f s before the old one was stopped", stopped.Sub(served).Seconds())
		}
	}
}

// nodeLocalPods returns the UIDs of the node-local DaemonSet's pods,
// terminating ones included.
func (c *Cluster) nodeLocalPods(ctx context.Context) ([]types.UID, error) {
	pods, err := c.Client.CoreV1().Pods(NodeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=node-local-dns"})
	if err != nil {
		return nil, err
	}
	var uids []types.UID
	for _, p := range pods.Items {
		uids = append(uids, p.UID)
	}
	return uids, nil
}

// nodeLocalSetup reports whether the node has node-local's transparent
// set-up: both addresses local and the notrack table in place. A partial
// set-up is an error.
func (c *Cluster) nodeLocalSetup() (bool, error) { return c.nodeLocalSetupOn("") }

// nodeLocalSetupOn is nodeLocalSetup with the addresses counted on one
// device only ("" for any), for a node where another program holds them
// too on its own interface.
func (c *Cluster) nodeLocalSetupOn(dev string) (bool, error) {
	f, err := os.Open(c.Node.NetNSPath)
	if err != nil {
		return false, err
	}
	defer f.Close()
	ips := []netip.Addr{NodeLocalDNS, ClusterDNS}
	table, err := nodenet.NewNftNotrack(int(f.Fd())).Present(ips, 53)
	if err != nil {
		return false, err
	}
	n, err := c.localAddrs(dev)
	if err != nil {
		return false, err
	}
	switch {
	case table && n == len(ips):
		return true, nil
	case !table && n == 0:
		return false, nil
	}
	return false, fmt.Errorf("partial set-up: notrack table %v, %d of the addresses %v", table, n, ips)
}

// localAddrs counts the node-local addresses (NodeLocalDNS, ClusterDNS)
// on one device of the node ("" for any); a missing device has none.
func (c *Cluster) localAddrs(dev string) (int, error) {
	out, err := exec.Command("ip", "-n", c.Node.NetNS, "-o", "addr", "show").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ip addr: %w: %s", err, out)
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || (dev != "" && f[1] != dev) {
			continue
		}
		if f[3] == NodeLocalDNS.String()+"/32" || f[3] == ClusterDNS.String()+"/32" {
			n++
		}
	}
	return n, nil
}

// clusterDNSQueries sums dnsconfigurer_dnsserver_requests_total over the
// cluster DNS pods (their /metrics on the pod addresses, port 9153).
func (c *Cluster) clusterDNSQueries(ctx context.Context) (int, error) {
	pods, err := c.Client.CoreV1().Pods(DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=dns"})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, p := range pods.Items {
		if p.Status.PodIP == "" {
			continue
		}
		// A replica that has answered nothing yet has no series.
		n, err := c.scrapeSum(ctx, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(9153))+"/metrics", false, "dnsconfigurer_dnsserver_requests_total")
		if err != nil {
			return 0, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		total += n
	}
	return total, nil
}
