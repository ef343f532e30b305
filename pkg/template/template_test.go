package template

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// compiled is Compile of templates after SetDefaults, failing t on error.
func compiled(t *testing.T, templates ...v1alpha1.Template) *Set {
	t.Helper()
	cfg := v1alpha1.ServerConfiguration{Templates: templates}
	cfg.SetDefaults()
	s, err := Compile(cfg.Templates)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func answerOf(t *testing.T, s *Set, name string, qtype uint16) (Answer, Outcome) {
	t.Helper()
	lname := strings.ToLower(name)
	m, o := s.Match(lname, qtype, dns.ClassINET)
	if o != Answered {
		return Answer{}, o
	}
	a, err := m.Answer(Question{Name: lname, Question: dns.Question{Name: name, Qtype: qtype, Qclass: dns.ClassINET}, Remote: "192.0.2.9"})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return a, o
}

func rrs(rr []dns.RR) string {
	var out []string
	for _, r := range rr {
		out = append(out, strings.ReplaceAll(r.String(), "\t", " "))
	}
	return strings.Join(out, "; ")
}

// TestMatch: CoreDNS's template order and matching, case by case: zones,
// class, type (a question of type ANY matches every template), patterns in
// order, named and numbered groups, fallthrough and SERVFAIL.
func TestMatch(t *testing.T) {
	ipA := v1alpha1.Template{Zones: []string{"example"}, Type: "A",
		Match:       []string{`(^|[.])ip-(?P<a>[0-9]*)-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]example[.]$`},
		Answer:      []string{"{{ .Name }} 60 IN A {{ .Group.a }}.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}"},
		Fallthrough: true}
	ptr := v1alpha1.Template{Zones: []string{"in-addr.arpa"}, Type: "PTR",
		Match:  []string{`^(?P<d>[0-9]*)[.](?P<c>[0-9]*)[.](?P<b>[0-9]*)[.](?P<a>[0-9]*)[.]in-addr[.]arpa[.]$`},
		Answer: []string{"{{ .Name }} 60 IN PTR ip-{{ .Group.a }}-{{ .Group.b }}-{{ .Group.c }}-{{ .Group.d }}.example."}}
	noAAAA := v1alpha1.Template{Class: "ANY", Type: "AAAA", Rcode: "NXDOMAIN"}
	hex := v1alpha1.Template{Zones: []string{"hex.example"}, Type: "A",
		Match:  []string{`^ip0a(?P<b>[a-f0-9]{2})(?P<c>[a-f0-9]{2})(?P<d>[a-f0-9]{2})[.]hex[.]example[.]$`},
		Answer: []string{"{{ .Name }} 60 IN A 10.{{ parseInt .Group.b 16 8 }}.{{ parseInt .Group.c 16 8 }}.{{ parseInt .Group.d 16 8 }}"}}
	numbered := v1alpha1.Template{Zones: []string{"num.example"}, Type: "TXT", Match: []string{`^([a-z]+)\.num`, `^(x)-(y)`},
		Answer:     []string{`{{ .Name }} 30 IN TXT "{{ index .Match 1 }}" "{{ index .Group "1" }}" "{{ .Zone }}" "{{ .Class }}" "{{ .Type }}" "{{ .Remote }}"`},
		Additional: []string{"{{ .Name }} 30 IN A 192.0.2.1"},
		Authority:  []string{"{{ .Zone }} 30 IN NS ns.{{ .Zone }}"}}
	s := compiled(t, hex, ipA, ptr, numbered, noAAAA)
	for _, tc := range []struct {
		name, qname string
		qtype       uint16
		outcome     Outcome
		rcode       int
		answer      string
	}{
		{"named groups", "ip-10-1-2-3.example.", dns.TypeA, Answered, 0, "ip-10-1-2-3.example. 60 IN A 10.1.2.3"},
		{"a wildcard below", "www.ip-10-1-2-3.example.", dns.TypeA, Answered, 0, "www.ip-10-1-2-3.example. 60 IN A 10.1.2.3"},
		{"name lowercased", "IP-10-1-2-3.Example.", dns.TypeA, Answered, 0, "ip-10-1-2-3.example. 60 IN A 10.1.2.3"},
		{"no pattern, fallthrough", "www.example.", dns.TypeA, Next, 0, ""},
		{"other type, next template", "ip-10-1-2-3.example.", dns.TypeMX, Next, 0, ""},
		{"reverse", "3.2.1.10.in-addr.arpa.", dns.TypePTR, Answered, 0, "3.2.1.10.in-addr.arpa. 60 IN PTR ip-10-1-2-3.example."},
		{"no pattern, no fallthrough", "foo.in-addr.arpa.", dns.TypePTR, Servfail, 0, ""},
		{"parseInt", "ip0a7b7c7d.hex.example.", dns.TypeA, Answered, 0, "ip0a7b7c7d.hex.example. 60 IN A 10.123.124.125"},
		{"hex zone: its template first", "www.hex.example.", dns.TypeA, Servfail, 0, ""},
		{"numbered groups, second pattern", "x-y.num.example.", dns.TypeTXT, Answered, 0, `x-y.num.example. 30 IN TXT "x" "x" "num.example." "IN" "TXT" "192.0.2.9"`},
		{"AAAA anywhere", "www.kubernetes.io.", dns.TypeAAAA, Answered, dns.RcodeNameError, ""},
		{"outside every zone but the root's", "www.kubernetes.io.", dns.TypeA, Next, 0, ""},
		{"type ANY matches the first template", "ip-10-1-2-3.example.", dns.TypeANY, Answered, 0, "ip-10-1-2-3.example. 60 IN A 10.1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, o := answerOf(t, s, tc.qname, tc.qtype)
			if o != tc.outcome {
				t.Fatalf("outcome %d, want %d", o, tc.outcome)
			}
			if a.Rcode != tc.rcode || rrs(a.Answer) != tc.answer {
				t.Fatalf("rcode %d answer %q, want %d %q", a.Rcode, rrs(a.Answer), tc.rcode, tc.answer)
			}
		})
	}
	a, _ := answerOf(t, s, "ab.num.example.", dns.TypeTXT)
	if rrs(a.Extra) != "ab.num.example. 30 IN A 192.0.2.1" || rrs(a.Ns) != "num.example. 30 IN NS ns.num.example." {
		t.Fatalf("sections: extra %q ns %q", rrs(a.Extra), rrs(a.Ns))
	}
	if !a.Volatile {
		t.Fatalf("a record reading .Remote is not volatile")
	}
	if a, _ := answerOf(t, s, "ip-10-1-2-3.example.", dns.TypeA); a.Volatile {
		t.Fatalf("a record of the question alone is volatile")
	}
}

// TestClassAndFallthroughZones: a template of class CH leaves IN
// questions alone; fallthrough limited to zones passes only their names.
func TestClassAndFallthroughZones(t *testing.T) {
	s := compiled(t,
		v1alpha1.Template{Class: "CH", Type: "TXT", Answer: []string{`{{ .Name }} 0 CH TXT "chaos"`}},
		v1alpha1.Template{Zones: []string{"arpa"}, Type: "PTR", Match: []string{`^1\.`}, Answer: []string{"{{ .Name }} 5 IN PTR one."},
			Fallthrough: true, FallthroughZones: []string{"ip6.arpa"}})
	if _, o := s.Match("version.bind.", dns.TypeTXT, dns.ClassINET); o != Next {
		t.Fatalf("IN question matched a CH template: %d", o)
	}
	if _, o := s.Match("version.bind.", dns.TypeTXT, dns.ClassCHAOS); o != Answered {
		t.Fatalf("CH question: %d", o)
	}
	if _, o := s.Match("2.ip6.arpa.", dns.TypePTR, dns.ClassINET); o != Next {
		t.Fatalf("a fallthrough zone's name: %d", o)
	}
	if _, o := s.Match("2.in-addr.arpa.", dns.TypePTR, dns.ClassINET); o != Servfail {
		t.Fatalf("a name outside the fallthrough zones: %d", o)
	}
	ex := compiled(t, v1alpha1.Template{Type: "A", Except: []string{"b.example"}, Rcode: "REFUSED"})
	if _, o := ex.Match("x.b.example.", dns.TypeA, dns.ClassINET); o != Next {
		t.Fatalf("a name of an except zone: %d", o)
	}
	if _, o := ex.Match("x.c.example.", dns.TypeA, dns.ClassINET); o != Answered {
		t.Fatalf("a name outside the except zones: %d", o)
	}
	var none *Set
	if _, o := none.Match("x.", dns.TypeA, dns.ClassINET); o != Next {
		t.Fatalf("nil set: %d", o)
	}
}

// TestCompileErrors: what does not compile, or does not parse for a sample
// question, is refused at load with the field's path.
func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    v1alpha1.Template
		want string
	}{
		{"bad regex", v1alpha1.Template{Match: []string{"(["}}, "templates[0].match[0]"},
		{"template does not parse", v1alpha1.Template{Answer: []string{"{{ .Name "}}, "templates[0].answer[0]"},
		{"record does not parse", v1alpha1.Template{Answer: []string{"{{ .Name }} 60 IN A not-an-address"}}, "templates[0].answer[0]: for the name sample."},
		{"unknown field", v1alpha1.Template{Authority: []string{"{{ .Nope }} 60 IN A 192.0.2.1"}}, "templates[0].authority[0]"},
		{"unknown type", v1alpha1.Template{Type: "NOPE"}, "templates[0].type"},
		{"empty record", v1alpha1.Template{Additional: []string{"{{/* nothing */}}"}}, "templates[0].additional[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := v1alpha1.ServerConfiguration{Templates: []v1alpha1.Template{tc.t}}
			cfg.SetDefaults()
			_, err := Compile(cfg.Templates)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to name %q", err, tc.want)
			}
		})
	}
}

// TestAnswerError: a record that builds for the sample but not for a
// question is SERVFAIL (ErrRecord), as CoreDNS's.
func TestAnswerError(t *testing.T) {
	s := compiled(t, v1alpha1.Template{Type: "A", Match: []string{`^(?P<ip>[^.]*)\.`}, Answer: []string{"{{ .Name }} 60 IN A {{ .Group.ip }}"}})
	m, o := s.Match("abc.example.", dns.TypeA, dns.ClassINET)
	if o != Answered {
		t.Fatal(o)
	}
	if _, err := m.Answer(Question{Name: "abc.example.", Question: dns.Question{Name: "abc.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET}}); !errors.Is(err, ErrRecord) {
		t.Fatalf("err %v, want ErrRecord", err)
	}
}

// TestOpenShiftNodeDNS: the on-prem node Corefile's templates
// (machine-config-operator templates/common/on-prem/files/coredns-corefile.yaml),
// rendered for an IPv4 cluster: apps and api names answered A, their AAAA
// empty, other names passed on.
func TestOpenShiftNodeDNS(t *testing.T) {
	const base = "ostest.test.metalkube.org"
	s := compiled(t,
		v1alpha1.Template{Zones: []string{base}, Type: "A", Match: []string{".*.apps." + base}, Answer: []string{`{{ .Name }} 60 in {{ .Type }} 192.168.111.4`}, Fallthrough: true},
		v1alpha1.Template{Zones: []string{base}, Type: "AAAA", Match: []string{".*.apps." + base}, Fallthrough: true},
		v1alpha1.Template{Zones: []string{base}, Type: "A", Match: []string{"api." + base}, Answer: []string{`{{ .Name }} 60 in {{ .Type }} 192.168.111.5`}, Fallthrough: true},
		v1alpha1.Template{Zones: []string{base}, Type: "AAAA", Match: []string{"api." + base}, Fallthrough: true})
	for _, tc := range []struct {
		qname   string
		qtype   uint16
		outcome Outcome
		answer  string
	}{
		{"console.apps." + base + ".", dns.TypeA, Answered, "console.apps." + base + ". 60 IN A 192.168.111.4"},
		{"console.apps." + base + ".", dns.TypeAAAA, Answered, ""},
		{"api." + base + ".", dns.TypeA, Answered, "api." + base + ". 60 IN A 192.168.111.5"},
		{"api." + base + ".", dns.TypeAAAA, Answered, ""},
		{"api-int." + base + ".", dns.TypeA, Next, ""},
		{"master-0." + base + ".", dns.TypeA, Next, ""},
		{"www.example.com.", dns.TypeA, Next, ""},
	} {
		a, o := answerOf(t, s, tc.qname, tc.qtype)
		if o != tc.outcome || rrs(a.Answer) != tc.answer {
			t.Errorf("%s %s: %d %q, want %d %q", tc.qname, dns.TypeToString[tc.qtype], o, rrs(a.Answer), tc.outcome, tc.answer)
		}
	}
	if s.InZones("www.example.com.") {
		t.Fatalf("a name outside the zones is in them")
	}
}

// TestTemplateTypes: v1alpha1's type names are miekg/dns's, which CoreDNS
// takes.
func TestTemplateTypes(t *testing.T) {
	want := make([]string, 0, len(dns.StringToType))
	for n := range dns.StringToType {
		want = append(want, n)
	}
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(v1alpha1.TemplateTypes)); !slices.Equal(got, want) {
		t.Fatalf("v1alpha1.TemplateTypes\n %v\nwant\n %v", got, want)
	}
}
