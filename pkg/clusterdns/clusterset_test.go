package clusterdns_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// clustersetRecords is a clusterset zone's store as the clusterset feed
// fills it: a ClusterSetIP import web and a headless import db with an
// endpoint in each of two clusters.
func clustersetRecords(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.New(store.Options{Zone: "clusterset.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	http := []store.Port{{Name: "http", Protocol: "tcp", Port: 80}}
	st.SetNamespace(store.Namespace{Name: "prod"})
	st.SetService(store.Service{Namespace: "prod", Name: "web", Type: store.ClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.200.0.1")}, Ports: http})
	st.SetService(store.Service{Namespace: "prod", Name: "db", Type: store.Headless, Ports: http})
	st.SetEndpointSlice(store.EndpointSlice{Namespace: "prod", Name: "db-east", Service: "db", Ports: http,
		Endpoints: []store.Endpoint{{Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.1")}, Hostname: "db-0.east", Ready: true}}})
	st.SetEndpointSlice(store.EndpointSlice{Namespace: "prod", Name: "db-west", Service: "db", Ports: http,
		Endpoints: []store.Endpoint{{Addresses: []netip.Addr{netip.MustParseAddr("10.2.0.1")}, Hostname: "db-0.west", Ready: true}}})
	return st
}

// TestClusterset: the clusterset zone is answered from its own store,
// with the cluster zone's rules, before the cluster zone and the
// forwarder; SERVFAIL before its first sync; a change is answered at once
// (its replies are not kept); the cluster zone is untouched.
func TestClusterset(t *testing.T) {
	st := clustersetRecords(t)
	e, up := withForwarder(t, fixture, clusterdns.WithClusterset(st, nil))
	for _, network := range []string{"udp", "tcp"} {
		if r := ask(t, network, e.addr, "web.prod.svc.clusterset.local.", dns.TypeA, 0); r.Rcode != dns.RcodeServerFailure {
			t.Fatalf("%s before the first sync: %s, want SERVFAIL", network, dns.RcodeToString[r.Rcode])
		}
	}
	st.Publish()
	cases := []struct {
		qname   string
		qtype   uint16
		rcode   int
		answers []string // each answer's rdata, sorted
	}{
		{"web.prod.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.200.0.1"}},
		{"WEB.prod.svc.Clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.200.0.1"}},
		{"_http._tcp.web.prod.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess, []string{"0 100 80 web.prod.svc.clusterset.local."}},
		{"db.prod.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.1.0.1", "10.2.0.1"}},
		{"db-0.east.db.prod.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.1.0.1"}},
		{"db-0.west.db.prod.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.2.0.1"}},
		{"_http._tcp.db.prod.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"0 50 80 db-0.east.db.prod.svc.clusterset.local.", "0 50 80 db-0.west.db.prod.svc.clusterset.local."}},
		{"nope.prod.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil},
		// Reserved (<clusterid>.<svc>) and never an endpoint (<hostname>.<svc>):
		// NXDOMAIN, though the store has the first above db-0.east.
		{"east.db.prod.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"db-0.db.prod.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"_tcp.db.prod.svc.clusterset.local.", dns.TypeSRV, dns.RcodeNameError, nil},
		{"prod.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil},
		// A namespace of the cluster without imports; one it lacks.
		{"quiet.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil},
		{"nons.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.10"}}, // the cluster's own web
		{"clusterset.local.", dns.TypeSOA, dns.RcodeSuccess, []string{"ns.dns.clusterset.local. hostmaster.clusterset.local."}},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.qname+"/"+dns.TypeToString[tc.qtype], func(t *testing.T) {
				before := up.Count()
				r := ask(t, network, e.addr, tc.qname, tc.qtype, 0)
				if r.Rcode != tc.rcode || !r.Authoritative {
					t.Fatalf("rcode %s AA %v, want %s AA", dns.RcodeToString[r.Rcode], r.Authoritative, dns.RcodeToString[tc.rcode])
				}
				if got := rdata(r.Answer); !slices.Equal(got, tc.answers) && !(tc.qtype == dns.TypeSOA && len(got) == 1 && strings.HasPrefix(got[0], tc.answers[0])) {
					t.Errorf("answers %v, want %v", got, tc.answers)
				}
				if up.Count() != before {
					t.Error("forwarded")
				}
			})
		}
	}
	// A change is answered at once: no reply of the zone is kept.
	for range 2 {
		ask(t, "udp", e.addr, "web.prod.svc.clusterset.local.", dns.TypeA, 0)
	}
	st.DeleteService("prod", "web")
	st.Publish()
	if r := ask(t, "udp", e.addr, "web.prod.svc.clusterset.local.", dns.TypeA, 0); r.Rcode != dns.RcodeNameError {
		t.Errorf("after the import went: %s %v, want NXDOMAIN", dns.RcodeToString[r.Rcode], r.Answer)
	}
}

// rdata is each record's data, sorted.
func rdata(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		h := rr.Header().String()
		out = append(out, strings.TrimSpace(strings.TrimPrefix(rr.String(), h)))
	}
	slices.Sort(out)
	return out
}
