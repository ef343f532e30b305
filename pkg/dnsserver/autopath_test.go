package dnsserver_test

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/store"
)

const ap = ".search.prod.cluster.local.ap.k8s.io."

func askOpt(t *testing.T, network, addr, name string, qtype uint16, option string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(1232, false)
	if option != "" {
		m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: 65001, Data: []byte(option)}}
	}
	c := &dns.Client{Net: network, Timeout: 3 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s: %v", network, name, err)
	}
	return r
}

func TestAutopath(t *testing.T) {
	up, count := upstream(t)
	fwd, err := dnsserver.NewForwarder(dnsserver.StaticUpstreams{up}, nil, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	withAP, err := dnsserver.WithAutopath(0, reg)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, store.Options{TTL: 5}, fixture, dnsserver.WithForwarder(fwd), withAP)

	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		option string
		rcode  int
		answer []string
	}{
		{"same-namespace short name, A", "web" + ap, dns.TypeA, "", dns.RcodeSuccess,
			[]string{"web" + ap + " 5 IN CNAME web.prod.svc.cluster.local.", "web.prod.svc.cluster.local. 5 IN A 10.96.0.10"}},
		{"same-namespace short name, AAAA (dual-stack Service)", "web" + ap, dns.TypeAAAA, "", dns.RcodeSuccess,
			[]string{"web" + ap + " 5 IN CNAME web.prod.svc.cluster.local.", "web.prod.svc.cluster.local. 5 IN AAAA fd00::10"}},
		{"AAAA of an IPv4-only Service: NODATA behind the CNAME", "empty" + ap, dns.TypeAAAA, "", dns.RcodeSuccess,
			[]string{"empty" + ap + " 5 IN CNAME empty.prod.svc.cluster.local."}},
		{"mixed case is echoed", "WEB" + strings.ToUpper(ap), dns.TypeA, "", dns.RcodeSuccess,
			[]string{"WEB" + strings.ToUpper(ap) + " 5 IN CNAME WEB.prod.svc.cluster.local.", "WEB.prod.svc.cluster.local. 5 IN A 10.96.0.10"}},
		{"svc.other-ns", "kubernetes.default" + ap, dns.TypeA, "", dns.RcodeSuccess,
			[]string{"kubernetes.default" + ap + " 5 IN CNAME kubernetes.default.svc.cluster.local.", "kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
		{"SRV", "_http._tcp.web" + ap, dns.TypeSRV, "", dns.RcodeSuccess,
			[]string{"_http._tcp.web" + ap + " 5 IN CNAME _http._tcp.web.prod.svc.cluster.local.", "_http._tcp.web.prod.svc.cluster.local. 5 IN SRV 0 100 80 web.prod.svc.cluster.local."}},
		{"TXT found at the zone apex search", "dns-version" + ap, dns.TypeTXT, "", dns.RcodeSuccess,
			[]string{"dns-version" + ap + " 5 IN CNAME dns-version.cluster.local.", "dns-version.cluster.local. 28800 IN TXT \"1.1.0\""}},
		{"PTR: the name itself", "10.0.96.10.in-addr.arpa" + ap, dns.TypePTR, "", dns.RcodeSuccess,
			[]string{"10.0.96.10.in-addr.arpa" + ap + " 5 IN CNAME 10.0.96.10.in-addr.arpa.", "10.0.96.10.in-addr.arpa. 5 IN PTR web.prod.svc.cluster.local."}},
		{"external name reaches the upstream", "www.example.org" + ap, dns.TypeA, "", dns.RcodeSuccess,
			[]string{"www.example.org" + ap + " 5 IN CNAME www.example.org.", "www.example.org. 60 IN A 192.0.2.1"}},
		{"nothing anywhere: NXDOMAIN", "nx.example.org" + ap, dns.TypeA, "", dns.RcodeNameError, nil},
		{"a base that is itself 'search' is parsed from the right", "search" + ap, dns.TypeA, "", dns.RcodeSuccess,
			[]string{"search" + ap + " 5 IN CNAME search.", "search. 60 IN A 192.0.2.1"}},
		{"search list from the option: host search domain", "host" + ap, dns.TypeA, "prod.svc.cluster.local,corp.example", dns.RcodeSuccess,
			[]string{"host" + ap + " 5 IN CNAME host.corp.example.", "host.corp.example. 60 IN A 192.0.2.1"}},
		{"the option's list replaces the derived one", "kubernetes.default" + ap, dns.TypeA, "prod.svc.cluster.local", dns.RcodeSuccess,
			[]string{"kubernetes.default" + ap + " 5 IN CNAME kubernetes.default.", "kubernetes.default. 60 IN A 192.0.2.1"}},
		{"invalid option content: FORMERR", "web" + ap, dns.TypeA, "prod.svc.cluster.local,bad domain", dns.RcodeFormatError, nil},
		{"33 entries: FORMERR", "web" + ap, dns.TypeA, strings.TrimSuffix(strings.Repeat("a.example,", 33), ","), dns.RcodeFormatError, nil},
		{"never expanded twice", "x.search.prod.cluster.local.ap.k8s.io" + ap, dns.TypeA, "", dns.RcodeNameError, nil},
		{"another cluster's zone is not ours and not forwarded", "web.search.prod.other.zone.ap.k8s.io.", dns.TypeA, "", dns.RcodeNameError, nil},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				r := askOpt(t, network, e.addr, tc.qname, tc.qtype, tc.option)
				if r.Rcode != tc.rcode {
					t.Fatalf("rcode %s, want %s: %v", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode], r)
				}
				if tc.answer != nil {
					want := slices.Clone(tc.answer)
					slices.Sort(want)
					if got := rrStrings(r.Answer); !slices.Equal(got, want) {
						t.Fatalf("answer\n got %q\nwant %q", got, want)
					}
				}
				if r.Rcode == dns.RcodeNameError && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA) {
					t.Errorf("NXDOMAIN without an SOA: %v", r.Ns)
				}
			})
		}
	}
	before := count.get()
	askOpt(t, "udp", e.addr, "x.search.prod.cluster.local.ap.k8s.io"+ap, dns.TypeA, "")
	askOpt(t, "udp", e.addr, "web.search.prod.other.zone.ap.k8s.io.", dns.TypeA, "")
	askOpt(t, "udp", e.addr, "web"+ap, dns.TypeA, "")
	if after := count.get(); after != before {
		t.Errorf("names under ap.k8s.io answered in the zone reached the upstream (%d → %d)", before, after)
	}
	m := gather(t, reg)
	if m[`dnsconfigurer_dnsserver_autopath_hits_total{position="0"}`] < 2 || m[`dnsconfigurer_dnsserver_autopath_hits_total{position="3"}`] < 2 ||
		m["dnsconfigurer_dnsserver_autopath_misses_total"] != 2 || m["dnsconfigurer_dnsserver_autopath_bad_options_total"] != 4 {
		t.Errorf("metrics %v", m)
	}
}

func TestAutopathOff(t *testing.T) {
	up, count := upstream(t)
	fwd, _ := dnsserver.NewForwarder(dnsserver.StaticUpstreams{up}, nil, time.Second, nil)
	e := start(t, store.Options{TTL: 5}, fixture, dnsserver.WithForwarder(fwd))
	r := askOpt(t, "udp", e.addr, "web"+ap, dns.TypeA, "")
	// Without autopath the name is just another external name.
	if count.get() != 1 || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeA {
		t.Fatalf("autopath off: %v (upstream queries %d)", r, count.get())
	}
}

func askFrom(t *testing.T, network, src, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	d := &net.Dialer{Timeout: 3 * time.Second}
	if network == "udp" {
		d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(src)}
	} else {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c := &dns.Client{Net: network, Dialer: d, Timeout: 3 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s from %s %s: %v", network, src, name, err)
	}
	return r
}

func TestAutopathBySource(t *testing.T) {
	up, _ := upstream(t)
	fwd, _ := dnsserver.NewForwarder(dnsserver.StaticUpstreams{up}, nil, time.Second, nil)
	withAP, _ := dnsserver.WithAutopath(0, nil)
	e := start(t, store.Options{TTL: 5, Pods: store.PodsVerified}, fixture, dnsserver.WithForwarder(fwd), withAP, dnsserver.WithAutopathBySource())
	e.st.SetPod(store.Pod{Namespace: "prod", Name: "client", IPs: []netip.Addr{mustAddr("127.0.0.7")}})
	e.st.SetPod(store.Pod{Namespace: "prod", Name: "old", IPs: []netip.Addr{mustAddr("127.0.0.9")}})
	e.st.SetPod(store.Pod{Namespace: "default", Name: "new", IPs: []netip.Addr{mustAddr("127.0.0.9")}})
	e.st.Publish()
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			r := askFrom(t, network, "127.0.0.7", e.addr, "kubernetes.default.prod.svc.cluster.local.", dns.TypeA)
			want := []string{"kubernetes.default.prod.svc.cluster.local. 5 IN CNAME kubernetes.default.svc.cluster.local.", "kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}
			if got := rrStrings(r.Answer); r.Rcode != dns.RcodeSuccess || !slices.Equal(got, want) {
				t.Fatalf("svc.other-ns from a pod: %v %q", dns.RcodeToString[r.Rcode], got)
			}
			r = askFrom(t, network, "127.0.0.7", e.addr, "web.prod.svc.cluster.local.", dns.TypeA)
			if got := rrStrings(r.Answer); !slices.Equal(got, []string{"web.prod.svc.cluster.local. 5 IN A 10.96.0.10"}) {
				t.Fatalf("first search domain answers itself, no CNAME: %q", got)
			}
			r = askFrom(t, network, "127.0.0.7", e.addr, "www.example.org.prod.svc.cluster.local.", dns.TypeA)
			want = []string{"www.example.org. 60 IN A 192.0.2.1", "www.example.org.prod.svc.cluster.local. 5 IN CNAME www.example.org."}
			if got := rrStrings(r.Answer); !slices.Equal(got, want) {
				t.Fatalf("external name from a pod: %q", got)
			}
			// An unknown source, and an IP two namespaces claim, get the plain answer.
			for _, src := range []string{"127.0.0.8", "127.0.0.9"} {
				if r := askFrom(t, network, src, e.addr, "kubernetes.default.prod.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeNameError {
					t.Fatalf("from %s: %v", src, r)
				}
			}
		})
	}
}

// TestAutopathBySourceRejects checks that a query from a pod that the
// message rules reject (dnsmsg.Check) gets their rcode, not an expansion.
func TestAutopathBySourceRejects(t *testing.T) {
	withAP, _ := dnsserver.WithAutopath(0, nil)
	e := start(t, store.Options{TTL: 5, Pods: store.PodsVerified}, fixture, withAP, dnsserver.WithAutopathBySource())
	e.st.SetPod(store.Pod{Namespace: "prod", Name: "client", IPs: []netip.Addr{mustAddr("127.0.0.7")}})
	e.st.Publish()
	m := new(dns.Msg)
	m.SetQuestion("kubernetes.default.prod.svc.cluster.local.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second,
		Dialer: &net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.0.0.7")}}}
	r, _, err := c.Exchange(m, e.addr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeBadVers || len(r.Answer) != 0 {
		t.Fatalf("EDNS version 1 from a pod: %s %v, want BADVERS", dns.RcodeToString[r.Rcode], r.Answer)
	}
}
