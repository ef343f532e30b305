package corefile

import (
	"encoding/json"
	"strings"
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
			[]v1alpha1.Template{{Zones: []string{"."}, Class: "ANY", Type: "AAAA", Rcode: "NXDOMAIN", Except: []string{"hap.py.", "searx.hap.py."}},
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
			r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(tc.corefile)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(r.Config.Templates)
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Fatalf("templates\n %s\nwant\n %s", got, want)
			}
			found := false
			for _, f := range r.Findings {
				if f.Plugin == "template" {
					found = true
					if f.Status != tc.status {
						t.Errorf("finding %+v, want %s", f, tc.status)
					}
				}
			}
			if !found {
				t.Fatalf("no finding for template: %+v", r.Findings)
			}
			cfg := r.Config
			cfg.SetDefaults()
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the converted configuration does not validate: %v", err)
			}
		})
	}
}

// TestTemplateRefused: what CoreDNS's templateParse refuses, convert
// refuses with its reason, naming file and line.
func TestTemplateRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, err string }{
		{"one argument", "template IN", "Corefile:2: template: Wrong argument count or unexpected line ending after 'template'"},
		{"lower-case class", "template in A", "invalid query class in"},
		{"bad type", "template IN a", "invalid RR class a"},
		{"generic type", "template IN TYPE65", "invalid RR class TYPE65"},
		{"bad regex", "template IN A {\n match ([\n}", "Corefile:3: template: could not parse regex: ([,"},
		{"bad template", "template IN A {\n answer \"{{ .Name \"\n}", "Corefile:3: template: could not compile template: answer,"},
		{"bad rcode", "template IN A {\n rcode NOPE\n}", "unknown rcode NOPE"},
		{"match without args", "template IN A {\n match\n}", "Wrong argument count or unexpected line ending after 'match'"},
		{"unknown option", "template IN A {\n answers x\n}", "Wrong argument count or unexpected line ending after 'answers'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(".:53 {\n" + tc.body + "\n}\n")}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
		})
	}
}
