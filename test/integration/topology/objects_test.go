// Package topology runs `serve --objects` (the built binary, test/buildbin)
// on a manifest of Nodes in two topology zones, Pods, headless Services
// and their EndpointSlices, and asks it over UDP on loopback from pod
// addresses (a local bind to 127.0.0.x): each client gets its topology
// zone's (or node's) endpoints, as spec.trafficDistribution says, also
// through autopath.
package topology

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// manifest: nodes n1 (za), n2 and n3 (zb); client pods on n1 and n2;
// three headless Services over the same endpoints on n1, n2 and n3.
var manifest = `apiVersion: v1
kind: Node
metadata: {name: n1, labels: {topology.kubernetes.io/zone: za}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {topology.kubernetes.io/zone: zb}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {topology.kubernetes.io/zone: zb}}
` + clientPod("client-a", "n1", "127.0.0.81") + clientPod("client-b", "n2", "127.0.0.82") + services

// clientPod is the manifest of a running pod of namespace app.
func clientPod(name, node, ip string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: app}
spec: {nodeName: %s, containers: [{name: c, image: busybox}]}
status: {phase: Running, podIP: %s}
`, name, node, ip)
}

var services = `---
apiVersion: v1
kind: Service
metadata: {name: zonal, namespace: app}
spec: {clusterIP: None, trafficDistribution: PreferSameZone, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: nodal, namespace: app}
spec: {clusterIP: None, trafficDistribution: PreferSameNode, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: app}
spec: {clusterIP: None, ports: [{name: http, port: 80}]}
` + slices3

// slices3 are the three Services' EndpointSlices, over the same endpoints.
var slices3 = func() string {
	var b strings.Builder
	for _, svc := range []string{"zonal", "nodal", "plain"} {
		fmt.Fprintf(&b, `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %[1]s-1, namespace: app, labels: {kubernetes.io/service-name: %[1]s}}
addressType: IPv4
ports: [{name: http, port: 80, protocol: TCP}]
endpoints:
- {addresses: [10.0.0.1], hostname: e1, nodeName: n1, zone: za}
- {addresses: [10.0.0.2], hostname: e2, nodeName: n2, zone: zb}
- {addresses: [10.0.0.3], hostname: e3, nodeName: n3, zone: zb}
`, svc)
	}
	return b.String()
}()

// ask sends a query for name from the local address from (with the
// topology option of c when it is known) and returns the sorted A
// addresses or SRV targets of the answer.
func ask(t *testing.T, server, from, name string, qtype uint16, c topology.Client) []string {
	t.Helper()
	m := new(dns.Msg).SetQuestion(name, qtype)
	if c.Known() {
		topology.Add(m, topology.DefaultOptionCode, c)
	}
	client := &dns.Client{Net: "udp", Timeout: 5 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}}}
	r, _, err := client.Exchange(m, server)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", name, dns.TypeToString[qtype], from, err)
	}
	var got []string
	for _, rr := range r.Answer {
		switch v := rr.(type) {
		case *dns.A:
			got = append(got, v.A.String())
		case *dns.SRV:
			got = append(got, v.Target)
		}
	}
	slices.Sort(got)
	return got
}

func TestServeObjectsTopology(t *testing.T) {
	srv := buildbin.StartServeArgs(t, "127.0.0.80:0", "--objects", buildbin.Objects(t, manifest), "--pods", "verified")
	const (
		clientA  = "127.0.0.81" // pod client-a on n1, za
		clientB  = "127.0.0.82" // pod client-b on n2, zb
		stranger = "127.0.0.83" // no pod
	)
	all := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	tests := []struct {
		desc, from, name string
		qtype            uint16
		option           topology.Client
		want             []string
	}{
		{"zone a", clientA, "zonal.app.svc.cluster.local.", dns.TypeA, topology.Client{}, []string{"10.0.0.1"}},
		{"zone b", clientB, "zonal.app.svc.cluster.local.", dns.TypeA, topology.Client{}, []string{"10.0.0.2", "10.0.0.3"}},
		{"unknown client", stranger, "zonal.app.svc.cluster.local.", dns.TypeA, topology.Client{}, all},
		{"zone b SRV", clientB, "_http._tcp.zonal.app.svc.cluster.local.", dns.TypeSRV, topology.Client{},
			[]string{"e2.zonal.app.svc.cluster.local.", "e3.zonal.app.svc.cluster.local."}},
		{"zone a bare SRV", clientA, "zonal.app.svc.cluster.local.", dns.TypeSRV, topology.Client{},
			[]string{"e1.zonal.app.svc.cluster.local."}},
		{"an endpoint name answers its pod", clientA, "e3.zonal.app.svc.cluster.local.", dns.TypeA, topology.Client{}, []string{"10.0.0.3"}},
		{"node n2", clientB, "nodal.app.svc.cluster.local.", dns.TypeA, topology.Client{}, []string{"10.0.0.2"}},
		{"node n1", clientA, "nodal.app.svc.cluster.local.", dns.TypeA, topology.Client{}, []string{"10.0.0.1"}},
		{"unset answers all (a)", clientA, "plain.app.svc.cluster.local.", dns.TypeA, topology.Client{}, all},
		{"unset answers all (b)", clientB, "plain.app.svc.cluster.local.", dns.TypeA, topology.Client{}, all},
		{"the option wins", clientA, "zonal.app.svc.cluster.local.", dns.TypeA, topology.Client{Zone: "zb"}, []string{"10.0.0.2", "10.0.0.3"}},
		{"the option's node", stranger, "nodal.app.svc.cluster.local.", dns.TypeA, topology.Client{Zone: "zb", Node: "n3"}, []string{"10.0.0.3"}},
		{"zone-scoped pin", stranger, "zb.pin._zone.zonal.app.svc.cluster.local.", dns.TypeA, topology.Client{}, []string{"10.0.0.2", "10.0.0.3"}},
		{"zone-scoped prefer, empty zone", stranger, "zz.prefer._zone.zonal.app.svc.cluster.local.", dns.TypeA, topology.Client{}, all},
	}
	// Twice, so that the second round is answered from the reply cache:
	// one client's answer is never another's.
	for round := range 2 {
		for _, tt := range tests {
			if got := ask(t, srv.DNS, tt.from, tt.name, tt.qtype, tt.option); !slices.Equal(got, tt.want) {
				t.Errorf("round %d, %s: %s from %s = %v, want %v", round, tt.desc, tt.name, tt.from, got, tt.want)
			}
		}
	}
	// 1,000 lookups from each zone: no cross-zone answer.
	for _, c := range []struct{ from, wrong string }{{clientA, "10.0.0.2"}, {clientB, "10.0.0.1"}} {
		cross := 0
		for range 1000 {
			if slices.Contains(ask(t, srv.DNS, c.from, "zonal.app.svc.cluster.local.", dns.TypeA, topology.Client{}), c.wrong) {
				cross++
			}
		}
		if cross != 0 {
			t.Errorf("from %s: %d cross-zone answers in 1000", c.from, cross)
		}
	}
}

// TestServeObjectsTopologyAutopath: autopath answers each candidate with
// its variant for the client, for an autopath name (placed by its pod or
// by the option) and for a first search step expanded by source.
func TestServeObjectsTopologyAutopath(t *testing.T) {
	srv := buildbin.StartServeArgs(t, "127.0.0.80:0", "--objects", buildbin.Objects(t, manifest), "--pods", "verified", "--autopath-by-source")
	const clientA, clientB, stranger = "127.0.0.81", "127.0.0.82", "127.0.0.83"
	const apName = "zonal.search.app.cluster.local.ap.k8s.io."
	// zonal.app's first search step: its second candidate is zonal.app.svc.cluster.local.
	const step = "zonal.app.app.svc.cluster.local."
	za, zb := []string{"10.0.0.1"}, []string{"10.0.0.2", "10.0.0.3"}
	tests := []struct {
		desc, from, name string
		option           topology.Client
		want             []string
	}{
		{"autopath, zone a", clientA, apName, topology.Client{}, za},
		{"autopath, zone b", clientB, apName, topology.Client{}, zb},
		{"autopath, unknown client", stranger, apName, topology.Client{}, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		{"autopath, the option", stranger, apName, topology.Client{Zone: "zb"}, zb},
		{"by source, zone a", clientA, step, topology.Client{}, za},
		{"by source, zone b", clientB, step, topology.Client{}, zb},
		{"by source, the option wins", clientA, step, topology.Client{Zone: "zb"}, zb},
	}
	for round := range 2 {
		for _, tt := range tests {
			if got := ask(t, srv.DNS, tt.from, tt.name, dns.TypeA, tt.option); !slices.Equal(got, tt.want) {
				t.Errorf("round %d, %s: %s from %s = %v, want %v", round, tt.desc, tt.name, tt.from, got, tt.want)
			}
		}
	}
}
