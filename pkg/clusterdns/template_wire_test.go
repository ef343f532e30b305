package clusterdns

import (
	"bytes"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/template"
)

// TestTemplateDecideAgrees: with templates, the wire path and ServeDNS make
// one decision; AnswerWire leaves a template's first answer to ServeDNS,
// then answers it from the reply cache with ServeDNS's bytes, unless a
// record reads the client.
func TestTemplateDecideAgrees(t *testing.T) {
	cfg := v1alpha1.ServerConfiguration{Templates: []v1alpha1.Template{
		{Zones: []string{"example"}, Type: "A", Match: []string{`^ip-(?P<a>[0-9]+)[.]`}, Answer: []string{"{{ .Name }} 60 IN A 10.0.0.{{ .Group.a }}"}, Fallthrough: true},
		{Zones: []string{"who.example"}, Type: "TXT", Answer: []string{`{{ .Name }} 0 IN TXT "{{ .Remote }}"`}},
		{Class: "ANY", Type: "AAAA", Rcode: "NXDOMAIN"},
	}}
	cfg.SetDefaults()
	s, err := template.Compile(cfg.Templates)
	if err != nil {
		t.Fatal(err)
	}
	h, _, _, _ := forwardingHandler(t, WithWireMisses(), WithTemplates(s, nil))
	for _, tc := range []struct {
		name  string
		req   *dns.Msg
		route route
		rcode int
		wire  bool
	}{
		{"answered", wireQuery("ip-7.example.", dns.TypeA, true, false, 0, false), routeTemplate, dns.RcodeSuccess, true},
		{"AAAA of the zone", wireQuery("web.ns.svc.cluster.local.", dns.TypeAAAA, true, false, 0, false), routeTemplate, dns.RcodeNameError, true},
		{"fallthrough", wireQuery("www.example.", dns.TypeA, true, false, 0, false), routeForward, dns.RcodeSuccess, true},
		{"zone A untouched", wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false), routeZone, dns.RcodeSuccess, true},
		{"reads the client", wireQuery("who.example.", dns.TypeTXT, true, false, 0, false), routeTemplate, dns.RcodeSuccess, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.req.Question[0]
			var mq, wq query
			h.admit(&mq, udpFrom, tc.req.Copy())
			packed := mustPack(t, tc.req)
			if !h.admitWire(&wq, make([]byte, 0, 512), packed) {
				t.Fatal("admitWire refused the query")
			}
			text := decide(h, mq.z, q.Qtype, q.Qclass, mq.lower())
			wire := decide(h, wq.z, wq.wire.Qtype, wq.wire.Qclass, wq.lowerWire())
			if text.route != wire.route || text.route != tc.route {
				t.Fatalf("routes: text %d, wire %d, want %d", text.route, wire.route, tc.route)
			}
			var served []byte
			for range 2 {
				w := &fakeWriter{}
				h.ServeDNS(w, tc.req.Copy())
				if w.err != nil || w.msg == nil || w.msg.Rcode != tc.rcode {
					t.Fatalf("ServeDNS: %v %v", w.err, w.msg)
				}
				served = w.wire
			}
			b, ok := h.AnswerWire(make([]byte, 0, 512), packed)
			if ok != tc.wire {
				t.Fatalf("answered from the wire: %v, want %v", ok, tc.wire)
			}
			if ok && !bytes.Equal(b, served) {
				t.Fatalf("the wire's reply is not ServeDNS's")
			}
		})
	}
}
