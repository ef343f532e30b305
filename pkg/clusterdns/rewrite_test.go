package clusterdns_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

func withRewrites(t *testing.T, rules ...v1alpha1.Rewrite) clusterdns.Option {
	t.Helper()
	o, err := clusterdns.WithRewrites(rules)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestRewrite asks names the rules rename, over UDP and TCP, twice (the
// second from the reply cache when the answer is the zone's): the question
// comes back as asked, the answer's names as CoreDNS 1.15's rewrite maps
// them back.
func TestRewrite(t *testing.T) {
	const web = "10.96.0.10"
	cases := []struct {
		name   string
		rules  []v1alpha1.Rewrite
		qname  string
		qtype  uint16
		rcode  int
		answer []string // sorted, as rrStrings
		extra  []string // nil: not checked
		ns     []string // owner and type of the authority records; nil: not checked
	}{
		{"exact: an external name answered by a Service", []v1alpha1.Rewrite{{From: "db.example.com", To: "web.prod.svc.cluster.local"}},
			"db.example.com.", dns.TypeA, dns.RcodeSuccess, []string{"db.example.com. 5 IN A " + web}, nil, nil},
		{"exact: matched in any case, answered in lowercase as CoreDNS", []v1alpha1.Rewrite{{From: "db.example.com", To: "web.prod.svc.cluster.local"}},
			"DB.Example.COM.", dns.TypeA, dns.RcodeSuccess, []string{"db.example.com. 5 IN A " + web}, nil, nil},
		{"exact: names below From do not match (forwarded)", []v1alpha1.Rewrite{{Match: "exact", From: "web.example.com", To: "web.prod.svc.cluster.local"}},
			"_http._tcp.web.example.com.", dns.TypeSRV, dns.RcodeSuccess, nil, nil, nil},
		{"exact: SRV of the bare name", []v1alpha1.Rewrite{{From: "web.example.com", To: "web.prod.svc.cluster.local"}},
			"web.example.com.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"web.example.com. 5 IN SRV 0 33 53 web.example.com.", "web.example.com. 5 IN SRV 0 33 80 web.example.com.",
				"web.example.com. 5 IN SRV 0 33 8080 web.example.com."},
			[]string{"web.example.com. 5 IN A " + web, "web.example.com. 5 IN AAAA fd00::10"}, nil},
		{"exact: NXDOMAIN keeps the zone's SOA", []v1alpha1.Rewrite{{From: "nx.example.com", To: "nx.prod.svc.cluster.local"}},
			"nx.example.com.", dns.TypeA, dns.RcodeNameError, nil, nil, []string{"cluster.local. SOA"}},
		{"exact: a CNAME to another name keeps its target", []v1alpha1.Rewrite{{From: "alias.example.com", To: "alias.prod.svc.cluster.local"}},
			"alias.example.com.", dns.TypeA, dns.RcodeSuccess,
			[]string{"alias.example.com. 5 IN CNAME web.prod.svc.cluster.local.", "web.prod.svc.cluster.local. 5 IN A " + web}, nil, nil},
		{"suffix: names and targets get the suffix back", []v1alpha1.Rewrite{{Match: "suffix", From: ".corp.internal", To: ".svc.cluster.local"}},
			"web.prod.corp.internal.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"web.prod.corp.internal. 5 IN SRV 0 33 53 web.prod.corp.internal.", "web.prod.corp.internal. 5 IN SRV 0 33 80 web.prod.corp.internal.",
				"web.prod.corp.internal. 5 IN SRV 0 33 8080 web.prod.corp.internal."},
			[]string{"web.prod.corp.internal. 5 IN A " + web, "web.prod.corp.internal. 5 IN AAAA fd00::10"}, nil},
		{"suffix: a CNAME target with the suffix is mapped too", []v1alpha1.Rewrite{{Match: "suffix", From: ".corp.internal", To: ".svc.cluster.local"}},
			"alias.prod.corp.internal.", dns.TypeA, dns.RcodeSuccess,
			[]string{"alias.prod.corp.internal. 5 IN CNAME web.prod.corp.internal.", "web.prod.corp.internal. 5 IN A " + web}, nil, nil},
		{"prefix (a trailing dot added, as CoreDNS)", []v1alpha1.Rewrite{{Match: "prefix", From: "legacy-web", To: "web"}},
			"legacy-web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"legacy-web.prod.svc.cluster.local. 5 IN A " + web}, nil, nil},
		{"substring", []v1alpha1.Rewrite{{Match: "substring", From: "prod-east", To: "prod"}},
			"web.prod-east.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"web.prod-east.svc.cluster.local. 5 IN A " + web}, nil, nil},
		{"regex groups", []v1alpha1.Rewrite{{Match: "regex", From: `^([a-z]+)\.([a-z]+)\.corp\.$`, To: "{1}.{2}.svc.cluster.local"}},
			"web.prod.corp.", dns.TypeA, dns.RcodeSuccess, []string{"web.prod.corp. 5 IN A " + web}, nil, nil},
		{"regex with answer name", []v1alpha1.Rewrite{{Match: "regex", From: `^(.+)\.corp\.$`, To: "{1}.prod.svc.cluster.local",
			AnswerFrom: `^(.+)\.prod\.svc\.cluster\.local\.$`, AnswerTo: "{1}.answered"}},
			"web.corp.", dns.TypeA, dns.RcodeSuccess, []string{"web.answered. 5 IN A " + web}, nil, nil},
		{"no match: forwarded as it is", []v1alpha1.Rewrite{{From: "db.example.com", To: "web.prod.svc.cluster.local"}},
			"www.example.org.", dns.TypeA, dns.RcodeSuccess, []string{"www.example.org. 60 IN A 192.0.2.1"}, nil, nil},
		{"a forwarded name rewritten", []v1alpha1.Rewrite{{From: "www.corp.example", To: "api.example.com"}},
			"www.corp.example.", dns.TypeA, dns.RcodeSuccess, []string{"www.corp.example. 60 IN A 192.0.2.1"}, nil, nil},
		{"a zone name sent upstream", []v1alpha1.Rewrite{{Match: "suffix", From: ".svc.cluster.local", To: ".example.org"}},
			"web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"web.prod.svc.cluster.local. 60 IN A 192.0.2.1"}, nil, nil},
		{"stop: the first match is the last", []v1alpha1.Rewrite{{From: "a.example", To: "b.example"}, {From: "b.example", To: "web.prod.svc.cluster.local"}},
			"a.example.", dns.TypeA, dns.RcodeSuccess, []string{"a.example. 60 IN A 192.0.2.1"}, nil, nil},
		{"continue: the next rule sees the new name", []v1alpha1.Rewrite{{From: "a.example", To: "b.example", Continue: true},
			{From: "b.example", To: "web.prod.svc.cluster.local"}},
			"a.example.", dns.TypeA, dns.RcodeSuccess, []string{"a.example. 5 IN A " + web}, nil, nil},
		{"continue without a second match", []v1alpha1.Rewrite{{From: "a.example", To: "web.prod.svc.cluster.local", Continue: true},
			{From: "b.example", To: "c.example"}},
			"a.example.", dns.TypeA, dns.RcodeSuccess, []string{"a.example. 5 IN A " + web}, nil, nil},
		{"an invalid name after the rewrite: SERVFAIL", []v1alpha1.Rewrite{{Match: "regex", From: `^(.+)$`, To: "{1}{1}{1}{1}{1}"}},
			strings.Repeat("a", 60) + ".example.", dns.TypeA, dns.RcodeServerFailure, nil, nil, nil},
		{"an invalid name after rewriting the answer back: SERVFAIL", []v1alpha1.Rewrite{{Match: "regex", From: `^(.+)\.corp\.$`, To: "{1}.prod.svc.cluster.local",
			AnswerFrom: `^(.+)\.prod\.svc\.cluster\.local\.$`, AnswerTo: strings.Repeat("{1}", 22)}},
			"web.corp.", dns.TypeA, dns.RcodeServerFailure, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := withForwarder(t, fixture, withRewrites(t, tc.rules...))
			for _, network := range []string{"udp", "udp", "tcp", "tcp"} {
				r := ask(t, network, e.addr, tc.qname, tc.qtype, 1232)
				if r.Rcode != tc.rcode {
					t.Fatalf("%s: rcode %s, want %s", network, dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
				}
				if len(r.Question) != 1 || r.Question[0].Name != tc.qname || r.Question[0].Qtype != tc.qtype {
					t.Fatalf("%s: question %v, want %s as asked", network, r.Question, tc.qname)
				}
				if got := rrStrings(r.Answer); !slices.Equal(got, tc.answer) {
					t.Fatalf("%s: answer\n%s\nwant\n%s", network, strings.Join(got, "\n"), strings.Join(tc.answer, "\n"))
				}
				if got := rrStrings(r.Extra); tc.extra != nil && !slices.Equal(got, tc.extra) {
					t.Fatalf("%s: extra\n%s\nwant\n%s", network, strings.Join(got, "\n"), strings.Join(tc.extra, "\n"))
				}
				var ns []string
				for _, rr := range r.Ns {
					ns = append(ns, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype])
				}
				if tc.ns != nil && !slices.Equal(ns, tc.ns) {
					t.Fatalf("%s: authority %v, want %v", network, ns, tc.ns)
				}
			}
		})
	}
}

// TestRewriteCache: a rewritten reply is cached under the question as
// asked. The target name asked directly keeps its own answer, whichever is
// asked first, and a change of the target retires the rewritten reply.
func TestRewriteCache(t *testing.T) {
	dir := bigHeadless(t, 1)
	e := start(t, store.Options{TTL: 5}, dir, withRewrites(t, v1alpha1.Rewrite{From: "db.example.com", To: "web.prod.svc.cluster.local"}))
	for _, network := range []string{"udp", "tcp"} {
		for _, order := range [][]string{{"db.example.com.", "web.prod.svc.cluster.local."}, {"web.prod.svc.cluster.local.", "db.example.com."}} {
			for range 3 {
				for _, name := range order {
					r := ask(t, network, e.addr, name, dns.TypeA, 1232)
					want := []string{name + " 5 IN A 10.96.0.10"}
					if got := rrStrings(r.Answer); r.Question[0].Name != name || !slices.Equal(got, want) {
						t.Fatalf("%s %s: question %v answer %v, want %v", network, name, r.Question, got, want)
					}
				}
			}
		}
	}
	// The Service gets another address: the cached rewritten reply goes.
	b, err := os.ReadFile(filepath.Join(dir, "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.ReplaceAll(string(b), "10.96.0.10", "10.96.0.11")
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := kubefeed.LoadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	e.st.Replace(objs)
	e.st.Publish()
	for _, network := range []string{"udp", "tcp"} {
		r := ask(t, network, e.addr, "db.example.com.", dns.TypeA, 1232)
		if got, want := rrStrings(r.Answer), []string{"db.example.com. 5 IN A 10.96.0.11"}; !slices.Equal(got, want) {
			t.Errorf("%s after the change: %v, want %v", network, got, want)
		}
	}
}

// TestRewriteAutopath: an autopath name is not rewritten itself; each of
// its candidates is, as the client's own question for it would be. So the
// expansion answers what the client's search would.
func TestRewriteAutopath(t *testing.T) {
	withAP, err := clusterdns.WithAutopath(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := withForwarder(t, fixture, withAP, withRewrites(t,
		v1alpha1.Rewrite{Match: "suffix", From: ".corp.internal", To: ".svc.cluster.local"},
		v1alpha1.Rewrite{Match: "suffix", From: ap, To: ".nowhere"}))
	cases := []struct {
		qname  string
		answer []string
	}{
		{"web.prod.corp.internal" + ap, []string{"web.prod.corp.internal. 5 IN A 10.96.0.10",
			"web.prod.corp.internal" + ap + " 5 IN CNAME web.prod.corp.internal."}},
		{"web" + ap, []string{"web.prod.svc.cluster.local. 5 IN A 10.96.0.10", "web" + ap + " 5 IN CNAME web.prod.svc.cluster.local."}},
	}
	for _, tc := range cases {
		r := askOpt(t, "udp", e.addr, tc.qname, dns.TypeA, "")
		if got := rrStrings(r.Answer); r.Rcode != dns.RcodeSuccess || !slices.Equal(got, tc.answer) {
			t.Errorf("%s: %s %v, want %v", tc.qname, dns.RcodeToString[r.Rcode], got, tc.answer)
		}
	}
}

func TestWithRewritesInvalid(t *testing.T) {
	for _, r := range []v1alpha1.Rewrite{
		{Match: "glob", From: "a", To: "b"},
		{Match: "regex", From: "(", To: "b"},
		{From: "a", To: "b", AnswerFrom: "(", AnswerTo: "a"},
	} {
		if _, err := clusterdns.WithRewrites([]v1alpha1.Rewrite{r}); err == nil || !strings.HasPrefix(err.Error(), "rewrites[0].") {
			t.Errorf("WithRewrites(%+v) = %v, want an error naming rewrites[0]", r, err)
		}
	}
}

// TestRewriteAutopathBySource: a pod's first search query expanded by its
// source finds a rewritten candidate, as its own search would.
func TestRewriteAutopathBySource(t *testing.T) {
	withAP, err := clusterdns.WithAutopath(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	up := upstream(t)
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Policy: forward.PolicyRoundRobin})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, store.Options{TTL: 5, Pods: store.PodsVerified}, fixture, clusterdns.WithForwarder(fwd), withAP,
		clusterdns.WithAutopathBySource(), withRewrites(t, v1alpha1.Rewrite{Match: "suffix", From: ".corp.internal", To: ".svc.cluster.local"}))
	e.st.SetPod(store.Pod{Namespace: "prod", Name: "client", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.7")}})
	e.st.Publish()
	r := askFrom(t, "udp", "127.0.0.7", e.addr, "web.prod.corp.internal.prod.svc.cluster.local.", dns.TypeA)
	want := []string{"web.prod.corp.internal. 5 IN A 10.96.0.10",
		"web.prod.corp.internal.prod.svc.cluster.local. 5 IN CNAME web.prod.corp.internal."}
	if got := rrStrings(r.Answer); r.Rcode != dns.RcodeSuccess || !slices.Equal(got, want) {
		t.Errorf("%s %v, want %v", dns.RcodeToString[r.Rcode], got, want)
	}
}
