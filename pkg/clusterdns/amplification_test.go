package clusterdns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics/nsmetricstest"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// ampUpstream answers www.example.com. (A and AAAA), NXDOMAIN for every
// other name.
type ampUpstream struct{}

func (ampUpstream) Exchange(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
	r := new(dns.Msg)
	r.SetReply(m)
	q := m.Question[0]
	if !strings.EqualFold(q.Name, "www.example.com.") {
		r.Rcode = dns.RcodeNameError
		return r, nil
	}
	switch q.Qtype {
	case dns.TypeA:
		rr, _ := dns.NewRR(q.Name + " 60 IN A 192.0.2.1")
		r.Answer = append(r.Answer, rr)
	case dns.TypeAAAA:
		rr, _ := dns.NewRR(q.Name + " 60 IN AAAA 2001:db8::1")
		r.Answer = append(r.Answer, rr)
	}
	return r, nil
}

// srcWriter is a fakeWriter with the client address src.
type srcWriter struct {
	fakeWriter
	src net.Addr
}

func (w *srcWriter) RemoteAddr() net.Addr { return w.src }

func newAmpHandler(tb testing.TB, st Records, topN int) (*Handler, *nsmetrics.Metrics) {
	tb.Helper()
	a, err := nsmetrics.New(topN, "cluster.local", st)
	if err != nil {
		tb.Fatal(err)
	}
	ap, err := WithAutopath(0, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return NewHandler("cluster.local", st, WithForwarder(ampUpstream{}), ap, WithAmplification(a)), a
}

// ampQuery asks name (type qtype) from the client src through ServeDNS and
// returns the reply's rcode.
func ampQuery(tb testing.TB, h *Handler, src, name string, qtype uint16) int {
	tb.Helper()
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	w := &srcWriter{src: &net.UDPAddr{IP: net.ParseIP(src), Port: 40000}}
	h.ServeDNS(w, req)
	if w.msg == nil || w.err != nil {
		tb.Fatalf("%s %s: no reply (%v)", name, dns.TypeToString[qtype], w.err)
	}
	return w.msg.Rcode
}

// ampCounts are a namespace's counters: queries, lookups, misses, hits,
// external lookups.
type ampCounts [nsmetrics.Kinds]uint64

func (c ampCounts) String() string {
	return fmt.Sprintf("{queries %d lookups %d misses %d hits %d external %d}", c[0], c[1], c[2], c[3], c[4])
}

// rawCounts reads the counters of namespace ns ("other": of the namespaces
// the store does not know) as they are, whether or not they have a series.
func rawCounts(a *nsmetrics.Metrics, ns string) ampCounts { return a.Counts(ns) }

// TestAmplificationSteps: each query shape, alone or as the steps of a
// ClusterFirst walk (kubelet's search list "<ns>.svc.cluster.local
// svc.cluster.local cluster.local", then a host search domain
// corp.example, ndots:5), counts as the doc says. Only first steps count:
// an NXDOMAIN first step counts the walk's steps in the zone up to the
// first that exists, predicted from the snapshot.
func TestAmplificationSteps(t *testing.T) {
	const (
		nx = dns.RcodeNameError
		ok = dns.RcodeSuccess
		a  = dns.TypeA
	)
	type q struct {
		name  string
		qtype uint16
		rcode int
	}
	// walk is the steps of a pod of ns looking up base: NXDOMAIN each but
	// the last ones given.
	walk := func(ns, base string, last ...int) []q {
		names := []string{base + "." + ns + ".svc.cluster.local.", base + ".svc.cluster.local.", base + ".cluster.local.",
			base + ".corp.example.", base + "."}
		var out []q
		for i, n := range names {
			rc := nx
			if k := len(names) - len(last); i >= k {
				rc = last[i-k]
			}
			out = append(out, q{n, a, rc})
		}
		return out
	}
	cases := []struct {
		name  string
		steps []q
		want  map[string]ampCounts // unlisted namespaces (ns, b, other) count nothing
	}{
		{"service of the pod's namespace",
			[]q{{"web.ns.svc.cluster.local.", a, ok}},
			map[string]ampCounts{"ns": {1, 1, 0, 1, 0}}},
		{"replies from the cache count",
			[]q{{"web.ns.svc.cluster.local.", a, ok}, {"web.ns.svc.cluster.local.", a, ok}, {"web.ns.svc.cluster.local.", a, ok}},
			map[string]ampCounts{"ns": {3, 3, 0, 3, 0}}},
		{"external name: three steps in the zone, one lookup",
			walk("ns", "www.example.com", ok),
			// www.example.com.svc.cluster.local. is a name of namespace
			// "com", which the store does not know: other.
			map[string]ampCounts{"ns": {3, 1, 3, 0, 1}, "other": {1, 0, 1, 0, 0}}},
		{"external name, A and AAAA",
			append(walk("ns", "www.example.com", ok), q{"www.example.com.ns.svc.cluster.local.", dns.TypeAAAA, nx},
				q{"www.example.com.svc.cluster.local.", dns.TypeAAAA, nx}, q{"www.example.com.cluster.local.", dns.TypeAAAA, nx},
				q{"www.example.com.corp.example.", dns.TypeAAAA, nx}, q{"www.example.com.", dns.TypeAAAA, ok}),
			map[string]ampCounts{"ns": {6, 2, 6, 0, 2}, "other": {2, 0, 2, 0, 0}}},
		{"external name again, from the cache",
			[]q{{"www.example.com.ns.svc.cluster.local.", a, nx}, {"www.example.com.ns.svc.cluster.local.", a, nx}},
			map[string]ampCounts{"ns": {6, 2, 6, 0, 2}}},
		{"short name that exists nowhere",
			walk("ns", "nosuch", nx),
			map[string]ampCounts{"ns": {3, 1, 3, 0, 0}}},
		{"service of another namespace (web.b): found at the second step",
			[]q{{"web.b.ns.svc.cluster.local.", a, nx}, {"web.b.svc.cluster.local.", a, ok}},
			// The second step is also a first step of b for web.
			map[string]ampCounts{"ns": {2, 1, 1, 1, 0}, "b": {1, 1, 0, 1, 0}}},
		{"web.b.svc: found at the third step",
			[]q{{"web.b.svc.ns.svc.cluster.local.", a, nx}, {"web.b.svc.svc.cluster.local.", a, nx}, {"web.b.svc.cluster.local.", a, ok}},
			map[string]ampCounts{"ns": {3, 1, 2, 1, 0}, "other": {1, 0, 1, 0, 0}, "b": {1, 1, 0, 1, 0}}},
		{"cluster name without its trailing dot (4 dots < ndots)",
			walk("ns", "web.b.svc.cluster.local", ok),
			map[string]ampCounts{"ns": {3, 1, 3, 0, 0}, "other": {1, 0, 1, 0, 0}, "b": {1, 1, 0, 1, 0}}},
		{"absolute name in the zone counts for its namespace",
			[]q{{"web.b.svc.cluster.local.", a, ok}},
			map[string]ampCounts{"b": {1, 1, 0, 1, 0}}},
		{"namespace the store does not know",
			[]q{{"x.ghost.svc.cluster.local.", a, nx}},
			map[string]ampCounts{"other": {1, 0, 1, 0, 0}}},
		{"mixed case",
			[]q{{"WWW.Example.COM.NS.svc.Cluster.Local.", a, nx}, {"Web.B.SVC.cluster.local.", a, ok}},
			map[string]ampCounts{"ns": {3, 1, 3, 0, 1}, "b": {1, 1, 0, 1, 0}}},
		{"autopath",
			[]q{{"www.example.com.search.ns.cluster.local.ap.k8s.io.", a, ok}},
			map[string]ampCounts{"ns": {1, 1, 0, 1, 0}}},
		{"autopath NXDOMAIN, then the absolute name",
			[]q{{"nosuch.example.search.ns.cluster.local.ap.k8s.io.", a, nx}, {"nosuch.example.", a, nx}},
			map[string]ampCounts{"ns": {1, 1, 0, 0, 0}}},
		{"autopath of a namespace the store does not know",
			[]q{{"nosuch.search.ghost.cluster.local.ap.k8s.io.", a, nx}},
			map[string]ampCounts{"other": {1, 1, 0, 0, 0}}},
		{"absolute external name: not counted", []q{{"www.example.com.", a, ok}}, nil},
		{"name of another zone: not counted", []q{{"db.corp.example.", a, nx}}, nil},
		{"reverse lookup: not counted", []q{{"1.0.96.10.in-addr.arpa.", dns.TypePTR, ok}}, nil},
		{"zone apex, svc and a namespace's name: not counted",
			[]q{{"cluster.local.", dns.TypeSOA, ok}, {"svc.cluster.local.", a, ok}, {"ns.svc.cluster.local.", a, ok}}, nil},
		{"pod name: not counted", []q{{"10-244-0-9.ns.pod.cluster.local.", a, nx}}, nil},
		{"third step alone: not counted", []q{{"www.example.com.cluster.local.", a, nx}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, amp := newAmpHandler(t, nsmetricstest.Store(t, "ns", "b"), 20)
			for _, s := range tc.steps {
				if rc := ampQuery(t, h, "10.244.0.1", s.name, s.qtype); rc != s.rcode {
					t.Fatalf("%s: rcode %s, want %s", s.name, dns.RcodeToString[rc], dns.RcodeToString[s.rcode])
				}
			}
			for _, ns := range []string{"ns", "b", "other"} {
				if got, want := rawCounts(amp, ns), tc.want[ns]; got != want {
					t.Errorf("%s: %v, want %v", ns, got, want)
				}
			}
		})
	}
	t.Run("malformed queries: not counted", func(t *testing.T) {
		h, amp := newAmpHandler(t, nsmetricstest.Store(t, "ns", "b"), 20)
		two := new(dns.Msg)
		two.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
		two.Question = append(two.Question, two.Question[0])
		none := new(dns.Msg)
		none.Id = 1
		notify := new(dns.Msg)
		notify.SetNotify("web.ns.svc.cluster.local.")
		for _, m := range []*dns.Msg{two, none, notify} {
			w := &srcWriter{src: &net.UDPAddr{IP: net.ParseIP("10.244.0.1"), Port: 1}}
			h.ServeDNS(w, m)
			if w.msg == nil || w.msg.Rcode == dns.RcodeSuccess {
				t.Fatalf("%v: reply %v", m.Question, w.msg)
			}
		}
		for _, ns := range []string{"ns", "other"} {
			if got := rawCounts(amp, ns); got != (ampCounts{}) {
				t.Errorf("%s: %v, want nothing", ns, got)
			}
		}
	})
	t.Run("autopath by source: one query per lookup", func(t *testing.T) {
		st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5, Pods: store.PodsVerified})
		if err != nil {
			t.Fatal(err)
		}
		st.SetPod(store.Pod{Namespace: "ns", Name: "client", IPs: []netip.Addr{netip.MustParseAddr("10.244.0.1")}})
		st.Publish()
		amp, _ := nsmetrics.New(20, "cluster.local", st)
		ap, _ := WithAutopath(0, nil)
		h := NewHandler("cluster.local", st, WithForwarder(ampUpstream{}), ap, WithAutopathBySource(), WithAmplification(amp))
		for range 2 {
			if rc := ampQuery(t, h, "10.244.0.1", "www.example.com.ns.svc.cluster.local.", a); rc != ok {
				t.Fatalf("rcode %s", dns.RcodeToString[rc])
			}
		}
		if got, want := rawCounts(amp, "ns"), (ampCounts{2, 2, 0, 2, 0}); got != want {
			t.Errorf("ns: %v, want %v", got, want)
		}
	})
}

// TestAmplificationUDP: pods' ClusterFirst walks for an external name (A
// and AAAA, as glibc's getaddrinfo; search list "<ns>.svc.cluster.local
// svc.cluster.local cluster.local corp.example"), as real datagrams from
// two client addresses to a Server on 127.0.0.1 that forwards to an
// upstream on 127.0.0.1, are counted in each pod's namespace; the second
// round (answered from the reply cache in the zone) counts in the series
// the first scrape gave the namespaces.
func TestAmplificationUDP(t *testing.T) {
	upSrv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m, _ := ampUpstream{}.Exchange(context.Background(), r)
		_ = w.WriteMsg(m)
	})}
	if err := upSrv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = upSrv.Shutdown(context.Background()) })
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{upSrv.Addrs()[0]}, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Close() })
	st := nsmetricstest.Store(t, "ns", "b")
	amp, err := nsmetrics.New(v1alpha1.DefaultNamespaceMetrics, "cluster.local", st)
	if err != nil {
		t.Fatal(err)
	}
	reg := testkit.Registry(t, amp)
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: NewHandler("cluster.local", st, WithForwarder(fwd), WithAmplification(amp))}
	testkit.StartServer(t, srv)
	clients := map[string]string{"127.0.0.1": "ns"}
	if c, err := net.ListenPacket("udp", "127.0.0.2:0"); err == nil {
		c.Close()
		clients["127.0.0.2"] = "b"
	} else {
		t.Logf("only one client address: %v", err)
	}
	walk := func(src, ns string) {
		t.Helper()
		steps := []string{"www.example.com." + ns + ".svc.cluster.local.", "www.example.com.svc.cluster.local.",
			"www.example.com.cluster.local.", "www.example.com.corp.example.", "www.example.com."}
		for i, name := range steps {
			for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
				m := new(dns.Msg)
				m.SetQuestion(name, qtype)
				c := &dns.Client{Net: "udp", Timeout: 3 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
				r, _, err := c.Exchange(m, srv.Addrs()[0])
				if err != nil {
					t.Fatalf("%s %s from %s: %v", name, dns.TypeToString[qtype], src, err)
				}
				if want := map[bool]int{true: dns.RcodeSuccess, false: dns.RcodeNameError}[i == len(steps)-1]; r.Rcode != want {
					t.Fatalf("%s %s: rcode %s, want %s", name, dns.TypeToString[qtype], dns.RcodeToString[r.Rcode], dns.RcodeToString[want])
				}
			}
		}
	}
	for src, ns := range clients {
		walk(src, ns)
	}
	// The first scrape gives ns and b their series, from 0; the first
	// round stays in other.
	first := nsmetricstest.Series(t, reg)
	n := float64(len(clients))
	// Per walk and type: the 3 steps in the zone, all NXDOMAIN, one lookup
	// of an external name, counted at the first step for the pod's
	// namespace; the second step (www.example.com.svc.cluster.local:
	// namespace "com") is one query in other.
	perWalk := map[string]float64{ampFamilies[0]: 6, ampFamilies[1]: 2, ampFamilies[2]: 6, ampFamilies[3]: 0, ampFamilies[4]: 2}
	otherPerWalk := map[string]float64{ampFamilies[0]: 2, ampFamilies[2]: 2}
	for f, v := range perWalk {
		if got, want := first[f]["other"], n*(v+otherPerWalk[f]); got != want {
			t.Errorf("first scrape: %s{namespace=\"other\"} = %v, want %v", f, got, want)
		}
	}
	for src, ns := range clients {
		walk(src, ns)
	}
	second := nsmetricstest.Series(t, reg)
	for f, v := range perWalk {
		for _, ns := range clients {
			if got := second[f][ns]; got != v {
				t.Errorf("%s{namespace=%q} = %v, want %v", f, ns, got, v)
			}
		}
		if got, want := second[f]["other"], n*(v+2*otherPerWalk[f]); got != want {
			t.Errorf("%s{namespace=\"other\"} = %v, want %v", f, got, want)
		}
		if len(second[f]) != len(clients)+1 {
			t.Errorf("%s: series %v", f, second[f])
		}
	}
}

var ampFamilies = []string{"dnsconfigurer_dnsserver_namespace_queries_total", "dnsconfigurer_dnsserver_namespace_lookups_total",
	"dnsconfigurer_dnsserver_namespace_misses_total", "dnsconfigurer_dnsserver_namespace_hits_total",
	"dnsconfigurer_dnsserver_namespace_external_lookups_total"}

// BenchmarkServeDNSAmplification is BenchmarkServeDNS's A and NXDOMAIN
// with the namespace metrics on (replies from the cache).
func BenchmarkServeDNSAmplification(b *testing.B) {
	run := func(b *testing.B, name string) {
		h, _ := newAmpHandler(b, fuzzStore(b), v1alpha1.DefaultNamespaceMetrics)
		h.Warm()
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		w := &benchWriter{}
		b.ReportAllocs()
		for b.Loop() {
			h.ServeDNS(w, req)
		}
	}
	b.Run("A", func(b *testing.B) { run(b, "web.ns.svc.cluster.local.") })
	b.Run("NXDOMAIN", func(b *testing.B) { run(b, "web.ns.svc.cluster.local.ns.svc.cluster.local.") })
}
