package main

import (
	"flag"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestRenderCorefile(t *testing.T) {
	got := renderCorefile(corednsPorts{dns: "127.0.0.1:5353", health: "127.0.0.1:8080", ready: "127.0.0.1:8181", metrics: "127.0.0.1:9153"},
		"/tmp/admin.kubeconfig", "127.0.0.1:5300")
	path := filepath.Join("testdata", "Corefile.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("Corefile:\n%s\nwant (%s):\n%s", got, path, want)
	}
}

// TestObjectsMatchCeiling checks that the objects the servers load and the
// ceiling's map describe the same cluster: every ClusterIP Service's
// address, every headless Service's endpoints.
func TestObjectsMatchCeiling(t *testing.T) {
	objs := benchObjects()
	table := ceilingTable()
	cidr := netip.MustParsePrefix("10.96.0.0/16") // apiserver.ServiceCIDR
	seen := map[string]bool{}
	clusterIPs := 0
	for _, svc := range objs.services {
		fq := svc.Name + "." + svc.Namespace + ".svc." + zone
		if svc.Spec.ClusterIP == "None" {
			continue
		}
		clusterIPs++
		ip := netip.MustParseAddr(svc.Spec.ClusterIP)
		if !cidr.Contains(ip) || ip == netip.MustParseAddr("10.96.0.1") || seen[ip.String()] {
			t.Fatalf("%s: cluster IP %s outside %s, the API server's own or taken twice", fq, ip, cidr)
		}
		seen[ip.String()] = true
		e, ok := table[ceilingKey{fq, dns.TypeA}]
		if !ok || len(e.answer) != 1 || e.answer[0].(*dns.A).A.String() != svc.Spec.ClusterIP {
			t.Fatalf("%s: ceiling answers %v, want A %s", fq, e.answer, svc.Spec.ClusterIP)
		}
	}
	if clusterIPs != namespaces*perNS {
		t.Errorf("%d ClusterIP Services, want %d", clusterIPs, namespaces*perNS)
	}
	if len(objs.slices) != headless {
		t.Fatalf("%d EndpointSlices, want %d", len(objs.slices), headless)
	}
	for _, sl := range objs.slices {
		svc := sl.Labels["kubernetes.io/service-name"]
		fq := "_http._tcp." + svc + "." + sl.Namespace + ".svc." + zone
		e, ok := table[ceilingKey{fq, dns.TypeSRV}]
		if !ok || len(e.extra) != len(sl.Endpoints) {
			t.Fatalf("%s: ceiling has %d addresses, the slice %d", fq, len(e.extra), len(sl.Endpoints))
		}
		for i, ep := range sl.Endpoints {
			if got := e.extra[i].(*dns.A).A.String(); got != ep.Addresses[0] || !*ep.Conditions.Ready {
				t.Errorf("%s: ceiling address %d is %s, the slice's %s (ready %v)", fq, i, got, ep.Addresses[0], *ep.Conditions.Ready)
			}
		}
	}
}

func TestWriteManifests(t *testing.T) {
	dir := t.TempDir()
	objs := benchObjects()
	if err := writeManifests(dir, objs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "---\n")[1:]
	if want := len(objs.namespaces) + len(objs.services) + len(objs.slices); len(docs) != want {
		t.Fatalf("%d documents, want %d", len(docs), want)
	}
	for _, want := range []string{"kind: Namespace\n", "kind: Service\n", "kind: EndpointSlice\n", "apiVersion: discovery.k8s.io/v1\n", "clusterIP: 10.96.1.1\n", "clusterIP: None\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("manifests lack %q", want)
		}
	}
}

func TestCompareAnswers(t *testing.T) {
	a := func(name, ip string, ttl uint32) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(ip).To4()}
	}
	msg := func(rcode int, tc bool, rrs ...dns.RR) *dns.Msg {
		m := new(dns.Msg)
		m.Rcode, m.Truncated, m.Answer = rcode, tc, rrs
		return m
	}
	want := msg(dns.RcodeSuccess, false, a("x.ns.svc.cluster.local.", "10.0.0.1", 5), a("x.ns.svc.cluster.local.", "10.0.0.2", 5))
	tests := []struct {
		name string
		got  *dns.Msg
		diff string // a substring of the difference; "" for none
	}{
		{"same", want, ""},
		{"other order, TTL and case", msg(dns.RcodeSuccess, false, a("X.ns.svc.cluster.local.", "10.0.0.2", 30), a("x.ns.svc.cluster.local.", "10.0.0.1", 3)), ""},
		{"rcode", msg(dns.RcodeNameError, false), "rcode NXDOMAIN, want NOERROR"},
		{"truncated", msg(dns.RcodeSuccess, true), "truncated true"},
		{"one missing", msg(dns.RcodeSuccess, false, a("x.ns.svc.cluster.local.", "10.0.0.1", 5)), "answer ["},
		{"another address", msg(dns.RcodeSuccess, false, a("x.ns.svc.cluster.local.", "10.0.0.1", 5), a("x.ns.svc.cluster.local.", "10.0.0.3", 5)), "10.0.0.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := compareAnswers(want, tt.got)
			if (tt.diff == "") != (d == "") || !strings.Contains(d, tt.diff) {
				t.Errorf("compareAnswers = %q, want %q", d, tt.diff)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	res := func(qps, cpu float64) result { return result{qps: qps, cpuUS: cpu} }
	targets := []*target{
		{name: nameCeiling, res: res(20000, 20)},
		{name: nameServer, res: res(40000, 10)},
		{name: nameCoreDNS, res: res(10000, 50)},
	}
	var b strings.Builder
	writeTable(&b, "a", targets)
	rows := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3:\n%s", len(rows), b.String())
	}
	// The last four columns: QPS and CPU over the ceiling's, then over
	// CoreDNS's.
	tests := []struct {
		row  string
		want []string
	}{
		{rows[0], []string{"0", "0"}}, // the ceiling: wrong, lost, no ratios
		{rows[1], []string{"2.00", "0.50", "4.00", "0.20"}},
		{rows[2], []string{"0.50", "2.50"}},
	}
	for _, tt := range tests {
		f := strings.Fields(tt.row)
		if got := f[len(f)-len(tt.want):]; strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("row %q ends %v, want %v", tt.row, got, tt.want)
		}
	}
	if h := strings.Fields(tableHeader); len(h) != len(strings.Fields(rows[1])) {
		t.Errorf("header has %d columns, a full row %d", len(h), len(strings.Fields(rows[1])))
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		a, b float64
		want string
	}{
		{3, 2, "1.50"},
		{1, 3, "0.33"},
		{0, 2, "-"},
		{2, 0, "-"},
	}
	for _, tt := range tests {
		if got := ratio(tt.a, tt.b); got != tt.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}
