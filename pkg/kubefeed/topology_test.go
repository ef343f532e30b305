package kubefeed

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// TestConvertTopology: a Service keeps its traffic distribution, an
// endpoint its node and topology zone, a pod its node and a Node its name
// and topology zone label, nothing else.
func TestConvertTopology(t *testing.T) {
	svc, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: corev1.ServiceSpec{ClusterIP: "None", TrafficDistribution: ptr("PreferSameZone")}})
	if err != nil || svc.TrafficDistribution != "PreferSameZone" {
		t.Errorf("ToService = %+v, %v; want TrafficDistribution PreferSameZone", svc, err)
	}
	sl, err := ToEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns"},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.1.0.1"}, NodeName: ptr("n1"), Zone: ptr("za")},
			{Addresses: []string{"10.1.0.2"}},
		}})
	if err != nil || sl.Endpoints[0].NodeName != "n1" || sl.Endpoints[0].TopologyZone != "za" ||
		sl.Endpoints[1].NodeName != "" || sl.Endpoints[1].TopologyZone != "" {
		t.Errorf("ToEndpointSlice = %+v, %v", sl.Endpoints, err)
	}
	pod, _, err := ToPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.9"}})
	if err != nil || pod.NodeName != "n1" {
		t.Errorf("ToPod = %+v, %v; want NodeName n1", pod, err)
	}
	tests := []struct {
		node *corev1.Node
		want store.NodeTopology
		err  bool
	}{
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelTopologyZone: "za", "other": "x"}},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{}}}, store.NodeTopology{Name: "n1", TopologyZone: "za"}, false},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, store.NodeTopology{Name: "n2"}, false},
		{&corev1.Node{}, store.NodeTopology{}, true},
	}
	for _, tt := range tests {
		got, err := ToNode(tt.node)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ToNode(%q) = %+v, %v; want %+v, error %v", tt.node.Name, got, err, tt.want, tt.err)
		}
	}
}

// TestClusterFeedTopology: with pods watched, the feed follows Nodes, and
// a pod's source address finds its node and topology zone; a relabel
// moves it.
func TestClusterFeedTopology(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelTopologyZone: "za"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"}, Spec: corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.9"}},
	)
	st := newStore(t, store.Options{Pods: store.PodsVerified})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Cluster{Client: client, Store: st, Pods: true}).Run(ctx) }()
	ip := netip.MustParseAddr("10.1.0.9")
	zoneOf := func() string {
		snap := st.Snapshot()
		if snap == nil {
			return ""
		}
		zone, _ := snap.ClientTopology(ip)
		return zone
	}
	testkit.WaitEqual(t, 10*time.Second, "pod's topology zone", zoneOf, "za")
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n.Labels[corev1.LabelTopologyZone] = "zb"
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "relabelled node", zoneOf, "zb")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
}

// TestLoadManifestsNodes: a manifest's Nodes (and NodeLists) load as
// their name and topology zone label.
func TestLoadManifestsNodes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "nodes.yaml"), `apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {topology.kubernetes.io/zone: za, kubernetes.io/hostname: n1}
---
apiVersion: v1
kind: NodeList
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n2}
`)
	objs, err := LoadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.NodeTopology{{Name: "n1", TopologyZone: "za"}, {Name: "n2"}}
	if len(objs.Nodes) != 2 || objs.Nodes[0] != want[0] || objs.Nodes[1] != want[1] {
		t.Errorf("nodes = %+v, want %+v", objs.Nodes, want)
	}
}
