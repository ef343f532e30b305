package corefile

import (
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// TestTemplate: the template directive becomes a templates entry, with
// CoreDNS's defaults (the block's zones, no fallthrough) and its
// refusals; what cannot be expressed (var, expr) is dropped by name.
func TestTemplate(t *testing.T) {
	for _, tc := range []struct {
		name, corefile string
		want           []v1alpha1.Template // as converted, before defaults
		status         Status
	}{
		{"AAAA filter", ".:53 {\n template ANY AAAA {\n  rcode NXDOMAIN\n }\n forward . 8.8.8.8\n}\n",
			[]v1alpha1.Template{{Zones: []string{"."}, Class: "ANY", Type: "AAAA", Rcode: "NXDOMAIN"}}, Converted},
		{"regex groups", ".:53 {\n template IN A example {\n  match (^|[.])ip-(?P<a>[0-9]*)-(?P<b>[0-9]*)[.]example[.]$ ^x\n  answer \"{{ .Name }} 60 IN A 10.0.{{ .Group.a }}.{{ .Group.b }}\"\n  additional \"ns.example. 60 IN A 192.0.2.1\"\n  authority \"example. 60 IN NS ns.example.\"\n  fallthrough in-addr.arpa\n  upstream\n }\n}\n",
			[]v1alpha1.Template{{Zones: []string{"example."}, Class: "IN", Type: "A",
				Match:      []string{"(^|[.])ip-(?P<a>[0-9]*)-(?P<b>[0-9]*)[.]example[.]$", "^x"},
				Answer:     []string{"{{ .Name }} 60 IN A 10.0.{{ .Group.a }}.{{ .Group.b }}"},
				Additional: []string{"ns.example. 60 IN A 192.0.2.1"}, Authority: []string{"example. 60 IN NS ns.example."},
				Fallthrough: true, FallthroughZones: []string{"in-addr.arpa."}}}, Converted},
		{"zone block cuts the zones", "hap.py:53 {\n template IN A {\n  answer \"{{ .Name }} 0 IN A 127.0.0.1\"\n }\n}\n.:53 {\n forward . 8.8.8.8\n}\n",
			[]v1alpha1.Template{{Zones: []string{"hap.py."}, Class: "IN", Type: "A", Answer: []string{"{{ .Name }} 0 IN A 127.0.0.1"}}}, Converted},
		{"more specific blocks carved out", ".:53 {\n template ANY AAAA {\n  rcode NXDOMAIN\n }\n forward . 8.8.8.8\n}\nhap.py:53 {\n template IN A {\n  answer \"{{ .Name }} 0 IN A 127.0.0.1\"\n }\n}\nsearx.hap.py:53 {\n template IN A {\n  answer \"{{ .Name }} 0 IN A 100.22.0.1\"\n }\n}\nstub.example:53 {\n forward . 10.0.0.53\n}\nlast.example:53 {\n forward . 10.0.0.53\n}\n",
			[]v1alpha1.Template{{Zones: []string{"."}, Class: "ANY", Type: "AAAA", Rcode: "NXDOMAIN", Except: []string{"hap.py.", "last.example.", "searx.hap.py.", "stub.example."}},
				{Zones: []string{"hap.py."}, Class: "IN", Type: "A", Answer: []string{"{{ .Name }} 0 IN A 127.0.0.1"}, Except: []string{"searx.hap.py."}},
				{Zones: []string{"searx.hap.py."}, Class: "IN", Type: "A", Answer: []string{"{{ .Name }} 0 IN A 100.22.0.1"}}}, Converted},
		{"after a forwarding zone block", "stub.example:53 {\n forward . 10.0.0.53\n}\n.:53 {\n template ANY AAAA {\n  rcode NXDOMAIN\n }\n forward . 8.8.8.8\n}\n",
			[]v1alpha1.Template{{Zones: []string{"."}, Class: "ANY", Type: "AAAA", Rcode: "NXDOMAIN", Except: []string{"stub.example."}}}, Converted},
		{"zone block, a wider zone", "a.example:53 {\n template IN A example {\n  rcode REFUSED\n }\n}\n",
			[]v1alpha1.Template{{Zones: []string{"a.example."}, Class: "IN", Type: "A", Rcode: "REFUSED"}}, Converted},
		{"zone block, a zone it never sees", "a.example:53 {\n template IN A b.example {\n  rcode REFUSED\n }\n}\n", nil, Dropped},
		{"ederror", ".:53 {\n template ANY ANY invalid {\n  rcode NXDOMAIN\n  ederror 21 \"Blocked\"\n }\n}\n",
			[]v1alpha1.Template{{Zones: []string{"invalid."}, Class: "ANY", Type: "ANY", Rcode: "NXDOMAIN"}}, Differs},
		{"expr", ".:53 {\n template IN A example.com {\n  var ip group('ip')\n  answer \"{{ .Name }} 60 IN A 10.0.0.1\"\n }\n}\n", nil, Dropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			findings := convertField(t, tc.corefile, "templates", func(r Result) any { return r.Config.Templates }, tc.want)
			found := false
			for _, f := range findings {
				if f.Plugin == "template" {
					found = true
					if f.Status != tc.status {
						t.Errorf("finding %+v, want %s", f, tc.status)
					}
				}
			}
			if !found {
				t.Fatalf("no finding for template: %+v", findings)
			}
		})
	}
}

// TestTemplateRefused: what CoreDNS's templateParse refuses, convert
// refuses with its reason, naming file and line.
func TestTemplateRefused(t *testing.T) {
	inA := func(option string) string { return "template IN A {\n " + option + "\n}" }
	for _, tc := range []struct{ name, body, err string }{
		{"one argument", "template IN", "Corefile:2: template: Wrong argument count or unexpected line ending after 'template'"},
		{"lower-case class", "template in A", "invalid query class in"},
		{"bad type", "template IN a", "invalid RR class a"},
		{"generic type", "template IN TYPE65", "invalid RR class TYPE65"},
		{"bad regex", inA("match (["), "Corefile:3: template: could not parse regex: ([,"},
		{"bad template", inA("answer \"{{ .Name \""), "Corefile:3: template: could not compile template: answer,"},
		{"bad rcode", inA("rcode NOPE"), "unknown rcode NOPE"},
		{"match without args", inA("match"), "Wrong argument count or unexpected line ending after 'match'"},
		{"unknown option", inA("answers x"), "Wrong argument count or unexpected line ending after 'answers'"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, tc.body, tc.err) })
	}
}
