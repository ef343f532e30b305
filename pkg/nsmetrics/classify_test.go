package nsmetrics

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics/nsmetricstest"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// counts are a namespace's counters: queries, lookups, misses, hits,
// external lookups.
type counts = [Kinds]uint64

// TestClassify: what a query adds, from its name, its rcode
// and the snapshot (nil before the first sync).
func TestClassify(t *testing.T) {
	st := nsmetricstest.Store(t, "ns", "b")
	cases := []struct {
		name  string
		rcode int
		snap  *store.Snapshot
		ns    string // "" for none
		want  counts
	}{
		{"web.ns.svc.cluster.local.", dns.RcodeSuccess, st.Snapshot(), "ns", counts{1, 1, 0, 1, 0}},
		{"web.ns.svc.cluster.local.", dns.RcodeServerFailure, st.Snapshot(), "ns", counts{1, 1, 0, 0, 0}},
		{"www.example.com.ns.svc.cluster.local.", dns.RcodeNameError, st.Snapshot(), "ns", counts{3, 1, 3, 0, 1}},
		{"web.b.ns.svc.cluster.local.", dns.RcodeNameError, st.Snapshot(), "ns", counts{2, 1, 1, 1, 0}},
		{"web.b.svc.ns.svc.cluster.local.", dns.RcodeNameError, st.Snapshot(), "ns", counts{3, 1, 2, 1, 0}},
		{"web.ghost.ns.svc.cluster.local.", dns.RcodeNameError, st.Snapshot(), "ns", counts{3, 1, 3, 0, 1}},
		{"x.ghost.svc.cluster.local.", dns.RcodeNameError, st.Snapshot(), "other", counts{1, 0, 1, 0, 0}},
		{"x.search.ns.cluster.local.ap.k8s.io.", dns.RcodeNameError, st.Snapshot(), "ns", counts{1, 1, 0, 0, 0}},
		{"x.search.ns.cluster.local.ap.k8s.io.", dns.RcodeSuccess, st.Snapshot(), "ns", counts{1, 1, 0, 1, 0}},
		{"web.ns.svc.cluster.local.", dns.RcodeServerFailure, nil, "other", counts{1, 0, 0, 0, 0}},
		{"search.ns.cluster.local.ap.k8s.io.", dns.RcodeNameError, st.Snapshot(), "", counts{}},
		{"x.search.ns.other.zone.ap.k8s.io.", dns.RcodeNameError, st.Snapshot(), "", counts{}},
		{".ns.svc.cluster.local.", dns.RcodeNameError, st.Snapshot(), "", counts{}},
		{"x..svc.cluster.local.", dns.RcodeNameError, st.Snapshot(), "", counts{}},
		{"ns.svc.cluster.local.", dns.RcodeSuccess, st.Snapshot(), "", counts{}},
		{"www.example.com.svc.cluster.local.evil.", dns.RcodeNameError, st.Snapshot(), "", counts{}},
		{"4.3.2.1.in-addr.arpa.", dns.RcodeSuccess, st.Snapshot(), "", counts{}},
		{"www.example.com.", dns.RcodeSuccess, st.Snapshot(), "", counts{}},
		{".", dns.RcodeSuccess, st.Snapshot(), "", counts{}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %s", tc.name, dns.RcodeToString[tc.rcode]), func(t *testing.T) {
			a, _ := New(20, "cluster.local.", st)
			req := new(dns.Msg)
			req.SetQuestion(tc.name, dns.TypeA)
			ac := a.Classify(req, tc.snap, tc.rcode, false, nil)
			ns := ""
			if ac.c != nil {
				ns = ac.c.name
			}
			got := counts{}
			for i, v := range ac.d {
				got[i] = uint64(v)
			}
			if ns != tc.ns || got != tc.want {
				t.Errorf("%q %v, want %q %v", ns, got, tc.ns, tc.want)
			}
		})
	}
}

// TestRecord: Record adds what Classify works out, and returns a tally
// that Observe adds again: after a query and a cache hit, a namespace's
// counters are those of two queries.
func TestRecord(t *testing.T) {
	st := nsmetricstest.Store(t, "ns", "b")
	cases := []struct {
		name  string
		rcode int
		ns    string
		want  counts // the namespace's counters after two queries
	}{
		{"web.ns.svc.cluster.local.", dns.RcodeSuccess, "ns", counts{2, 2, 0, 2, 0}},
		{"web.b.ns.svc.cluster.local.", dns.RcodeNameError, "ns", counts{4, 2, 2, 2, 0}},
		{"x.ghost.svc.cluster.local.", dns.RcodeNameError, "other", counts{2, 0, 2, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := New(20, "cluster.local.", st)
			req := new(dns.Msg)
			req.SetQuestion(tc.name, dns.TypeA)
			want := a.Classify(req, st.Snapshot(), tc.rcode, false, nil)
			tl := a.Record(tc.name, st.Snapshot(), tc.rcode, false, nil)
			if tl == 0 {
				t.Fatalf("Record = 0, want Classify's %+v", want)
			}
			a.Observe(tl) // a cache hit
			if got := a.Counts(tc.ns); got != tc.want {
				t.Errorf("counters of %s = %v, want %v", tc.ns, got, tc.want)
			}
		})
	}
}

// TestExternal: a remainder is a cluster name when it is a
// short name or ends like one.
func TestExternal(t *testing.T) {
	st := nsmetricstest.Store(t, "ns", "b")
	a, _ := New(20, "cluster.local", st)
	cases := []struct {
		p    string
		want bool
	}{
		{"web", false},
		{"metadata", false}, // a short name is taken for a Service
		{"web.ns", false},
		{"Web.NS", false},
		{"web.ns.svc", false},
		{"10-0-0-1.ns.pod", false},
		{"web.ns.svc.cluster", false},
		{"web.ns.svc.cluster.local", false},
		{"web.ghost", true}, // no such namespace
		{"www.example.com", true},
		{"WWW.Example.COM", true},
		{"printer.local", true},
		{"api.github.com", true},
	}
	for _, tc := range cases {
		t.Run(tc.p, func(t *testing.T) {
			if got := a.external(tc.p, st.Snapshot(), nil); got != tc.want {
				t.Errorf("external(%q) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}
