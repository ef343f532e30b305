package clusterset_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// knownDifference is a kind of question whose answer may differ from
// CoreDNS 1.15's, and why the difference is deliberate. Each is the
// cluster zone's rule too (pkg/clusterdns/doc.go): the clusterset zone
// is answered by the same code, and the table shows the cluster.local
// question of each kind differing alike.
type knownDifference struct {
	why   string
	match func(q question) bool
}

// knownDifferences are the kinds of question whose answers may differ
// from CoreDNS's; a difference of no kind fails the test, and a kind that
// matches no difference does too.
var knownDifferences = []knownDifference{
	{"RFC 8482: ANY gets one synthesized HINFO for a name that exists; CoreDNS looks ANY up as A (plugin/kubernetes/handler.go)",
		func(q question) bool { return q.qtype == dns.TypeANY }},
	{"RFC 2308: a name that does not exist is NXDOMAIN for SOA too; CoreDNS answers the apex's SOA only and NODATA below it (handler.go)",
		func(q question) bool { return q.qtype == dns.TypeSOA && strings.Contains(q.name, ".svc.") }},
	{"RFC 2308 and 8020: a name that exists without the type is NODATA; CoreDNS answers NXDOMAIN for a TXT it lacks and cannot parse dns-version for other types",
		func(q question) bool {
			return (q.qtype == dns.TypeTXT && !strings.HasPrefix(q.name, "dns-version.")) || (q.qtype == dns.TypeA && strings.HasPrefix(q.name, "dns-version."))
		}},
	{"an SRV owner (_port._proto) has no address: NODATA; CoreDNS ignores the type when it matches a name and answers the service's addresses there",
		func(q question) bool { return q.qtype == dns.TypeA && strings.HasPrefix(q.name, "_") }},
	{"an endpoint's name is its address's: SRV there is NODATA; CoreDNS synthesizes SRV records for it",
		func(q question) bool {
			base, _, ok := strings.Cut(q.name, ".<ns>.svc.")
			return ok && q.qtype == dns.TypeSRV && !strings.HasPrefix(base, "_") && strings.Contains(base, ".")
		}},
	{"one SRV per port, the weights 100/N over the distinct targets; CoreDNS makes one per clusterset IP, sums the weights, then drops the duplicate target (backend_lookup.go), so a dual-stack import's single record weighs 50",
		func(q question) bool {
			return q.qtype == dns.TypeSRV && (strings.Contains(q.name, "dual.") || strings.Contains(q.name, "nofam."))
		}},
	{"the apex's NS is ns.dns.<zone> (the SOA's name server); CoreDNS makes it from its own non-loopback addresses, none when bound to 127.0.0.1",
		func(q question) bool { return q.qtype == dns.TypeNS }},
}

// knownWhy is why q's answer may differ, false when it may not.
func knownWhy(q question) (int, string, bool) {
	for i, k := range knownDifferences {
		if k.match(q) {
			return i, k.why, true
		}
	}
	return -1, "", false
}

// TestSideBySideCoreDNS: CoreDNS 1.15 with `multicluster clusterset.local`
// and `dnsconfigurer serve --clusterset-zone clusterset.local` watch the
// same API server, which holds v1alpha1 ServiceImports (a ClusterSetIP
// import with one IP, dual-stack ones with and without ipFamilies, a
// headless one, a headless one whose endpoints are all not ready, a
// headless one with no slices), MCS EndpointSlices from two source clusters (IPv4 and IPv6, with and without
// hostname, ready, not ready and unset) and ordinary Services of the same
// names. Both are asked every record of the specification's table and the
// names around it (the reserved <clusterid>.<svc> form, missing imports,
// namespace and apex names, dns-version, cluster.local names); rcode, AA,
// TC and the three sections (TTLs included; SOA serials aside) must be the
// same, except for knownDifferences. The table is logged (-v).
func TestSideBySideCoreDNS(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	bin := corednsBin(t)
	client, dyn := clients(t, cp)
	installCRDs(t)
	ns := cp.Namespace(t)

	// The local cluster's Services, named as the imports.
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	createService(t, client, ns, "web", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: tcp}}})
	createService(t, client, ns, "db", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "tcp-db", Port: 5432, Protocol: tcp}}})
	createLocalSlice(t, client, ns, "db", []discoveryv1.EndpointPort{port("tcp-db", 5432, tcp)},
		endpoint{addr: "10.244.9.1", hostname: "db-0", ready: new(true)})
	createService(t, client, ns, "localonly", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: tcp}}})

	// The imports, as a v1alpha1 controller writes them (CoreDNS 1.15
	// reads v1alpha1 only).
	v1a := importsV1alpha1
	createImport(t, dyn, v1a, ns, "web", mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.200.0.10"},
		Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: tcp}, {Name: "dns", Port: 53, Protocol: udp}},
	}, nil)
	createMCSSlice(t, client, ns, "web", "east", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{port("http", 8080, tcp), port("dns", 5353, udp)},
		endpoint{addr: "10.10.2.1", hostname: "web-0", ready: new(true)},
		endpoint{addr: "10.10.2.2", ready: new(true)})
	createMCSSlice(t, client, ns, "web", "west", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{port("http", 8080, tcp), port("dns", 5353, udp)},
		endpoint{addr: "10.20.2.1", ready: new(true)})
	createImport(t, dyn, v1a, ns, "dual", mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.200.0.20", "fd00:200::20"},
		IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
		Ports:      []mcsv1beta1.ServicePort{{Name: "http", Port: 8080, Protocol: tcp}},
	}, nil)
	// As a controller from before ipFamilies writes a dual-stack import.
	createImport(t, dyn, v1a, ns, "nofam", mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.ClusterSetIP, IPs: []string{"fd00:200::30", "10.200.0.30"},
		Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 8080, Protocol: tcp}},
	}, nil)
	createImport(t, dyn, v1a, ns, "empty", mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: tcp}},
	}, nil)
	createMCSSlice(t, client, ns, "empty", "east", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{port("http", 80, tcp)},
		endpoint{addr: "10.10.3.1", hostname: "empty-0", ready: new(false)})
	createImport(t, dyn, v1a, ns, "noeps", mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: tcp}},
	}, nil)
	createMCSSlice(t, client, ns, "db", "east", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{port("tcp-db", 5432, tcp)},
		endpoint{addr: "10.10.1.1", hostname: "db-0", ready: new(true)},
		endpoint{addr: "10.10.1.2", ready: new(true)},
		endpoint{addr: "10.10.1.3", hostname: "db-2", ready: new(false)},
		endpoint{addr: "10.10.1.4", hostname: "db-3"}) // ready unset: ready
	createMCSSlice(t, client, ns, "db", "west", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{port("tcp-db", 5432, tcp)},
		endpoint{addr: "10.20.1.1", hostname: "db-0", ready: new(true)})
	createMCSSlice(t, client, ns, "db", "west", discoveryv1.AddressTypeIPv6,
		[]discoveryv1.EndpointPort{port("tcp-db", 5432, tcp)},
		endpoint{addr: "fd00:20::1", hostname: "db-1", ready: new(true)},
		endpoint{addr: "fd00:20::2", ready: new(true)})
	// Last: the import the servers are waited on.
	createImport(t, dyn, v1a, ns, "db", mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Name: "tcp-db", Port: 5432, Protocol: tcp}},
	}, nil)

	cd := startCoreDNS(t, bin, cp.Kubeconfig())
	serve := startServe(t, cp.Kubeconfig())

	// CoreDNS has every object once it answers the last import with all
	// of its ready IPv4 endpoints.
	last := question{svcName("db", clustersetZone), dns.TypeA}
	deadline := time.Now().Add(startBound)
	for {
		r := ask(cd, ns, last.fqdn(ns), last.qtype)
		if r.rcode == dns.RcodeSuccess && len(r.answer) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("coredns never answered %s with 4 addresses: %s", last, r)
		}
		time.Sleep(200 * time.Millisecond)
	}

	questions := sideQuestions()
	// serve gets settleBound to answer as CoreDNS does; then the table.
	var rows []row
	settle := time.Now().Add(settleBound)
	for {
		rows = rows[:0]
		same := true
		for _, q := range questions {
			c, s := ask(cd, ns, q.fqdn(ns), q.qtype), ask(serve.DNS, ns, q.fqdn(ns), q.qtype)
			rows = append(rows, row{q: q, coredns: c, serve: s})
			same = same && c.equal(s)
		}
		if same || time.Now().After(settle) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}

	var table strings.Builder
	differ, known := 0, 0
	used := make([]bool, len(knownDifferences))
	for _, r := range rows {
		key := r.q.String()
		switch {
		case r.coredns.equal(r.serve):
			fmt.Fprintf(&table, "  same  %-58s %s\n", key, r.coredns)
		default:
			mark := "DIFF"
			if i, why, ok := knownWhy(r.q); ok {
				mark = "known"
				known++
				used[i] = true
				defer t.Logf("known difference %s: %s", key, why)
			} else {
				differ++
			}
			fmt.Fprintf(&table, "  %-5s %-58s coredns: %s\n  %-5s %-58s serve:   %s\n", mark, key, r.coredns, "", "", r.serve)
		}
	}
	t.Logf("side by side, %d questions, %d differences (%d known):\n%s", len(rows), differ+known, known, table.String())
	// The SOA serials, left out of the comparison: each server numbers
	// its own changes.
	for _, zone := range []string{clustersetZone, clusterZone} {
		t.Logf("SOA serial of %s: coredns %d, serve %d", zone, serial(cd, zone), serial(serve.DNS, zone))
	}
	if differ > 0 {
		t.Errorf("%d of %d answers differ from CoreDNS 1.15's (table above)", differ, len(rows))
	}
	for i, k := range knownDifferences {
		if !used[i] {
			t.Errorf("knownDifferences[%d] (%s): no answer differs so now; remove it", i, k.why)
		}
	}
}

type row struct {
	q              question
	coredns, serve reply
}

// sideQuestions is the table asked of both servers.
func sideQuestions() []question {
	set := func(zone string) string { return "<ns>.svc." + zone + "." }
	var qs []question
	all := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT, dns.TypeSOA, dns.TypeNS, dns.TypeANY, dns.TypeCNAME, dns.TypePTR}
	for _, svc := range []string{"web", "dual", "nofam", "db", "empty", "noeps", "nope", "localonly"} {
		for _, t := range all {
			qs = append(qs, question{svcName(svc, clustersetZone), t})
		}
	}
	add := func(name string, types ...uint16) {
		for _, t := range types {
			qs = append(qs, question{name, t})
		}
	}
	a, aaaa, srv := dns.TypeA, dns.TypeAAAA, dns.TypeSRV
	// Case: the question's case is kept in the answer.
	add("WEB."+set(clustersetZone), a)
	add("Db."+set(clustersetZone), srv)
	// Named ports: _port._proto.
	add("_http._tcp."+svcName("web", clustersetZone), srv, a, aaaa, dns.TypeTXT)
	add("_dns._udp."+svcName("web", clustersetZone), srv)
	add("_dns._tcp."+svcName("web", clustersetZone), srv)
	add("_nope._tcp."+svcName("web", clustersetZone), srv)
	add("_http._tcp."+svcName("dual", clustersetZone), srv)
	add("_tcp-db._tcp."+svcName("db", clustersetZone), srv, a)
	add("_http._tcp."+svcName("empty", clustersetZone), srv)
	add("_http._tcp."+svcName("nope", clustersetZone), srv)
	add("_http."+svcName("web", clustersetZone), srv) // one underscore label
	// Per-endpoint names: <hostname>.<clusterid>.<svc>.
	for _, n := range []string{"db-0.east", "db-0.west", "db-1.west", "db-2.east", "db-3.east", "10-10-1-2.east", "fd00-20--2.west",
		"db-0.nocluster", "db-1.east", "DB-0.EAST"} {
		add(n+"."+svcName("db", clustersetZone), a, aaaa, srv, dns.TypeTXT, dns.TypeANY)
	}
	add("empty-0.east."+svcName("empty", clustersetZone), a)
	// Endpoint names of a ClusterSetIP import.
	add("web-0.east."+svcName("web", clustersetZone), a, srv)
	add("10-20-2-1.west."+svcName("web", clustersetZone), a)
	// The reserved <clusterid>.<svc> form, and <hostname>.<svc> without
	// a cluster.
	add("east."+svcName("db", clustersetZone), a, srv, dns.TypeANY)
	add("west."+svcName("web", clustersetZone), a)
	add("db-0."+svcName("db", clustersetZone), a)
	add("web-0."+svcName("web", clustersetZone), a)
	// Too long.
	add("x.db-0.east."+svcName("db", clustersetZone), a)
	add("x._http._tcp."+svcName("web", clustersetZone), srv)
	// Namespaces, svc, pod, the apex and other names of the zone.
	add(set(clustersetZone), a, srv, dns.TypeTXT, dns.TypeANY)
	add("nons.svc."+clustersetZone+".", a)
	add("default.svc."+clustersetZone+".", a, dns.TypeTXT) // a namespace without imports
	add("kubernetes.default.svc."+clustersetZone+".", a)   // a local Service not exported
	add("svc."+clustersetZone+".", a, dns.TypeSOA, dns.TypeNS)
	add("pod."+clustersetZone+".", a)
	add("10-10-1-1.<ns>.pod."+clustersetZone+".", a)
	add("x."+clustersetZone+".", a)
	add(clustersetZone+".", dns.TypeSOA, dns.TypeNS, a, aaaa, dns.TypeTXT, srv, dns.TypeANY)
	add("dns-version."+clustersetZone+".", dns.TypeTXT, a)
	add("ns.dns."+clustersetZone+".", a, aaaa)
	// The cluster zone is unchanged. The questions whose clusterset
	// answers differ are asked here too: the same difference in the
	// cluster zone is the server's rule, not the clusterset zone's.
	for _, svc := range []string{"web", "db", "localonly", "dual", "nope"} {
		add(svcName(svc, clusterZone), a, aaaa, srv)
	}
	add(svcName("web", clusterZone), dns.TypeANY, dns.TypeSOA, dns.TypeTXT)
	add(svcName("nope", clusterZone), dns.TypeSOA, dns.TypeTXT)
	add("_http._tcp."+svcName("web", clusterZone), srv, a)
	add("_tcp-db._tcp."+svcName("db", clusterZone), srv, a)
	add("db-0."+svcName("db", clusterZone), a, srv, dns.TypeANY)
	add("db-0.east."+svcName("db", clusterZone), a)
	add(set(clusterZone), a, dns.TypeTXT)
	add("default.svc."+clusterZone+".", a)
	add("nons.svc."+clusterZone+".", a)
	add(clusterZone+".", dns.TypeSOA, dns.TypeNS, dns.TypeTXT, dns.TypeANY)
	add("dns-version."+clusterZone+".", dns.TypeTXT, a)
	add("ns.dns."+clusterZone+".", a)
	return qs
}

// serial is the serial of zone's SOA at addr, 0 when there is none.
func serial(addr, zone string) uint32 {
	r, err := testkit.Exchange("udp", addr, zone+".", dns.TypeSOA)
	if err != nil || len(r.Answer) == 0 {
		return 0
	}
	if soa, ok := r.Answer[0].(*dns.SOA); ok {
		return soa.Serial
	}
	return 0
}
