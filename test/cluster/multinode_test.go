package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// multiNodeEnv selects the topologies TestClusterMultiNode runs: "all"
// (or "1"), or a comma-separated list of names. Unset, it skips: each
// topology takes a cluster's time and more.
const multiNodeEnv = "DNSCONFIGURER_MULTINODE"

// topology is one multi-node cluster's shape.
type topology struct {
	name string
	opts Options
	// events runs the rollout and failure events (testEvents) too.
	events bool
	// noE2E leaves the upstream DNS specs out (they ran on the same shape
	// with the other agent).
	noE2E bool
}

func topologyNames() []string {
	var names []string
	for _, t := range topologies {
		names = append(names, t.name)
	}
	return names
}

// topologies are the multi-node clusters, by the name the summary lines
// carry.
var topologies = []topology{
	{"3node-iptables", Options{Nodes: 3, ProxyMode: ProxyIPTables}, true, false},
	{"3node-nftables", Options{Nodes: 3, ProxyMode: ProxyNFTables}, true, false},
	{"dualstack", Options{Nodes: 3, ProxyMode: ProxyIPTables, DualStack: true}, false, false},
	{"ipv6only", Options{Nodes: 3, ProxyMode: ProxyIPTables, IPv6Only: true}, false, false},
	// The NRI plugin as the agent, a DaemonSet rolled out with the rest
	// (containerd 2.x: $DNSCONFIGURER_CONTAINERD_BIN, or it skips).
	{"3node-nri", Options{Nodes: 3, ProxyMode: ProxyNFTables, Agent: AgentNRI}, true, true},
}

// TestClusterMultiNode brings up three-node clusters (nodes.go), one per
// kube-proxy mode, deploys dnsconfigurer with both cluster DNS replicas
// off the control-plane node, runs the upstream DNS specs, then rolls,
// kills, scales and restarts while pods on every node resolve (events).
// Each result is one line on standard output, for a check outside the
// test to read:
//
//	multinode: e2e dns TOPOLOGY: passed N failed M skipped K
//	multinode: event NAME: lookups N failed M longest-gap-ms G
//
// It runs the topologies $DNSCONFIGURER_MULTINODE names (.ci/long sets
// it to all).
func TestClusterMultiNode(t *testing.T) {
	want := os.Getenv(multiNodeEnv)
	if want == "" {
		t.Skipf("set $%s=all (or a list of topologies) to run the multi-node clusters", multiNodeEnv)
	}
	if want != "all" && want != "1" {
		for _, name := range strings.Split(want, ",") {
			if !slices.ContainsFunc(topologies, func(t topology) bool { return t.name == name }) {
				t.Fatalf("$%s: no topology %q (there are %v)", multiNodeEnv, name, topologyNames())
			}
		}
	}
	for _, topo := range topologies {
		if want != "all" && want != "1" && !slices.Contains(strings.Split(want, ","), topo.name) {
			continue
		}
		t.Run(topo.name, func(t *testing.T) {
			withCluster(t, topo.opts, topo.name, func(t *testing.T, c *Cluster, st *steps) {
				if !st.run(t, "deploy", func(t *testing.T) { deploySpread(t, c) }) {
					return
				}
				st.run(t, "conformance", func(t *testing.T) {
					if topo.noE2E {
						t.Skipf("the DNS specs run on %s's shape with the shim", topo.name)
					}
					p, f, s := testConformance(t, c)
					fmt.Printf("multinode: e2e dns %s: passed %d failed %d skipped %d\n", topo.name, p, f, s)
				})
				if topo.opts.DualStack || topo.opts.IPv6Only {
					st.run(t, "dualstack", func(t *testing.T) { testDualStack(t, c) })
				}
				if topo.events {
					st.run(t, "events", func(t *testing.T) { testEvents(t, c, topo.name) })
				}
			})
		})
	}
}

// deploySpread deploys dnsconfigurer with the first node cordoned, so
// that the two cluster DNS replicas run on the other two nodes (the
// Deployment prefers distinct nodes), and checks that they do.
func deploySpread(t *testing.T, c *Cluster) {
	ctx := testContext(t, 10*time.Minute)
	if err := c.cordon(ctx, c.first().Name, true); err != nil {
		t.Fatal(err)
	}
	out, err := c.DeployDNS(ctx)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := c.cordon(ctx, c.first().Name, false); err != nil {
		t.Fatal(err)
	}
	nodes, err := c.dnsPodNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0] == nodes[1] || slices.Contains(nodes, c.first().Name) {
		t.Fatalf("cluster DNS pods on %v, want two distinct nodes other than %s", nodes, c.first().Name)
	}
	t.Logf("cluster DNS pods on %v", nodes)
}

// cordon marks a node unschedulable, or schedulable again.
func (c *Cluster) cordon(ctx context.Context, node string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	_, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// dnsPodNodes lists the nodes of the running cluster DNS pods, sorted.
func (c *Cluster) dnsPodNodes(ctx context.Context) ([]string, error) {
	pods, err := c.Client.CoreV1().Pods(DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: dnsPodSelector})
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	slices.Sort(nodes)
	return nodes, nil
}

// dnsPodSelector selects the cluster DNS pods of deploy/dnsserver.
const dnsPodSelector = "app.kubernetes.io/instance=dnsconfigurer-dns"
