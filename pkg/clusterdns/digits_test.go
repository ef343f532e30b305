package clusterdns_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// digits holds Services named with a digit first (a DNS-1123 label, the
// Service name rule since Kubernetes 1.36, KEP-5311) and names that look
// like a pod's dashed IP: testdata/digits/objects.yaml.
const digits = "testdata/digits"

// TestDigitFirstNames: every record shape answers for a digit-first
// Service, its endpoints and an ExternalName to it; a Service or a
// namespace named like a dashed IP is a Service, the pod of that IP stays
// a pod. Each question is asked twice (the second from the reply cache),
// over UDP and TCP.
func TestDigitFirstNames(t *testing.T) {
	const svc = "1kubernetes.prod.svc.cluster.local."
	const db = "2db.prod.svc.cluster.local."
	cases := []tcase{
		{name: "clusterip A", qname: svc, qtype: dns.TypeA, answer: []string{svc + " 5 IN A 10.96.1.1"}},
		{name: "clusterip AAAA", qname: svc, qtype: dns.TypeAAAA, answer: []string{svc + " 5 IN AAAA fd00::1:1"}},
		answers("case echoed", "1KUBERNETES.Prod.svc.cluster.local.", dns.TypeA, "1KUBERNETES.Prod.svc.cluster.local. 5 IN A 10.96.1.1"),
		{name: "SRV named port", qname: "_https._tcp." + svc, qtype: dns.TypeSRV,
			answer: []string{"_https._tcp." + svc + " 5 IN SRV 0 100 443 " + svc},
			extra:  []string{svc + " 5 IN A 10.96.1.1", svc + " 5 IN AAAA fd00::1:1"}},
		{name: "SRV udp port", qname: "_dns._udp." + svc, qtype: dns.TypeSRV,
			answer: []string{"_dns._udp." + svc + " 5 IN SRV 0 100 53 " + svc}},
		{name: "SRV of the Service name", qname: svc, qtype: dns.TypeSRV,
			answer: []string{svc + " 5 IN SRV 0 50 443 " + svc, svc + " 5 IN SRV 0 50 53 " + svc}}, // weight 100/N
		answers("PTR clusterip", "1.1.96.10.in-addr.arpa.", dns.TypePTR, "1.1.96.10.in-addr.arpa. 5 IN PTR "+svc),
		answers("PTR clusterip v6", "1.0.0.0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, "1.0.0.0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. 5 IN PTR "+svc),
		{name: "headless A", qname: db, qtype: dns.TypeA, answer: []string{db + " 5 IN A 10.1.3.1", db + " 5 IN A 10.1.3.2"}},
		{name: "headless AAAA", qname: db, qtype: dns.TypeAAAA, answer: []string{db + " 5 IN AAAA fd00::3:3"}},
		{name: "endpoint hostname with a digit first", qname: "0-db." + db, qtype: dns.TypeA, answer: []string{"0-db." + db + " 5 IN A 10.1.3.1"}},
		{name: "endpoint dashed IP", qname: "10-1-3-2." + db, qtype: dns.TypeA, answer: []string{"10-1-3-2." + db + " 5 IN A 10.1.3.2"}},
		{name: "endpoint dashed IPv6", qname: "fd00--3-3." + db, qtype: dns.TypeAAAA, answer: []string{"fd00--3-3." + db + " 5 IN AAAA fd00::3:3"}},
		{name: "headless SRV", qname: "_pg._tcp." + db, qtype: dns.TypeSRV,
			answer: []string{
				"_pg._tcp." + db + " 5 IN SRV 0 33 5432 0-db." + db,
				"_pg._tcp." + db + " 5 IN SRV 0 33 5432 10-1-3-2." + db,
				"_pg._tcp." + db + " 5 IN SRV 0 33 5432 fd00--3-3." + db,
			},
			extra: []string{"0-db." + db + " 5 IN A 10.1.3.1", "10-1-3-2." + db + " 5 IN A 10.1.3.2", "fd00--3-3." + db + " 5 IN AAAA fd00::3:3"}},
		{name: "PTR endpoint hostname", qname: "1.3.1.10.in-addr.arpa.", qtype: dns.TypePTR, answer: []string{"1.3.1.10.in-addr.arpa. 5 IN PTR 0-db." + db}},
		{name: "PTR endpoint dashed IP", qname: "2.3.1.10.in-addr.arpa.", qtype: dns.TypePTR, answer: []string{"2.3.1.10.in-addr.arpa. 5 IN PTR 10-1-3-2." + db}},
		answers("ExternalName to a digit-first Service, followed", "3ext.prod.svc.cluster.local.", dns.TypeA, "3ext.prod.svc.cluster.local. 5 IN CNAME "+svc, svc+" 5 IN A 10.96.1.1"),
		answers("ExternalName to a digit-first host", "4ext.prod.svc.cluster.local.", dns.TypeCNAME, "4ext.prod.svc.cluster.local. 5 IN CNAME 1.example.com."),
		answers("Service named like a pod's dashed IP", "10-1-0-5.prod.svc.cluster.local.", dns.TypeA, "10-1-0-5.prod.svc.cluster.local. 5 IN A 10.96.1.5"),
		answers("the pod of that IP", "10-1-0-5.prod.pod.cluster.local.", dns.TypeA, "10-1-0-5.prod.pod.cluster.local. 5 IN A 10.1.0.5"),
		answers("namespace named like a dashed IP", "10-1-0-5.10-1-0-1.svc.cluster.local.", dns.TypeA, "10-1-0-5.10-1-0-1.svc.cluster.local. 5 IN A 10.96.1.6"),
		nxdomain("no pod of that IP in that namespace", "10-1-0-5.10-1-0-1.pod.cluster.local.", dns.TypeA),
		{name: "its empty non-terminal", qname: "10-1-0-1.svc.cluster.local.", qtype: dns.TypeA, soa: true},
		answers("headless Service named like a dashed IP", "10-1-3-2.prod.svc.cluster.local.", dns.TypeA, "10-1-3-2.prod.svc.cluster.local. 5 IN A 10.1.3.9"),
		answers("its endpoint by dashed IP", "10-1-3-9.10-1-3-2.prod.svc.cluster.local.", dns.TypeA, "10-1-3-9.10-1-3-2.prod.svc.cluster.local. 5 IN A 10.1.3.9"),
		{name: "NXDOMAIN digit-first", qname: "1nosuch.prod.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: true},
	}
	e := start(t, store.Options{TTL: 5, Pods: store.PodsVerified}, digits)
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				check(t, e, network, 5, tc)
				check(t, e, network, 5, tc) // from the reply cache
			})
		}
	}
}

// TestDigitFirstNamesPodModes: with pods insecure a name under .pod is a
// dashed IP in a known namespace, one named like a dashed IP included;
// names under .svc stay Services.
func TestDigitFirstNamesPodModes(t *testing.T) {
	e := start(t, store.Options{TTL: 5, Pods: store.PodsInsecure}, digits)
	for _, tc := range []tcase{
		answers("insecure pod in a namespace named like a dashed IP", "10-9-9-9.10-1-0-1.pod.cluster.local.", dns.TypeA, "10-9-9-9.10-1-0-1.pod.cluster.local. 5 IN A 10.9.9.9"),
		answers("a Service named like a dashed IP", "10-1-0-5.10-1-0-1.svc.cluster.local.", dns.TypeA, "10-1-0-5.10-1-0-1.svc.cluster.local. 5 IN A 10.96.1.6"),
		answers("digit-first Service", "1kubernetes.prod.svc.cluster.local.", dns.TypeA, "1kubernetes.prod.svc.cluster.local. 5 IN A 10.96.1.1"),
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, e, "udp", 5, tc) })
	}
}

// TestDigitFirstNamesAutopath: autopath names and autopath by source walk
// to digit-first Services and to names that look like dashed IPs.
func TestDigitFirstNamesAutopath(t *testing.T) {
	withAP, err := clusterdns.WithAutopath(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, store.Options{TTL: 5, Pods: store.PodsVerified}, digits, withAP, clusterdns.WithAutopathBySource())
	e.st.SetPod(store.Pod{Namespace: "10-1-0-1", Name: "client", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.7")}})
	e.st.Publish()
	const svc = "1kubernetes.prod.svc.cluster.local."
	cases := []struct {
		name, src, qname string
		answer           []string
	}{
		{"short name", "", "1kubernetes" + ap,
			[]string{"1kubernetes" + ap + " 5 IN CNAME " + svc, svc + " 5 IN A 10.96.1.1"}},
		{"name.namespace named like a dashed IP", "", "10-1-0-5.10-1-0-1" + ap,
			[]string{"10-1-0-5.10-1-0-1" + ap + " 5 IN CNAME 10-1-0-5.10-1-0-1.svc.cluster.local.", "10-1-0-5.10-1-0-1.svc.cluster.local. 5 IN A 10.96.1.6"}},
		{"SRV", "", "_https._tcp.1kubernetes" + ap,
			[]string{"_https._tcp.1kubernetes" + ap + " 5 IN CNAME _https._tcp." + svc, "_https._tcp." + svc + " 5 IN SRV 0 100 443 " + svc}},
		{"by source: the first step exists", "127.0.0.7", "10-1-0-5.10-1-0-1.svc.cluster.local.",
			[]string{"10-1-0-5.10-1-0-1.svc.cluster.local. 5 IN A 10.96.1.6"}},
		{"by source: svc.other-ns", "127.0.0.7", "1kubernetes.prod.10-1-0-1.svc.cluster.local.",
			[]string{"1kubernetes.prod.10-1-0-1.svc.cluster.local. 5 IN CNAME " + svc, svc + " 5 IN A 10.96.1.1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r *dns.Msg
			if tc.src == "" {
				r = askOpt(t, "udp", e.addr, tc.qname, dns.TypeA, "")
				if tc.qname[0] == '_' {
					r = askOpt(t, "udp", e.addr, tc.qname, dns.TypeSRV, "")
				}
			} else {
				r = testkit.AskFrom(t, "udp", tc.src, e.addr, new(dns.Msg).SetQuestion(tc.qname, dns.TypeA))
			}
			if got := rrStrings(r.Answer); r.Rcode != dns.RcodeSuccess || !slices.Equal(got, sorted(tc.answer)) {
				t.Fatalf("%s: %s %q, want %q", tc.qname, dns.RcodeToString[r.Rcode], got, tc.answer)
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
