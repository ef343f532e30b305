package explain

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// fourEndpoints: two ready in zone-a (w1, w2), one ready in zone-b (w3)
// and one in zone-a that is not ready (served by publishNotReady).
var fourEndpoints = []Endpoint{
	{Address: "10.0.1.1", Zone: "zone-a", Node: "w1", Ready: true},
	{Address: "10.0.1.2", Zone: "zone-a", Node: "w2", Ready: true},
	{Address: "10.0.2.1", Zone: "zone-b", Node: "w3", Ready: true},
	{Address: "10.0.1.3", Zone: "zone-a", Node: "w1"},
}

// TestRoute: each traffic distribution's tiers and fallbacks, with the
// reason explain prints.
func TestRoute(t *testing.T) {
	w1 := &Topology{Node: "w1", Zone: "zone-a"}
	cases := []struct {
		name     string
		topo     *Topology
		td       string
		headless bool
		eps      []Endpoint
		tier     string
		answers  string
		reason   string
	}{
		{"samezone", w1, "PreferSameZone", true, fourEndpoints[:3], "zone", "10.0.1.1 10.0.1.2",
			"PreferSameZone: 2 ready endpoints in topology zone zone-a (the pod's, node w1) → answers those 2"},
		{"close is samezone", w1, "PreferClose", true, fourEndpoints[:3], "zone", "10.0.1.1 10.0.1.2",
			"PreferClose: 2 ready endpoints in topology zone zone-a (the pod's, node w1) → answers those 2"},
		{"zone drained", &Topology{Node: "w9", Zone: "zone-c"}, "PreferSameZone", true, fourEndpoints[:3], "all", "10.0.1.1 10.0.1.2 10.0.2.1",
			"PreferSameZone: none ready in topology zone zone-c (the pod's, node w9) → all 3"},
		{"not ready is not in the zone", &Topology{Node: "w3", Zone: "zone-b"}, "PreferSameZone", true, fourEndpoints, "zone", "10.0.2.1",
			"PreferSameZone: 1 ready endpoint in topology zone zone-b (the pod's, node w3) → answers it"},
		{"samenode", w1, "PreferSameNode", true, fourEndpoints, "node", "10.0.1.1",
			"PreferSameNode: 1 ready endpoint on node w1 (the pod's) → answers it"},
		{"samenode to zone", &Topology{Node: "w4", Zone: "zone-a"}, "PreferSameNode", true, fourEndpoints, "zone", "10.0.1.1 10.0.1.2",
			"PreferSameNode: none ready on node w4 (the pod's); 2 ready endpoints in topology zone zone-a (the pod's, node w4) → answers those 2"},
		{"samenode to all", &Topology{Node: "w9", Zone: "zone-c"}, "PreferSameNode", true, fourEndpoints, "all", "10.0.1.1 10.0.1.2 10.0.2.1 10.0.1.3",
			"PreferSameNode: none ready on node w9 (the pod's); none ready in topology zone zone-c (the pod's, node w9) → all 4"},
		{"unset", w1, "", true, fourEndpoints, "all", "10.0.1.1 10.0.1.2 10.0.2.1 10.0.1.3", "trafficDistribution unset → all 4"},
		{"unknown value", w1, "PreferFarAway", true, fourEndpoints[:3], "all", "10.0.1.1 10.0.1.2 10.0.2.1",
			`trafficDistribution "PreferFarAway" is not one the cluster DNS knows → all 3`},
		{"node without zone label", &Topology{Node: "w1"}, "PreferSameZone", true, fourEndpoints[:3], "all", "10.0.1.1 10.0.1.2 10.0.2.1",
			"PreferSameZone: node w1 has no topology.kubernetes.io/zone label → all 3"},
		{"case folds as the store's keys", &Topology{Node: "W1", Zone: "Zone-A"}, "PreferSameZone", true, fourEndpoints[:3], "zone", "10.0.1.1 10.0.1.2",
			"PreferSameZone: 2 ready endpoints in topology zone Zone-A (the pod's, node W1) → answers those 2"},
		{"clusterip", w1, "PreferSameZone", false, fourEndpoints[:3], "none", "",
			"not headless: the name answers the ClusterIP; kube-proxy routes by trafficDistribution"},
		{"no endpoints", w1, "PreferSameZone", true, nil, "none", "", "no served endpoint: NXDOMAIN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Route(tc.topo, Service{Namespace: "db", Name: "kafka", Headless: tc.headless, TrafficDistribution: tc.td, Endpoints: tc.eps})
			if a.Tier != tc.tier || strings.Join(a.Answers, " ") != tc.answers || a.Reason != tc.reason {
				t.Errorf("Route = tier %q, answers %q, reason %q\nwant tier %q, answers %q, reason %q", a.Tier, strings.Join(a.Answers, " "), a.Reason, tc.tier, tc.answers, tc.reason)
			}
		})
	}
}

// TestRouteTierAgrees: the tier named in the reason is the set
// topology.Prefer answers, for every client place over a mixed Service.
func TestRouteTierAgrees(t *testing.T) {
	for _, td := range []string{"PreferSameZone", "PreferClose", "PreferSameNode", ""} {
		for _, node := range []string{"", "w1", "w2", "w3", "w9"} {
			for _, zone := range []string{"", "zone-a", "zone-b", "zone-c"} {
				topo := &Topology{Node: node, Zone: zone}
				a := Route(topo, Service{Headless: true, TrafficDistribution: td, Endpoints: fourEndpoints})
				var want []string
				for _, e := range fourEndpoints {
					switch {
					case a.Tier == "all",
						a.Tier == "zone" && e.Ready && e.Zone == zone,
						a.Tier == "node" && e.Ready && e.Node == node:
						want = append(want, e.Address)
					}
				}
				if !slices.Equal(a.Answers, want) {
					t.Errorf("%s, node %q, zone %q: tier %s names %v, Prefer answers %v", td, node, zone, a.Tier, want, a.Answers)
				}
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestGatherTopology reads the node's label, the headless Services of the
// pod's namespace (or the named ones) and their slices as the store
// serves them; a refused read is reported, not fatal.
func TestGatherTopology(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{topology.ZoneLabel: "zone-a"}}}
	svc := func(ns, name, clusterIP string, td *string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: clusterIP, TrafficDistribution: td}}
	}
	ep := func(addr, zone, node string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Zone: ptr(zone), NodeName: ptr(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready)}}
	}
	slice := func(ns, name, svc string, at discoveryv1.AddressType, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: at, Endpoints: eps}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.PodSpec{NodeName: "w1"}}
	client := fake.NewClientset(node,
		svc("shop", "kafka", "None", ptr("PreferSameZone")), svc("shop", "api", "10.96.0.5", ptr("PreferSameZone")),
		svc("shop", "cass", "None", nil), svc("db", "pg", "None", ptr("PreferSameNode")),
		slice("shop", "kafka-1", "kafka", discoveryv1.AddressTypeIPv4, ep("10.0.1.1", "zone-a", "w1", true), ep("10.0.2.1", "zone-b", "w3", true), ep("10.0.1.9", "zone-a", "w2", false)),
		slice("shop", "kafka-2", "kafka", discoveryv1.AddressTypeIPv4, ep("10.0.1.1", "zone-a", "w1", true)),
		slice("shop", "kafka-3", "kafka", discoveryv1.AddressTypeFQDN, ep("kafka.example.com", "zone-a", "w1", true)),
		slice("shop", "cass-1", "cass", discoveryv1.AddressTypeIPv4, ep("10.0.3.1", "zone-b", "w3", true)),
		slice("db", "pg-1", "pg", discoveryv1.AddressTypeIPv4, ep("10.0.4.1", "zone-a", "w1", true)))
	e := Explainer{Client: client, Timeout: time.Minute}

	got := e.gatherTopology(t.Context(), pod, nil)
	var lines []string
	for _, s := range got.Services {
		lines = append(lines, s.Namespace+"/"+s.Name+" "+s.TrafficDistribution+" "+Route(got, s).Reason)
	}
	want := []string{
		"shop/cass  trafficDistribution unset → all 1",
		"shop/kafka PreferSameZone PreferSameZone: 1 ready endpoint in topology zone zone-a (the pod's, node w1) → answers it",
	}
	if got.Err != "" || got.Zone != "zone-a" || !slices.Equal(lines, want) {
		t.Errorf("gatherTopology: zone %q, err %q, services\n%s\nwant zone-a and\n%s", got.Zone, got.Err, strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	got = e.gatherTopology(t.Context(), pod, []string{"db/pg", "api"})
	if len(got.Services) != 2 || got.Services[0].Name != "pg" || got.Services[1].Headless || got.Err != "" {
		t.Errorf("named services: %+v", got)
	}
	if got = e.gatherTopology(t.Context(), pod, []string{"gone"}); !strings.Contains(got.Err, `get service shop/gone: services "gone" not found`) {
		t.Errorf("a missing named service: %q", got.Err)
	}

	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "w1", nil)
	})
	got = e.gatherTopology(context.Background(), pod, nil)
	if !strings.Contains(got.Err, "RBAC: explain needs get nodes") || got.Services != nil {
		t.Errorf("refused nodes: %+v", got)
	}
}

// TestGatherServiceImport: --service-import reads the ServiceImport at the
// version the cluster DNS reads and its imported slices, as the
// clusterset zone serves them: every ready endpoint of every cluster,
// routed by the import's trafficDistribution.
func TestGatherServiceImport(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{topology.ZoneLabel: "zone-a"}}}
	imported := func(name, cluster string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name,
			Labels: map[string]string{mcsv1beta1.LabelServiceName: "kafka", mcsv1beta1.LabelSourceCluster: cluster}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
	}
	ep := func(addr, zone string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Zone: ptr(zone), Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready)}}
	}
	client := fake.NewClientset(node,
		imported("kafka-east", "east", ep("10.1.0.1", "zone-a", true), ep("10.1.0.2", "zone-a", false)),
		imported("kafka-west", "west", ep("10.2.0.1", "zone-b", true)))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.PodSpec{NodeName: "w1"}}
	e := Explainer{Client: client, Timeout: time.Minute, Imports: []string{"kafka"},
		MCS: mcsfake.NewSimpleClientset(&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kafka"},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, TrafficDistribution: ptr("PreferSameZone")}})}

	got := e.gatherTopology(t.Context(), pod, []string{"none"})
	if !strings.Contains(got.Err, "shop/none") {
		t.Fatalf("a missing Service first: %q", got.Err)
	}
	e.Client = client
	got = e.gatherTopology(t.Context(), pod, nil)
	if !strings.Contains(got.Err, "serves no ServiceImports") {
		t.Errorf("without the API: %q", got.Err)
	}
	client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "multicluster.x-k8s.io/v1beta1",
		APIResources: []metav1.APIResource{{Name: "serviceimports", Namespaced: true, Kind: "ServiceImport"}}}}
	got = e.gatherTopology(t.Context(), pod, nil)
	if got.Err != "" || len(got.Services) != 1 {
		t.Fatalf("gatherTopology: %+v", got)
	}
	a := Route(got, got.Services[0])
	if !a.Clusterset || !a.Headless || a.Endpoints != 2 || !slices.Equal(a.Answers, []string{"10.1.0.1"}) || a.Tier != "zone" {
		t.Errorf("route: %+v, want the import's zone-a endpoint of 2 ready ones", a)
	}
	// A pod in a zone without endpoints: this cluster's, else all.
	other := *got
	other.Zone, other.Cluster = "zone-c", "west"
	if a := Route(&other, other.Services[0]); a.Tier != "cluster" || !slices.Equal(a.Answers, []string{"10.2.0.1"}) {
		t.Errorf("zone-c in west: %+v", a)
	}
	other.Cluster = "north"
	if a := Route(&other, other.Services[0]); a.Tier != "all" || len(a.Answers) != 2 {
		t.Errorf("zone-c in north: %+v", a)
	}
	var b strings.Builder
	writeTopology(&b, got.Report())
	if !strings.Contains(b.String(), "# shop/kafka (ServiceImport, its clusterset name): PreferSameZone") {
		t.Errorf("report:\n%s", b.String())
	}
	e.Imports = []string{"shop/gone"}
	if got = e.gatherTopology(t.Context(), pod, nil); !strings.Contains(got.Err, "get serviceimport shop/gone") {
		t.Errorf("a missing import: %q", got.Err)
	}
}
