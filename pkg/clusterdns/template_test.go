package clusterdns_test

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/template"
)

// withTemplates compiles templates (defaults set) for a handler.
func withTemplates(t *testing.T, templates ...v1alpha1.Template) clusterdns.Option {
	t.Helper()
	cfg := v1alpha1.ServerConfiguration{Templates: templates}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := template.Compile(cfg.Templates)
	if err != nil {
		t.Fatal(err)
	}
	return clusterdns.WithTemplates(s, nil)
}

// TestTemplates: templates answer before the zone, hosts and forwarders
// (CoreDNS's plugin order), over UDP and TCP, from a miss and from the
// reply cache alike; a name they pass on is answered as without them; a
// template of the name's zone that matches no pattern and does not fall
// through is SERVFAIL; a CNAME is followed for A.
func TestTemplates(t *testing.T) {
	st := &fakeStatic{rrs: map[string][]dns.RR{}}
	st.set(t, "host.example.org.", "host.example.org. 0 IN A 192.168.49.1")
	e, up := withForwarder(t, fixture, clusterdns.WithStatic(st), withTemplates(t,
		v1alpha1.Template{Zones: []string{"example"}, Type: "A",
			Match:       []string{`(^|[.])ip-(?P<a>[0-9]*)-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]example[.]$`},
			Answer:      []string{"{{ .Name }} 60 IN A {{ .Group.a }}.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}"},
			Additional:  []string{"ns.example. 60 IN A 192.0.2.53"},
			Fallthrough: true},
		v1alpha1.Template{Zones: []string{"in-addr.arpa"}, Type: "PTR",
			Match:       []string{`^(?P<d>[0-9]*)[.](?P<c>[0-9]*)[.](?P<b>[0-9]*)[.](?P<a>1)[.]in-addr[.]arpa[.]$`},
			Answer:      []string{"{{ .Name }} 60 IN PTR ip-{{ .Group.a }}-{{ .Group.b }}-{{ .Group.c }}-{{ .Group.d }}.example."},
			Fallthrough: true},
		v1alpha1.Template{Zones: []string{"strict.example"}, Match: []string{"^www[.]"}, Answer: []string{"{{ .Name }} 60 IN A 192.0.2.7"}},
		v1alpha1.Template{Zones: []string{"alias.example"}, Answer: []string{"{{ .Name }} 60 IN CNAME www.example.com."}},
		v1alpha1.Template{Class: "ANY", Type: "AAAA", Rcode: "NXDOMAIN"},
	))
	cases := []struct {
		tcase
		upstream bool
	}{
		{tcase: tcase{name: "named groups", qname: "ip-10-1-2-3.example.", qtype: dns.TypeA,
			answer: []string{"ip-10-1-2-3.example. 60 IN A 10.1.2.3"}, extra: []string{"ns.example. 60 IN A 192.0.2.53"}}},
		{tcase: tcase{name: "case of the name", qname: "IP-10-1-2-4.Example.", qtype: dns.TypeA,
			answer: []string{"ip-10-1-2-4.example. 60 IN A 10.1.2.4"}}},
		{tcase: tcase{name: "fallthrough to the forwarder", qname: "www.example.", qtype: dns.TypeA,
			answer: []string{"www.example. 60 IN A 192.0.2.1"}}, upstream: true},
		{tcase: tcase{name: "PTR before the forwarder", qname: "4.3.2.1.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"4.3.2.1.in-addr.arpa. 60 IN PTR ip-1-2-3-4.example."}}},
		{tcase: tcase{name: "PTR the snapshot has, passed on", qname: "10.0.96.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"10.0.96.10.in-addr.arpa. 5 IN PTR web.prod.svc.cluster.local."}}},
		{tcase: tcase{name: "no pattern, no fallthrough", qname: "mail.strict.example.", qtype: dns.TypeA, rcode: dns.RcodeServerFailure}},
		{tcase: tcase{name: "pattern", qname: "www.strict.example.", qtype: dns.TypeA, answer: []string{"www.strict.example. 60 IN A 192.0.2.7"}}},
		{tcase: tcase{name: "AAAA of the cluster zone", qname: "web.prod.svc.cluster.local.", qtype: dns.TypeAAAA, rcode: dns.RcodeNameError}},
		{tcase: tcase{name: "AAAA outside", qname: "www.kubernetes.io.", qtype: dns.TypeAAAA, rcode: dns.RcodeNameError}},
		{tcase: tcase{name: "A of the cluster zone", qname: "web.prod.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"web.prod.svc.cluster.local. 5 IN A 10.96.0.10"}}},
		{tcase: tcase{name: "static after templates", qname: "host.example.org.", qtype: dns.TypeA,
			answer: []string{"host.example.org. 0 IN A 192.168.49.1"}}},
		{tcase: tcase{name: "CNAME followed", qname: "x.alias.example.", qtype: dns.TypeA,
			answer: []string{"x.alias.example. 60 IN CNAME www.example.com.", "www.example.com. 60 IN A 192.0.2.1"}}, upstream: true},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			for _, round := range []string{"miss", "again"} {
				t.Run(network+"/"+tc.name+"/"+round, func(t *testing.T) {
					before := up.Count()
					check(t, e, network, 0, tc.tcase)
					went := up.Count() != before
					if went && !tc.upstream {
						t.Errorf("forwarded")
					}
				})
			}
		}
	}
	// Resolve (autopath's entry point) asks the templates too.
	r := e.h.Resolve(context.Background(), dns.Question{Name: "ip-10-9-9-9.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !r.Authoritative {
		t.Fatalf("Resolve: %+v", r)
	}
}

// TestTemplatesRemote: a record that reads the client is made per query,
// never from the reply cache.
func TestTemplatesRemote(t *testing.T) {
	e, _ := withForwarder(t, fixture, withTemplates(t,
		v1alpha1.Template{Zones: []string{"whoami.example"}, Type: "TXT", Answer: []string{`{{ .Name }} 0 IN TXT "{{ .Remote }}"`}}))
	for range 3 {
		check(t, e, "udp", 0, tcase{qname: "whoami.example.", qtype: dns.TypeTXT, answer: []string{`whoami.example. 0 IN TXT "127.0.0.1"`}})
	}
}

// TestTemplatesTTLCap: the records' TTLs are capped per name, as CoreDNS's
// cache caps a template's answer in its block.
func TestTemplatesTTLCap(t *testing.T) {
	cfg := v1alpha1.ServerConfiguration{Templates: []v1alpha1.Template{{Zones: []string{"example"}, Type: "A",
		Answer: []string{"{{ .Name }} 60 IN A 192.0.2.8", "{{ .Name }} 5 IN A 192.0.2.9"}}}}
	cfg.SetDefaults()
	s, err := template.Compile(cfg.Templates)
	if err != nil {
		t.Fatal(err)
	}
	capped := func(string) (time.Duration, bool) { return 30 * time.Second, true }
	e, _ := withForwarder(t, fixture, clusterdns.WithTemplates(s, capped))
	check(t, e, "udp", 0, tcase{qname: "a.example.", qtype: dns.TypeA, answer: []string{"a.example. 30 IN A 192.0.2.8", "a.example. 5 IN A 192.0.2.9"}})
}
