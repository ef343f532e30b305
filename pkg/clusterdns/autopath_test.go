package clusterdns_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

const ap = ".search.prod.cluster.local.ap.k8s.io."

// askOpt asks with EDNS0 and, unless option is empty, the autopath option.
func askOpt(t *testing.T, network, addr, name string, qtype uint16, option string) *dns.Msg {
	t.Helper()
	return testkit.Ask(t, network, addr, apQuery(name, qtype, option))
}

// apQuery is a query with EDNS0 and, unless option is empty, the autopath
// option holding it.
func apQuery(name string, qtype uint16, option string) *dns.Msg {
	if option == "" {
		return testkit.NewQuery(name, qtype, 1232)
	}
	return testkit.NewQuery(name, qtype, 1232, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte(option)})
}

func TestAutopath(t *testing.T) {
	up := upstream(t)
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	withAP, err := clusterdns.WithAutopath(0, reg)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, store.Options{TTL: 5}, fixture, clusterdns.WithForwarder(fwd), withAP)

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
	before := up.Count()
	askOpt(t, "udp", e.addr, "x.search.prod.cluster.local.ap.k8s.io"+ap, dns.TypeA, "")
	askOpt(t, "udp", e.addr, "web.search.prod.other.zone.ap.k8s.io.", dns.TypeA, "")
	askOpt(t, "udp", e.addr, "web"+ap, dns.TypeA, "")
	if after := up.Count(); after != before {
		t.Errorf("names under ap.k8s.io answered in the zone reached the upstream (%d → %d)", before, after)
	}
	m := testkit.Gather(t, reg)
	if m[`dnsconfigurer_dnsserver_autopath_hits_total{position="0"}`] < 2 || m[`dnsconfigurer_dnsserver_autopath_hits_total{position="3"}`] < 2 ||
		m["dnsconfigurer_dnsserver_autopath_misses_total"] != 2 || m["dnsconfigurer_dnsserver_autopath_bad_options_total"] != 4 {
		t.Errorf("metrics %v", m)
	}
}

func TestAutopathOff(t *testing.T) {
	up := upstream(t)
	fwd, _ := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	e := start(t, store.Options{TTL: 5}, fixture, clusterdns.WithForwarder(fwd))
	r := askOpt(t, "udp", e.addr, "web"+ap, dns.TypeA, "")
	// Without autopath the name is just another external name.
	if up.Count() != 1 || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeA {
		t.Fatalf("autopath off: %v (upstream queries %d)", r, up.Count())
	}
}

func askFrom(t *testing.T, network, src, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	return testkit.AskFrom(t, network, src, addr, new(dns.Msg).SetQuestion(name, qtype))
}

func TestAutopathBySource(t *testing.T) {
	up := upstream(t)
	fwd, _ := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	withAP, _ := clusterdns.WithAutopath(0, nil)
	e := start(t, store.Options{TTL: 5, Pods: store.PodsVerified}, fixture, clusterdns.WithForwarder(fwd), withAP, clusterdns.WithAutopathBySource())
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
	withAP, _ := clusterdns.WithAutopath(0, nil)
	e := start(t, store.Options{TTL: 5, Pods: store.PodsVerified}, fixture, withAP, clusterdns.WithAutopathBySource())
	e.st.SetPod(store.Pod{Namespace: "prod", Name: "client", IPs: []netip.Addr{mustAddr("127.0.0.7")}})
	e.st.Publish()
	m := testkit.NewQuery("kubernetes.default.prod.svc.cluster.local.", dns.TypeA, 1232)
	m.IsEdns0().SetVersion(1)
	r := testkit.AskFrom(t, "udp", "127.0.0.7", e.addr, m)
	if r.Rcode != dns.RcodeBadVers || len(r.Answer) != 0 {
		t.Fatalf("EDNS version 1 from a pod: %s %v, want BADVERS", dns.RcodeToString[r.Rcode], r.Answer)
	}
}

// scripted is an upstream on 127.0.0.1 that answers A 192.0.2.1 for the
// names in known and NXDOMAIN for the others, or nothing at all when silent;
// with barrier > 0 it holds every reply until that many queries have arrived
// (or 3 s passed), which only parallel askers get past in time.
type scripted struct {
	addr    string
	mu      sync.Mutex
	known   map[string]bool
	asked   []string
	silent  bool
	barrier int
	full    chan struct{}
}

func newScripted(t *testing.T, silent bool, barrier int) *scripted {
	t.Helper()
	s := &scripted{silent: silent, barrier: barrier, full: make(chan struct{}), known: map[string]bool{}}
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: dns.HandlerFunc(s.serve)}
	s.addr = testkit.StartServer(t, srv)
	return s
}

func (s *scripted) serve(w dns.ResponseWriter, r *dns.Msg) {
	name := strings.ToLower(r.Question[0].Name)
	s.mu.Lock()
	s.asked = append(s.asked, name)
	if len(s.asked) == s.barrier {
		close(s.full)
	}
	known := s.known[name]
	s.mu.Unlock()
	if s.silent {
		return
	}
	if s.barrier > 0 {
		select {
		case <-s.full:
		case <-time.After(3 * time.Second):
		}
	}
	m := new(dns.Msg)
	m.SetReply(r)
	if !known {
		m.Rcode = dns.RcodeNameError
	} else if r.Question[0].Qtype == dns.TypeA {
		rr, _ := dns.NewRR(r.Question[0].Name + " 60 IN A 192.0.2.1")
		m.Answer = []dns.RR{rr}
	}
	_ = w.WriteMsg(m)
}

func (s *scripted) reset(known ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = nil
	s.known = map[string]bool{}
	for _, k := range known {
		s.known[k] = true
	}
}

func (s *scripted) queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asked)
}

// externals is a search list of n domains outside the cluster,
// a0.example … a<n-1>.example, after the given entries.
func externals(n int, first ...string) string {
	l := slices.Clone(first)
	for i := range n {
		l = append(l, fmt.Sprintf("a%d.example", i))
	}
	return strings.Join(l, ",")
}

// askAP asks qname (under the autopath suffix) over UDP with the option and
// returns the reply, the CNAME target (or "") and how long it took.
func askAP(t *testing.T, addr, base, option string) (*dns.Msg, string, time.Duration) {
	t.Helper()
	start := time.Now()
	r, _, err := (&dns.Client{Net: "udp", Timeout: 20 * time.Second}).Exchange(apQuery(base+ap, dns.TypeA, option), addr)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s: %v", base, err)
	}
	target := ""
	if len(r.Answer) > 0 {
		if c, ok := r.Answer[0].(*dns.CNAME); ok {
			target = c.Target
		}
	}
	return r, target, took
}

func apServer(t *testing.T, up string, timeout time.Duration, reg prometheus.Registerer) *env {
	t.Helper()
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up}, Timeout: timeout, Policy: forward.PolicyRoundRobin})
	if err != nil {
		t.Fatal(err)
	}
	withAP, err := clusterdns.WithAutopath(0, reg)
	if err != nil {
		t.Fatal(err)
	}
	return start(t, store.Options{TTL: 5}, fixture, withAP, clusterdns.WithForwarder(fwd))
}

// TestAutopathBound: one packet with a 32-entry search list of external
// domains causes at most 8 upstream queries, asked in parallel, and ends in
// bounded time even when the upstream never answers.
func TestAutopathBound(t *testing.T) {
	t.Run("silent upstream", func(t *testing.T) {
		up := newScripted(t, true, 0)
		e := apServer(t, up.addr, time.Second, nil)
		r, _, took := askAP(t, e.addr, "www.example.org", externals(32))
		n := len(up.queries())
		if r.Rcode != dns.RcodeServerFailure || n > 8 || took > 3*time.Second {
			t.Fatalf("rcode %s after %v, %d upstream queries", dns.RcodeToString[r.Rcode], took, n)
		}
		t.Logf("32 external searches, silent upstream, 1 s forward timeout: %d upstream queries, SERVFAIL after %v", n, took.Round(time.Millisecond))
	})
	t.Run("upstream that never returns: the deadline", func(t *testing.T) {
		hang := &hangingExchanger{}
		withAP, err := clusterdns.WithAutopath(0, nil)
		if err != nil {
			t.Fatal(err)
		}
		e := start(t, store.Options{TTL: 5}, fixture, withAP, clusterdns.WithForwarder(hang))
		r, _, took := askAP(t, e.addr, "www.example.org", externals(32))
		n := hang.n.Load()
		// Within node-local's timeout toward this server: a slow name
		// through autopath is its SERVFAIL, never node-local's timeout.
		if limit := v1alpha1.DefaultNodeLocalClusterTimeout.Duration(); r.Rcode != dns.RcodeServerFailure || n > 8 || took >= limit {
			t.Fatalf("rcode %s after %v (want under %v), %d upstream queries", dns.RcodeToString[r.Rcode], took, limit, n)
		}
		t.Logf("32 external searches, exchanges that only end with their context: %d upstream queries, SERVFAIL after %v", n, took.Round(time.Millisecond))
	})
	t.Run("parallel", func(t *testing.T) {
		// The upstream answers only once 8 queries are waiting: asked one
		// after another, the first would time out (1 s) and fail.
		up := newScripted(t, false, 8)
		up.reset("www.a6.example.")
		e := apServer(t, up.addr, time.Second, nil)
		r, target, took := askAP(t, e.addr, "www", externals(32))
		if r.Rcode != dns.RcodeSuccess || target != "www.a6.example." {
			t.Fatalf("rcode %s target %q after %v: %v", dns.RcodeToString[r.Rcode], target, took, r)
		}
		if n := len(up.queries()); n != 8 {
			t.Errorf("%d upstream queries, want 8", n)
		}
	})

	cluster := []string{"prod.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	cases := []struct {
		name, base, option string
		known              []string
		rcode              int
		target             string
		maxQueries         int
	}{
		{"first external search that exists", "www", externals(32), []string{"www.a5.example.", "www.a6.example.", "www."},
			dns.RcodeSuccess, "www.a5.example.", 8},
		{"the name itself is always tried", "www.example.org", externals(32), []string{"www.example.org."},
			dns.RcodeSuccess, "www.example.org.", 8},
		{"searches past the 7th external one are not tried: the name itself answers", "www.example.org", externals(32),
			[]string{"www.example.org.a20.example.", "www.example.org."}, dns.RcodeSuccess, "www.example.org.", 8},
		{"searches past the 7th external one are not tried: NXDOMAIN", "www", externals(32), []string{"www.a20.example."},
			dns.RcodeNameError, "", 8},
		{"in-cluster hit asks nothing upstream", "web", externals(29, cluster...), []string{"web.a0.example.", "web."},
			dns.RcodeSuccess, "web.prod.svc.cluster.local.", 0},
		{"cluster searches are free", "www", externals(29, cluster...), []string{"www.a6.example."},
			dns.RcodeSuccess, "www.a6.example.", 8},
		{"an ExternalName leaving the zone counts", "ext", externals(29, cluster...), []string{"api.example.com."},
			dns.RcodeSuccess, "ext.prod.svc.cluster.local.", 8},
		{"a short list is tried whole", "www", externals(3), []string{"www."}, dns.RcodeSuccess, "www.", 4},
	}
	truncated := 0.0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A server and upstream per case: candidates still in flight
			// when a case has its answer must not be counted by the next.
			up := newScripted(t, false, 0)
			reg := prometheus.NewRegistry()
			e := apServer(t, up.addr, time.Second, reg)
			defer func() { truncated += testkit.Gather(t, reg)["dnsconfigurer_dnsserver_autopath_truncated_total"] }()
			up.reset(tc.known...)
			r, target, _ := askAP(t, e.addr, tc.base, tc.option)
			q := up.queries()
			if r.Rcode != tc.rcode || target != tc.target {
				t.Fatalf("rcode %s target %q, want %s %q (upstream asked %q)", dns.RcodeToString[r.Rcode], target,
					dns.RcodeToString[tc.rcode], tc.target, q)
			}
			if len(q) > tc.maxQueries {
				t.Errorf("%d upstream queries, want at most %d: %q", len(q), tc.maxQueries, q)
			}
		})
	}
	if truncated < 4 {
		t.Errorf("truncated expansions %v", truncated)
	}
}

// TestAutopathSameAnswer compares expansions with a reference that asks the
// candidates one after another: for search lists the bound does not cut,
// the answer is always the first candidate that exists.
func TestAutopathSameAnswer(t *testing.T) {
	up := newScripted(t, false, 0)
	e := apServer(t, up.addr, time.Second, nil)
	rnd := rand.New(rand.NewPCG(1, 2))
	for trial := range 40 {
		n := rnd.IntN(8) // up to 7 external searches: nothing is cut
		var searches []string
		if rnd.IntN(2) == 0 {
			searches = append(searches, "prod.svc.cluster.local", "svc.cluster.local", "cluster.local")
		}
		for i := range n {
			searches = append(searches, fmt.Sprintf("s%d.example", i))
		}
		cands := make([]string, 0, len(searches)+1)
		for _, s := range searches {
			cands = append(cands, "x."+s+".")
		}
		cands = append(cands, "x.")
		var known []string
		for _, c := range cands {
			if !strings.HasSuffix(c, ".cluster.local.") && rnd.IntN(3) == 0 {
				known = append(known, c)
			}
		}
		want := ""
		for _, c := range cands {
			if slices.Contains(known, c) {
				want = c
				break
			}
		}
		up.reset(known...)
		_, got, _ := askAP(t, e.addr, "x", strings.Join(searches, ","))
		if got != want {
			t.Fatalf("trial %d: searches %q known %q: answered %q, want %q", trial, searches, known, got, want)
		}
	}
}

// hangingExchanger counts queries and returns only when their context ends.
type hangingExchanger struct{ n atomic.Int64 }

func (h *hangingExchanger) Exchange(ctx context.Context, _ *dns.Msg) (*dns.Msg, error) {
	h.n.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}
