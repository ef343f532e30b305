package clusterdns_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

const fixture = "testdata/objects"

type env struct {
	addr string
	st   *store.Store
	h    *clusterdns.Handler
	srv  *dnsserver.Server
}

// start serves the manifests of dir on 127.0.0.1:0 (UDP and TCP).
func start(t *testing.T, opts store.Options, dir string, hopts ...clusterdns.Option) *env {
	t.Helper()
	if opts.Zone == "" {
		opts.Zone = "cluster.local"
	}
	st, err := store.New(opts)
	if err != nil {
		t.Fatalf("store.New: %v", err)
	}
	if dir != "" {
		objs, err := kubefeed.LoadManifests(dir)
		if err != nil {
			t.Fatalf("LoadManifests: %v", err)
		}
		st.Replace(objs)
		st.Publish()
	}
	return serve(t, st, hopts...)
}

func serve(t *testing.T, st *store.Store, hopts ...clusterdns.Option) *env {
	t.Helper()
	h := clusterdns.NewHandler(st.Options().Zone, st, hopts...)
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: h, Zones: []string{st.Options().Zone}}
	return &env{addr: testkit.StartServer(t, srv), st: st, h: h, srv: srv}
}

// ask sends one query over network ("udp" or "tcp"); edns > 0 adds an OPT
// with that size.
func ask(t *testing.T, network, addr, name string, qtype uint16, edns uint16) *dns.Msg {
	t.Helper()
	return testkit.Ask(t, network, addr, testkit.NewQuery(name, qtype, edns))
}

func rrStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, strings.Join(strings.Fields(rr.String()), " "))
	}
	slices.Sort(out)
	return out
}

type tcase struct {
	name   string
	qname  string
	qtype  uint16
	rcode  int
	answer []string // sorted presentation form, fields joined by one space
	extra  []string // nil: not checked
	// soa: a negative answer must carry the zone SOA with minttl = ttl.
	soa bool
}

// answers is a case answered with answer.
func answers(name, qname string, qtype uint16, answer ...string) tcase {
	return tcase{name: name, qname: qname, qtype: qtype, answer: answer}
}

// nxdomain is a case answered NXDOMAIN with the zone's SOA.
func nxdomain(name, qname string, qtype uint16) tcase {
	return tcase{name: name, qname: qname, qtype: qtype, rcode: dns.RcodeNameError, soa: true}
}

func check(t *testing.T, e *env, network string, ttl uint32, tc tcase) {
	t.Helper()
	r := ask(t, network, e.addr, tc.qname, tc.qtype, 0)
	if r.Rcode != tc.rcode {
		t.Fatalf("rcode = %s, want %s (answer %v)", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode], r.Answer)
	}
	want := append([]string(nil), tc.answer...)
	slices.Sort(want)
	if got := rrStrings(r.Answer); !slices.Equal(got, want) {
		t.Errorf("answer =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if tc.extra != nil {
		want := append([]string(nil), tc.extra...)
		slices.Sort(want)
		if got := rrStrings(r.Extra); !slices.Equal(got, want) {
			t.Errorf("extra =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	if tc.soa {
		if len(r.Ns) != 1 {
			t.Fatalf("authority = %v, want one SOA", r.Ns)
		}
		soa, ok := r.Ns[0].(*dns.SOA)
		if !ok {
			t.Fatalf("authority = %v, want SOA", r.Ns[0])
		}
		if soa.Minttl != ttl || soa.Hdr.Ttl != ttl {
			t.Errorf("SOA minttl/ttl = %d/%d, want %d", soa.Minttl, soa.Hdr.Ttl, ttl)
		}
	}
	if r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeNameError {
		if !r.Authoritative && strings.HasSuffix(strings.ToLower(tc.qname), "cluster.local.") {
			t.Errorf("AA not set on an in-zone answer")
		}
	}
}

func TestConformanceRecords(t *testing.T) {
	e := start(t, store.Options{TTL: 5, Pods: store.PodsVerified}, fixture)
	cases := []tcase{
		answers("schema version", "dns-version.cluster.local.", dns.TypeTXT, `dns-version.cluster.local. 28800 IN TXT "1.1.0"`),
		answers("clusterip A", "web.prod.svc.cluster.local.", dns.TypeA, "web.prod.svc.cluster.local. 5 IN A 10.96.0.10"),
		answers("clusterip AAAA dual-stack", "web.prod.svc.cluster.local.", dns.TypeAAAA, "web.prod.svc.cluster.local. 5 IN AAAA fd00::10"),
		{name: "clusterip SRV named port with additional", qname: "_http._tcp.web.prod.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_http._tcp.web.prod.svc.cluster.local. 5 IN SRV 0 100 80 web.prod.svc.cluster.local."},
			extra:  []string{"web.prod.svc.cluster.local. 5 IN A 10.96.0.10", "web.prod.svc.cluster.local. 5 IN AAAA fd00::10"}},
		answers("clusterip SRV udp port", "_dns._udp.web.prod.svc.cluster.local.", dns.TypeSRV, "_dns._udp.web.prod.svc.cluster.local. 5 IN SRV 0 100 53 web.prod.svc.cluster.local."),
		nxdomain("no SRV for an unnamed port", "_8080._tcp.web.prod.svc.cluster.local.", dns.TypeSRV),
		nxdomain("SRV wrong protocol", "_http._udp.web.prod.svc.cluster.local.", dns.TypeSRV),
		answers("PTR clusterip v4", "10.0.96.10.in-addr.arpa.", dns.TypePTR, "10.0.96.10.in-addr.arpa. 5 IN PTR web.prod.svc.cluster.local."),
		answers("PTR clusterip v6 nibbles", "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. 5 IN PTR web.prod.svc.cluster.local."),
		answers("headless A ready endpoints deduplicated", "db.prod.svc.cluster.local.", dns.TypeA, "db.prod.svc.cluster.local. 5 IN A 10.1.1.1", "db.prod.svc.cluster.local. 5 IN A 10.1.1.2", "db.prod.svc.cluster.local. 5 IN A 10.1.1.4"),
		answers("headless AAAA", "db.prod.svc.cluster.local.", dns.TypeAAAA, "db.prod.svc.cluster.local. 5 IN AAAA fd00::1:1"),
		answers("headless hostname", "db-0.db.prod.svc.cluster.local.", dns.TypeA, "db-0.db.prod.svc.cluster.local. 5 IN A 10.1.1.1"),
		answers("headless dashed label", "10-1-1-2.db.prod.svc.cluster.local.", dns.TypeA, "10-1-1-2.db.prod.svc.cluster.local. 5 IN A 10.1.1.2"),
		answers("headless dashed v6 label", "fd00--1-1.db.prod.svc.cluster.local.", dns.TypeAAAA, "fd00--1-1.db.prod.svc.cluster.local. 5 IN AAAA fd00::1:1"),
		nxdomain("not ready endpoint has no name", "10-1-1-3.db.prod.svc.cluster.local.", dns.TypeA),
		{name: "headless SRV NxM", qname: "_postgres._tcp.db.prod.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{
				"_postgres._tcp.db.prod.svc.cluster.local. 5 IN SRV 0 25 5432 10-1-1-2.db.prod.svc.cluster.local.",
				"_postgres._tcp.db.prod.svc.cluster.local. 5 IN SRV 0 25 5432 10-1-1-4.db.prod.svc.cluster.local.",
				"_postgres._tcp.db.prod.svc.cluster.local. 5 IN SRV 0 25 5432 db-0.db.prod.svc.cluster.local.",
				"_postgres._tcp.db.prod.svc.cluster.local. 5 IN SRV 0 25 5432 fd00--1-1.db.prod.svc.cluster.local.",
			},
			extra: []string{
				"10-1-1-2.db.prod.svc.cluster.local. 5 IN A 10.1.1.2",
				"10-1-1-4.db.prod.svc.cluster.local. 5 IN A 10.1.1.4",
				"db-0.db.prod.svc.cluster.local. 5 IN A 10.1.1.1",
				"fd00--1-1.db.prod.svc.cluster.local. 5 IN AAAA fd00::1:1",
			}},
		answers("PTR endpoint with hostname", "1.1.1.10.in-addr.arpa.", dns.TypePTR, "1.1.1.10.in-addr.arpa. 5 IN PTR db-0.db.prod.svc.cluster.local."),
		answers("PTR endpoint v6", "1.0.0.0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, "1.0.0.0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. 5 IN PTR fd00--1-1.db.prod.svc.cluster.local."),
		answers("publishNotReadyAddresses", "peer-0.peers.prod.svc.cluster.local.", dns.TypeA, "peer-0.peers.prod.svc.cluster.local. 5 IN A 10.1.2.1"),
		answers("externalname CNAME", "ext.prod.svc.cluster.local.", dns.TypeCNAME, "ext.prod.svc.cluster.local. 5 IN CNAME api.example.com."),
		answers("externalname A without upstream is the CNAME", "ext.prod.svc.cluster.local.", dns.TypeA, "ext.prod.svc.cluster.local. 5 IN CNAME api.example.com."),
		answers("externalname in zone followed", "alias.prod.svc.cluster.local.", dns.TypeA, "alias.prod.svc.cluster.local. 5 IN CNAME web.prod.svc.cluster.local.", "web.prod.svc.cluster.local. 5 IN A 10.96.0.10"),
		answers("externalname in zone followed AAAA", "alias.prod.svc.cluster.local.", dns.TypeAAAA, "alias.prod.svc.cluster.local. 5 IN CNAME web.prod.svc.cluster.local.", "web.prod.svc.cluster.local. 5 IN AAAA fd00::10"),
		answers("pod verified", "10-1-0-1.prod.pod.cluster.local.", dns.TypeA, "10-1-0-1.prod.pod.cluster.local. 5 IN A 10.1.0.1"),
		answers("pod verified v6", "fd00--1-5.prod.pod.cluster.local.", dns.TypeAAAA, "fd00--1-5.prod.pod.cluster.local. 5 IN AAAA fd00::1:5"),
		nxdomain("pod verified wrong namespace", "10-1-0-1.default.pod.cluster.local.", dns.TypeA),
		nxdomain("pod verified unknown IP", "10-9-9-9.prod.pod.cluster.local.", dns.TypeA),
		nxdomain("finished pod has no record", "10-1-9-9.prod.pod.cluster.local.", dns.TypeA),
		nxdomain("NXDOMAIN service", "nosuch.prod.svc.cluster.local.", dns.TypeA),
		nxdomain("NXDOMAIN namespace", "web.nosuch.svc.cluster.local.", dns.TypeA),
		{name: "NODATA other type", qname: "web.prod.svc.cluster.local.", qtype: dns.TypeTXT, soa: true},
		{name: "NODATA MX", qname: "kubernetes.default.svc.cluster.local.", qtype: dns.TypeMX, soa: true},
		{name: "empty non-terminal namespace", qname: "prod.svc.cluster.local.", qtype: dns.TypeA, soa: true},
		{name: "empty non-terminal namespace without services", qname: "quiet.svc.cluster.local.", qtype: dns.TypeA, soa: true},
		{name: "empty non-terminal svc", qname: "svc.cluster.local.", qtype: dns.TypeA, soa: true},
		{name: "empty non-terminal _proto", qname: "_tcp.web.prod.svc.cluster.local.", qtype: dns.TypeSRV, soa: true},
		nxdomain("NXDOMAIN search miss", "web.prod.svc.cluster.local.prod.svc.cluster.local.", dns.TypeA),
		{name: "apex SOA", qname: "cluster.local.", qtype: dns.TypeSOA},
		answers("case echoed", "WeB.PrOd.SvC.Cluster.Local.", dns.TypeA, "WeB.PrOd.SvC.Cluster.Local. 5 IN A 10.96.0.10"),
	}
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			for _, tc := range cases {
				if tc.name == "apex SOA" {
					r := ask(t, network, e.addr, tc.qname, tc.qtype, 0)
					if len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeSOA || r.Answer[0].(*dns.SOA).Minttl != 5 {
						t.Errorf("apex SOA answer = %v", r.Answer)
					}
					continue
				}
				t.Run(tc.name, func(t *testing.T) { check(t, e, network, 5, tc) })
			}
		})
	}
}

func TestConformanceServfailBeforeSync(t *testing.T) {
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	e := serve(t, st)
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"web.prod.svc.cluster.local.", dns.TypeA}, {"nosuch.prod.svc.cluster.local.", dns.TypeA}, {"10.0.96.10.in-addr.arpa.", dns.TypePTR}} {
		if r := ask(t, "udp", e.addr, q.name, q.qtype, 0); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("%s before sync: rcode %s, want SERVFAIL", q.name, dns.RcodeToString[r.Rcode])
		}
	}
	if e.h.Synced() {
		t.Errorf("Synced() before publish = true")
	}
	objs, err := kubefeed.LoadManifests(fixture)
	if err != nil {
		t.Fatal(err)
	}
	st.Replace(objs)
	st.Publish()
	if r := ask(t, "udp", e.addr, "nosuch.prod.svc.cluster.local.", dns.TypeA, 0); r.Rcode != dns.RcodeNameError {
		t.Errorf("after sync: rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
}

func TestConformancePodModes(t *testing.T) {
	cases := []struct {
		name  string
		mode  store.PodMode
		qname string
		qtype uint16
		rcode int
		n     int
	}{
		{"insecure any IP", store.PodsInsecure, "10-9-9-9.prod.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
		{"insecure v6", store.PodsInsecure, "fd00--9.prod.pod.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, 1},
		{"insecure family mismatch is NODATA", store.PodsInsecure, "10-9-9-9.prod.pod.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, 0},
		{"insecure garbage label", store.PodsInsecure, "not-an-ip.prod.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
		{"insecure bad octet", store.PodsInsecure, "10-9-9-300.prod.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
		{"disabled", store.PodsDisabled, "10-1-0-1.prod.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
		{"verified", store.PodsVerified, "10-1-0-1.prod.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
		{"verified other IP", store.PodsVerified, "10-9-9-9.prod.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, store.Options{TTL: 5, Pods: tc.mode}, fixture)
			r := ask(t, "udp", e.addr, tc.qname, tc.qtype, 0)
			if r.Rcode != tc.rcode || len(r.Answer) != tc.n {
				t.Fatalf("rcode %s answers %v, want %s and %d answers", dns.RcodeToString[r.Rcode], r.Answer, dns.RcodeToString[tc.rcode], tc.n)
			}
		})
	}
}

func TestConformanceOptions(t *testing.T) {
	type q struct {
		qname string
		qtype uint16
		rcode int
		n     int
	}
	cases := []struct {
		name string
		opts store.Options
		qs   []q
	}{
		{"ttl", store.Options{TTL: 30}, []q{{"web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1}}},
		{"namespaces", store.Options{TTL: 5, Namespaces: []string{"prod"}}, []q{
			{"web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
			{"kubernetes.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
			{"default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
			{"1.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, 0},
		}},
		{"empty service served by default", store.Options{TTL: 5}, []q{{"empty.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1}}},
		{"ignore-empty-service", store.Options{TTL: 5, IgnoreEmptyService: true}, []q{
			{"empty.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
			{"_http._tcp.empty.prod.svc.cluster.local.", dns.TypeSRV, dns.RcodeNameError, 0},
			{"web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
			{"ext.prod.svc.cluster.local.", dns.TypeCNAME, dns.RcodeSuccess, 1},
		}},
		{"endpoint-pod-names", store.Options{TTL: 5, EndpointPodNames: true}, []q{
			{"db-1.db.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
			{"db-0.db.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
			{"10-1-1-2.db.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
			{"10-1-1-4.db.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
		}},
		{"no-endpoints", store.Options{TTL: 5, NoEndpoints: true}, []q{
			{"db.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
			{"db-0.db.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
			{"1.1.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, 0},
			{"web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 1},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, tc.opts, fixture)
			for _, q := range tc.qs {
				r := ask(t, "udp", e.addr, q.qname, q.qtype, 0)
				if r.Rcode != q.rcode || len(r.Answer) != q.n {
					t.Errorf("%s %s: rcode %s answers %v, want %s and %d answers", q.qname, dns.TypeToString[q.qtype],
						dns.RcodeToString[r.Rcode], r.Answer, dns.RcodeToString[q.rcode], q.n)
				}
				for _, rr := range r.Answer {
					if rr.Header().Ttl != tc.opts.TTL {
						t.Errorf("%s: ttl %d, want %d", q.qname, rr.Header().Ttl, tc.opts.TTL)
					}
				}
			}
		})
	}
}

// bigHeadless writes the fixture plus a headless Service with n endpoints.
func bigHeadless(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(fixture, "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: big, namespace: prod}\nspec:\n  clusterIP: None\n  ports: [{name: http, port: 80}]\n---\n")
	b.WriteString("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: big-1\n  namespace: prod\n  labels: {kubernetes.io/service-name: big}\naddressType: IPv4\nports: [{name: http, port: 80, protocol: TCP}]\nendpoints:\n")
	for i := range n {
		fmt.Fprintf(&b, "- addresses: [10.2.%d.%d]\n", i/250, i%250+1)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestConformanceTruncation(t *testing.T) {
	e := start(t, store.Options{TTL: 5}, bigHeadless(t, 1000))
	const name = "big.prod.svc.cluster.local."

	// Over UDP a reply never exceeds 512 bytes without EDNS0 nor 1232 with
	// it, whatever size the client claims; TC tells it to retry over TCP.
	for _, tc := range []struct {
		qname string
		qtype uint16
		edns  uint16
		limit int
	}{
		{name, dns.TypeA, 0, 512},
		{name, dns.TypeA, 512, 512},
		{name, dns.TypeA, 1232, 1232},
		{name, dns.TypeA, 4096, 1232},
		{name, dns.TypeA, 65535, 1232},
		{"_http._tcp." + name, dns.TypeSRV, 0, 512},
		{"_http._tcp." + name, dns.TypeSRV, 65535, 1232},
	} {
		t.Run(fmt.Sprintf("udp %s edns %d", dns.TypeToString[tc.qtype], tc.edns), func(t *testing.T) {
			r, n := askRaw(t, e.addr, tc.qname, tc.qtype, tc.edns)
			if !r.Truncated || len(r.Answer) == 0 || len(r.Answer) >= 1000 {
				t.Fatalf("TC=%v answers=%d, want TC and a partial answer", r.Truncated, len(r.Answer))
			}
			if n > tc.limit {
				t.Errorf("%d-byte reply, want <= %d", n, tc.limit)
			}
			if n < tc.limit*3/4 {
				t.Errorf("%d-byte reply, want close to %d", n, tc.limit)
			}
			if (r.IsEdns0() != nil) != (tc.edns > 0) {
				t.Errorf("reply OPT %v for a query with EDNS0 size %d", r.IsEdns0(), tc.edns)
			}
			if opt := r.IsEdns0(); opt != nil && opt.UDPSize() != 1232 {
				t.Errorf("advertised EDNS0 size %d, want 1232", opt.UDPSize())
			}
		})
	}
	var r *dns.Msg
	r = ask(t, "tcp", e.addr, name, dns.TypeA, 0)
	if r.Truncated || len(r.Answer) != 1000 {
		t.Fatalf("tcp: TC=%v answers=%d, want 1000", r.Truncated, len(r.Answer))
	}
	r = ask(t, "tcp", e.addr, "_http._tcp."+name, dns.TypeSRV, 0)
	if len(r.Answer) != 1000 {
		t.Fatalf("tcp SRV: %d answers, want 1000", len(r.Answer))
	}
	// A small answer is not truncated and keeps the OPT.
	r = ask(t, "udp", e.addr, "web.prod.svc.cluster.local.", dns.TypeA, 1232)
	if r.Truncated || len(r.Answer) != 1 || r.IsEdns0() == nil {
		t.Errorf("small answer: TC=%v answers=%d opt=%v", r.Truncated, len(r.Answer), r.IsEdns0())
	}
}

// askRaw asks over UDP with a 64 KiB read buffer and returns the reply and
// its size on the wire.
func askRaw(t *testing.T, addr, name string, qtype uint16, edns uint16) (*dns.Msg, int) {
	t.Helper()
	b, err := testkit.NewQuery(name, qtype, edns).Pack()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, dns.MaxMsgSize)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("udp %s %s EDNS0 %d: no reply: %v", name, dns.TypeToString[qtype], edns, err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatalf("reply does not unpack: %v", err)
	}
	return r, n
}

func TestResolveWithoutWire(t *testing.T) {
	st, _ := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	objs, err := kubefeed.LoadManifests(fixture)
	if err != nil {
		t.Fatal(err)
	}
	st.Replace(objs)
	st.Publish()
	h := clusterdns.NewHandler("cluster.local", st)
	cases := []struct {
		name  string
		q     dns.Question
		rcode int
		n     int
	}{
		{"hit", dns.Question{Name: "web.prod.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET}, dns.RcodeSuccess, 1},
		{"miss", dns.Question{Name: "web.prod.svc.cluster.local.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET}, dns.RcodeNameError, 0},
		{"no trailing dot", dns.Question{Name: "web.prod.svc.cluster.local", Qtype: dns.TypeA, Qclass: dns.ClassINET}, dns.RcodeSuccess, 1},
		{"chaos class", dns.Question{Name: "version.bind.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS}, dns.RcodeRefused, 0},
		{"outside without upstream", dns.Question{Name: "example.org.", Qtype: dns.TypeA, Qclass: dns.ClassINET}, dns.RcodeRefused, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.Resolve(context.Background(), tc.q)
			if r.Rcode != tc.rcode || len(r.Answer) != tc.n {
				t.Fatalf("Resolve = %s %v, want %s with %d answers", dns.RcodeToString[r.Rcode], r.Answer, dns.RcodeToString[tc.rcode], tc.n)
			}
			for _, rr := range r.Answer {
				if !dns.IsFqdn(rr.Header().Name) {
					t.Errorf("owner %q is not fully qualified", rr.Header().Name)
				}
			}
		})
	}
}

// TestMetricsAndHealth: the server counts every query and its reply by
// zone, transport, address family, type and rcode, with their sizes and
// durations, over UDP and TCP; the records gauges follow the snapshot.
func TestMetricsAndHealth(t *testing.T) {
	st, _ := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	reg := prometheus.NewRegistry()
	if err := clusterdns.RegisterRecordMetrics(reg, st); err != nil {
		t.Fatal(err)
	}
	e := serve(t, st)
	reg.MustRegister(e.srv)
	ask(t, "udp", e.addr, "web.prod.svc.cluster.local.", dns.TypeA, 0) // SERVFAIL
	objs, _ := kubefeed.LoadManifests(fixture)
	st.Replace(objs)
	st.Publish()
	ask(t, "udp", e.addr, "web.prod.svc.cluster.local.", dns.TypeA, 0)
	ask(t, "udp", e.addr, "nosuch.prod.svc.cluster.local.", dns.TypeA, 0)
	ask(t, "tcp", e.addr, "x.cluster.local.", dns.TypeHINFO, 0)
	ask(t, "tcp", e.addr, "WEB.prod.svc.Cluster.Local.", dns.TypeAAAA, 1232)
	ask(t, "udp", e.addr, "example.org.", dns.TypeA, 0) // REFUSED: no upstream
	want := map[string]float64{
		`dnsconfigurer_dnsserver_requests_total{family="1",proto="udp",type="A",zone="cluster.local."}`:     3,
		`dnsconfigurer_dnsserver_requests_total{family="1",proto="tcp",type="other",zone="cluster.local."}`: 1,
		`dnsconfigurer_dnsserver_requests_total{family="1",proto="tcp",type="AAAA",zone="cluster.local."}`:  1,
		`dnsconfigurer_dnsserver_requests_total{family="1",proto="udp",type="A",zone="."}`:                  1,
		`dnsconfigurer_dnsserver_responses_total{rcode="SERVFAIL",zone="cluster.local."}`:                   1,
		`dnsconfigurer_dnsserver_responses_total{rcode="NOERROR",zone="cluster.local."}`:                    2,
		`dnsconfigurer_dnsserver_responses_total{rcode="NXDOMAIN",zone="cluster.local."}`:                   2,
		`dnsconfigurer_dnsserver_responses_total{rcode="REFUSED",zone="."}`:                                 1,
		`dnsconfigurer_dnsserver_request_duration_seconds_count{type="A",zone="cluster.local."}`:            3,
		`dnsconfigurer_dnsserver_request_duration_seconds_count{type="other",zone="cluster.local."}`:        1,
		`dnsconfigurer_dnsserver_request_size_bytes_count{proto="tcp",zone="cluster.local."}`:               2,
		`dnsconfigurer_dnsserver_response_size_bytes_count{proto="udp",zone="."}`:                           1,
		`dnsconfigurer_dnsserver_synced`:                   1,
		`dnsconfigurer_dnsserver_records{kind="services"}`: 7,
	}
	got := testkit.Gather(t, reg)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if n := got.Sum("dnsconfigurer_dnsserver_request_duration_seconds_count"); n != 6 {
		t.Errorf("requests timed = %v, want 6", n)
	}
	// The sizes are the messages' own: header, name, type and class, and
	// the OPT (11 bytes) of the AAAA query.
	const tcpBytes = 12 + 17 + 4 + 12 + 28 + 4 + 11
	if got := got[`dnsconfigurer_dnsserver_request_size_bytes_sum{proto="tcp",zone="cluster.local."}`]; got != tcpBytes {
		t.Errorf("request size sum over TCP = %v, want %v", got, tcpBytes)
	}
}
