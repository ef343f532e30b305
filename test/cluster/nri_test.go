package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
)

// nriMetrics is the NRI plugin's /metrics on the node's loopback
// (deploy/nri: --metrics-listen=127.0.0.1:9311, host network).
const nriMetrics = "http://127.0.0.1:9311/metrics"

// TestClusterNRI runs the NRI plugin as deploy/overlays/nri ships it on a
// real one-node cluster whose kubelet talks straight to containerd 2.x:
// no kubelet change, no shim. The plugin finds each pod through the API
// server (its informer on this node's pods, with its ServiceAccount) and
// gives every container the pod's resolv.conf; it skips without
// $DNSCONFIGURER_CONTAINERD_BIN (test/e2e/containerd2.sh).
func TestClusterNRI(t *testing.T) {
	withCluster(t, Options{Agent: AgentNRI}, "kubelet Ready on containerd directly", func(t *testing.T, c *Cluster, st *steps) {
		if !st.run(t, "deploy", func(t *testing.T) { testDeploy(t, c) }) {
			t.Log("deploy/overlays/nri failed: the NRI proofs are skipped")
			return
		}
		st.proofs(t, c, proof{"policies", testPolicies}, proof{"limits", testNRILimits}, proof{"live-update", testNRILiveUpdate},
			proof{"resolve", testResolve}, proof{"explain", testNRIExplain}, proof{"cleanup", testNRICleanup})
	})
}

// checkNRIFile asserts that the plugin wrote the pod's file and that the
// container reads exactly that file (in reads from inside).
func checkNRIFile(t *testing.T, c *Cluster, pod *corev1.Pod, in string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.NRIStateDir(), string(pod.UID), "resolv.conf"))
	if err != nil {
		t.Errorf("the plugin's file for pod %s: %v", pod.Name, err)
		return
	}
	if string(b) != in {
		t.Errorf("the container's /etc/resolv.conf is not the plugin's file:\ncontainer:\n%s\nplugin:\n%s", in, b)
	}
}

// testNRILimits: a ClusterFirst pod whose dnsConfig brings the search list
// to 36 entries gets kubelet's trimmed list (the first 32), from the
// plugin's file, and the plugin posts a DNSConfigForming Event for it as
// the shim does.
func testNRILimits(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	p := toolsPod("many-searches")
	var searches []string
	for i := range 32 {
		searches = append(searches, fmt.Sprintf("s%02d.example", i))
	}
	p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: searches}
	running := runPod(t, c, ns, p)
	ctx := testContext(t, 2*time.Minute)
	out, err := c.exec(ctx, ns, p.Name, "cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local", "node.test"}, searches[:28]...)
	if got := parseResolvConf(out).searches; !slices.Equal(got, want) {
		t.Errorf("searches in the container: %q\nwant the first 32: %q", got, want)
	}
	checkNRIFile(t, c, running, out)

	var event *corev1.Event
	err = waitFor(ctx, "the plugin's DNSConfigForming Event", func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": p.Name, "reason": "DNSConfigForming"}.String(),
		})
		if err != nil {
			return false, err
		}
		var sources []string
		for i, e := range list.Items {
			if e.Source.Component == podfacts.ComponentNRI {
				event = &list.Items[i]
				return true, nil
			}
			sources = append(sources, e.Source.Component)
		}
		return false, fmt.Errorf("DNSConfigForming Events only from %q", sources)
	})
	if err != nil {
		t.Fatal(err)
	}
	// kubelet's wording: the search line as applied.
	applied := "the applied search line is: " + strings.Join(want, " ")
	if event.Type != corev1.EventTypeWarning || event.Source.Host != NodeName || event.InvolvedObject.UID != running.UID ||
		!strings.HasSuffix(event.Message, applied) {
		t.Errorf("Event: type %s, host %q, object uid %s (pod %s), message %q; want a Warning from %s ending %q",
			event.Type, event.Source.Host, event.InvolvedObject.UID, running.UID, event.Message, NodeName, applied)
	}
	t.Logf("Event from %s: %s", event.Source.Component, event.Message)
}

// testNRILiveUpdate: the node's resolv.conf changes under a running Default
// pod and a running ClusterFirst pod; both containers read the new host
// entries without a restart (kubelet alone gives them only at creation),
// and a None pod's file stays as it was.
func testNRILiveUpdate(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	def := toolsPod("default")
	def.Spec.DNSPolicy = corev1.DNSDefault
	none := toolsPod("none")
	none.Spec.DNSPolicy = corev1.DNSNone
	none.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.233.0.1"}, Searches: []string{"none.example"}}
	for _, p := range []*corev1.Pod{def, toolsPod("cluster"), none} {
		runPod(t, c, ns, p)
	}
	ctx := testContext(t, 2*time.Minute)
	noneBefore, err := c.exec(ctx, ns, "none", "cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.scrapeSum(ctx, nriMetrics, false, "dnsconfigurer_nri_live_updates_total")
	if err != nil {
		t.Fatal(err)
	}

	// In place, as an operator's editor or a DHCP client may: the plugin's
	// pod has the file bind-mounted, so a rename would not reach it.
	path := c.NodeResolvConfPath()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Errorf("restore %s: %v", path, err)
		}
	})
	changed := "nameserver " + NodeIP.String() + "\nsearch node.test changed.test\n"
	if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	wants := map[string]resolvConf{
		"default": {nameservers: []string{NodeIP.String()}, searches: []string{"node.test", "changed.test"}},
		"cluster": {
			nameservers: []string{ClusterDNS.String()},
			searches:    []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local", "node.test", "changed.test"},
			options:     []string{"ndots:5"},
		},
	}
	for name, want := range wants {
		err := waitFor(ctx, "the new host file in pod "+name, func(ctx context.Context) (bool, error) {
			out, err := c.exec(ctx, ns, name, "cat", "/etc/resolv.conf")
			if err != nil {
				return false, err
			}
			got := parseResolvConf(out)
			return got.equal(want), fmt.Errorf("got %s, want %s", got, want)
		})
		if err != nil {
			t.Error(err)
		}
	}
	t.Logf("the host change reached both running containers in %s", time.Since(begin).Round(time.Millisecond))
	noneAfter, err := c.exec(ctx, ns, "none", "cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	if noneAfter != noneBefore {
		t.Errorf("the None pod's file changed:\n%s\nwas\n%s", noneAfter, noneBefore)
	}
	after, err := c.scrapeSum(ctx, nriMetrics, false, "dnsconfigurer_nri_live_updates_total")
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 2 {
		t.Errorf("dnsconfigurer_nri_live_updates_total %d → %d, want at least 2 more", before, after)
	}
}

// testNRICleanup: a pod's state directory goes with its sandbox, and the
// plugin adjusted containers through the API server path (its counter of
// adjusted containers grew and no stage failed to get pod facts).
func testNRICleanup(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	ctx := testContext(t, 2*time.Minute)
	p := runPod(t, c, ns, toolsPod("gone"))
	dir := filepath.Join(c.NRIStateDir(), string(p.UID))
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("state of a running pod: %v", err)
	}
	if err := deletePod(ctx, c, ns, p.Name); err != nil {
		t.Fatal(err)
	}
	err := waitFor(ctx, "state dir of the deleted pod removed", func(context.Context) (bool, error) {
		_, err := os.Stat(dir)
		return os.IsNotExist(err), err
	})
	if err != nil {
		t.Error(err)
	}
	adjusted, err := c.scrapeSum(ctx, nriMetrics, false, "dnsconfigurer_nri_containers_total")
	if err != nil {
		t.Fatal(err)
	}
	factErrors, err := c.scrapeSum(ctx, nriMetrics, false, "dnsconfigurer_nri_errors_total")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plugin: %d containers seen, %d errors", adjusted, factErrors)
	if adjusted == 0 {
		t.Error("the plugin counted no containers")
	}
}

// testNRIExplain runs `dnsconfigurer explain` as an operator would, with
// the admin's kubeconfig: it finds the NRI plugin's pod on the node,
// reads the node's settings from it through a port-forward, and compares
// its result with each container's file (kubectl exec). An autopath pod's
// container matches, with the autopath step in the trace; a container that
// mounts its own /etc/resolv.conf (which the plugin leaves alone) differs.
func testNRIExplain(t *testing.T, c *Cluster) {
	ns := namespace(t, c)
	ctx := testContext(t, 3*time.Minute)
	auto := toolsPod("auto")
	auto.Annotations = map[string]string{"dnsconfigurer.io/dns-policy": "ClusterFirstWithAutopath"}
	runPod(t, c, ns, auto)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "own-resolv"}, Data: map[string]string{"resolv.conf": "nameserver 10.233.0.99\n"}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	own := toolsPod("own")
	own.Spec.Volumes = []corev1.Volume{{Name: "resolv", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "own-resolv"}}}}}
	own.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "resolv", MountPath: "/etc/resolv.conf", SubPath: "resolv.conf"}}
	runPod(t, c, ns, own)

	type report struct {
		Nameservers []string `json:"nameservers"`
		Searches    []string `json:"searches"`
		Agent       string   `json:"agent"`
		Node        struct {
			Kind string `json:"kind"`
		} `json:"node"`
		Trace []struct {
			Rule string `json:"rule"`
		} `json:"trace"`
		Containers []struct {
			Name, Status, Reason string
		} `json:"containers"`
	}
	explain := func(pod string) report {
		t.Helper()
		cmd := c.Command(ctx, c.Product, "explain", pod, "-n", ns, "-o", "json", "--timeout", "60s")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("explain %s: %v\n%s", pod, err, stderr.String())
		}
		var r report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("explain %s: %v\n%s", pod, err, out)
		}
		if r.Node.Kind != "nri" || !strings.HasPrefix(r.Agent, NodeNamespace+"/"+NRIDS) {
			t.Errorf("explain %s: settings of %q from agent %q, want the nri plugin's pod", pod, r.Node.Kind, r.Agent)
		}
		t.Logf("explain %s: %d decisions, containers %+v", pod, len(r.Trace), r.Containers)
		return r
	}

	r := explain("auto")
	if want := []string{NodeLocalDNS.String(), ClusterDNS.String()}; !slices.Equal(r.Nameservers, want) {
		t.Errorf("explain auto: nameservers %q, want %q", r.Nameservers, want)
	}
	var autopath bool
	for _, d := range r.Trace {
		autopath = autopath || strings.HasPrefix(d.Rule, "autopath")
	}
	if !autopath {
		t.Errorf("explain auto: no autopath decision in the trace %+v", r.Trace)
	}
	if len(r.Containers) != 1 || r.Containers[0].Status != "matches" {
		t.Errorf("explain auto: containers %+v, want c matches", r.Containers)
	}

	r = explain("own")
	if len(r.Containers) != 1 || r.Containers[0].Status != "differs" {
		t.Errorf("explain own: containers %+v, want c differs (it mounts its own /etc/resolv.conf)", r.Containers)
	}
}
