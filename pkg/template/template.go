package template

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	gotmpl "text/template"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// Set is the compiled templates of a configuration, in order.
type Set struct {
	ts    []tmpl
	zones []string // every template's zones: a name outside them costs no pattern
}

// tmpl is one compiled v1alpha1.Template.
type tmpl struct {
	zones      []string
	except     []string // zones whose names are not the template's
	qclass     uint16
	qtype      uint16
	regex      []*regexp.Regexp // nil: every name (CoreDNS's ".*")
	answer     []*gotmpl.Template
	additional []*gotmpl.Template
	authority  []*gotmpl.Template
	rcode      int
	fall       []string // the zones that fall through; nil: none
	// volatile: a record reads the client or the message (.Remote,
	// .Message, .Meta), so the reply is not the question's alone.
	volatile bool
}

// Outcome is what the templates make of a question.
type Outcome uint8

const (
	// Next: no template answers; the question goes on to the next stage.
	Next Outcome = iota
	// Answered: a template answers (Match).
	Answered
	// Servfail: a template of the name's zone matched no pattern and does
	// not fall through.
	Servfail
)

// Match is the template that answers a question, with the zone and the
// groups its pattern matched.
type Match struct {
	t      *tmpl
	zone   string
	regex  string
	groups []string
	names  []string // the pattern's group names
}

// Question is what a template reads of one query.
type Question struct {
	// Name is the question's name in lowercase with its dot.
	Name string
	// Question is the question as asked.
	Question dns.Question
	// Msg is the query (nil when there is none, e.g. a question asked on
	// a client's behalf); Remote its client's address ("" when unknown).
	Msg    *dns.Msg
	Remote string
}

// Answer is a template's reply to a question.
type Answer struct {
	Rcode  int
	Answer []dns.RR
	Ns     []dns.RR
	Extra  []dns.RR
	// Volatile: the records depend on the client or the message, not on
	// the question alone; such a reply is not cached.
	Volatile bool
}

// ErrRecord is the error of a record that does not build or parse for a
// question; the reply is SERVFAIL, as CoreDNS's.
var ErrRecord = errors.New("template: record")

// Compile checks and compiles templates (validated by v1alpha1), each
// record against a sample question of its zone. Errors name the field,
// e.g. "templates[0].answer[1]".
func Compile(templates []v1alpha1.Template) (*Set, error) {
	if len(templates) == 0 {
		return nil, nil
	}
	s := &Set{}
	var errs []error
	for i := range templates {
		t, err := compile(&templates[i], fmt.Sprintf("templates[%d].", i))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.ts = append(s.ts, t)
		for _, z := range t.zones {
			if !contains(s.zones, z) {
				s.zones = append(s.zones, z)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func compile(c *v1alpha1.Template, prefix string) (tmpl, error) {
	t := tmpl{zones: c.ZoneNames(), except: c.ExceptNames(), qclass: c.ClassValue(), rcode: c.RcodeValue()}
	if len(t.zones) == 0 {
		t.zones = []string{"."}
	}
	qtype, ok := dns.StringToType[c.TypeName()]
	if !ok || c.ClassValue() == 0 {
		if !ok {
			return t, fmt.Errorf("%stype: %q: not a DNS type", prefix, c.Type)
		}
		return t, fmt.Errorf("%sclass: %q: not a DNS class", prefix, c.Class)
	}
	t.qtype = qtype
	for j, m := range c.Match {
		re, err := regexp.Compile(m)
		if err != nil {
			return t, fmt.Errorf("%smatch[%d]: %q: %w", prefix, j, m, err)
		}
		t.regex = append(t.regex, re)
	}
	if c.Fallthrough {
		t.fall = c.FallthroughZoneNames()
		if len(t.fall) == 0 {
			t.fall = []string{"."}
		}
	}
	var err error
	if t.answer, err = parseAll(prefix+"answer", c.Answer, &t.volatile); err != nil {
		return t, err
	}
	if t.additional, err = parseAll(prefix+"additional", c.Additional, &t.volatile); err != nil {
		return t, err
	}
	if t.authority, err = parseAll(prefix+"authority", c.Authority, &t.volatile); err != nil {
		return t, err
	}
	return t, t.sample(prefix)
}

// parseAll parses a section's record templates; a record that reads the
// client or the message makes the template volatile.
func parseAll(path string, texts []string, volatile *bool) ([]*gotmpl.Template, error) {
	var out []*gotmpl.Template
	for j, s := range texts {
		pt, err := v1alpha1.ParseRecordTemplate(path, s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %q: %w", path, j, s, err)
		}
		if strings.Contains(s, "Remote") || strings.Contains(s, "Message") || strings.Contains(s, "Meta") {
			*volatile = true
		}
		out = append(out, pt)
	}
	return out, nil
}

// samples are the values a sample question's groups take in turn: a
// record is refused at load only when it parses for none of them (a group
// may stand for a number, an address or a label).
var samples = []string{"1", "192.0.2.1", "2001:db8::1", "a"}

// sample builds every record of t for a sample question of its first
// zone: a record that does not build, or parses for no sample group
// value, is refused at load, not at the first query.
func (t *tmpl) sample(prefix string) error {
	name := "sample." + t.zones[0]
	if t.zones[0] == "." {
		name = "sample."
	}
	qtype := t.qtype
	if qtype == dns.TypeANY {
		qtype = dns.TypeA
	}
	qclass := t.qclass
	if qclass == dns.ClassANY {
		qclass = dns.ClassINET
	}
	q := dns.Question{Name: name, Qtype: qtype, Qclass: qclass}
	msg := new(dns.Msg)
	msg.Question = []dns.Question{q}
	var names []string
	if len(t.regex) > 0 {
		names = t.regex[0].SubexpNames()
	}
	for _, sec := range []struct {
		name string
		ts   []*gotmpl.Template
	}{{"answer", t.answer}, {"additional", t.additional}, {"authority", t.authority}} {
		for j, pt := range sec.ts {
			var err error
			for _, v := range samples {
				m := Match{t: t, zone: t.zones[0], groups: make([]string, max(len(names), 1)), names: names}
				for i := range m.groups {
					m.groups[i] = v
				}
				m.groups[0] = name
				if _, err = record(pt, m.data(Question{Name: name, Question: q, Msg: msg, Remote: "192.0.2.1"})); err == nil {
					break
				}
			}
			if err != nil {
				return fmt.Errorf("%s%s[%d]: for the name %s: %w", prefix, sec.name, j, name, err)
			}
		}
	}
	return nil
}

// InZones reports whether lname, a lowercase name with its dot, is in a
// zone of a template: a name outside them is never matched.
func (s *Set) InZones(lname string) bool {
	for _, z := range s.zones {
		if inZone(lname, z) {
			return true
		}
	}
	return false
}

// Match picks the template that answers a question of qtype and qclass
// for lname, a lowercase name with its dot, as CoreDNS's template plugin
// does: the templates in order, each by zone, class and type, then its
// patterns; a template of the name's zone whose patterns all miss either
// falls through or makes the reply SERVFAIL.
func (s *Set) Match(lname string, qtype, qclass uint16) (Match, Outcome) {
	if s == nil || !s.InZones(lname) {
		return Match{}, Next
	}
	for i := range s.ts {
		t := &s.ts[i]
		zone := longestZone(t.zones, lname)
		if zone == "" || longestZone(t.except, lname) != "" ||
			t.qclass != dns.ClassANY && qclass != dns.ClassANY && qclass != t.qclass ||
			t.qtype != dns.TypeANY && qtype != dns.TypeANY && qtype != t.qtype {
			continue
		}
		if t.regex == nil {
			return Match{t: t, zone: zone, regex: ".*", groups: []string{lname}}, Answered
		}
		for _, re := range t.regex {
			if g := re.FindStringSubmatch(lname); g != nil {
				return Match{t: t, zone: zone, regex: re.String(), groups: g, names: re.SubexpNames()}, Answered
			}
		}
		if !t.fallsThrough(lname) {
			return Match{}, Servfail
		}
	}
	return Match{}, Next
}

func (t *tmpl) fallsThrough(lname string) bool {
	for _, z := range t.fall {
		if inZone(lname, z) {
			return true
		}
	}
	return false
}

// data is what m's records read for q: CoreDNS's templateData.
func (m Match) data(q Question) *data {
	d := &data{Zone: m.zone, Name: q.Name, Regex: m.regex, Match: m.groups, Group: map[string]string{},
		Message: q.Msg, Remote: q.Remote}
	qq := q.Question
	d.Question = &qq
	d.Class = dns.ClassToString[qq.Qclass]
	if qq.Qclass == dns.ClassANY {
		d.Class = dns.ClassToString[m.t.qclass]
	}
	d.Type = dns.TypeToString[qq.Qtype]
	if qq.Qtype == dns.TypeANY {
		d.Type = dns.TypeToString[m.t.qtype]
	}
	for i, g := range m.groups {
		d.Group[strconv.Itoa(i)] = g
	}
	for i, g := range m.groups {
		if i < len(m.names) && m.names[i] != "" {
			d.Group[m.names[i]] = g
		}
	}
	return d
}

// data is the data of a record template, with CoreDNS's field names.
type data struct {
	Zone     string
	Name     string
	Regex    string
	Match    []string
	Group    map[string]string
	Class    string
	Type     string
	Message  *dns.Msg
	Question *dns.Question
	Remote   string
	Var      map[string]any
}

// Meta is CoreDNS's metadata lookup: "" here, as CoreDNS without the
// metadata plugin.
func (*data) Meta(string) string { return "" }

// Rcode is the rcode of m's template.
func (m Match) Rcode() int { return m.t.rcode }

// Answer builds m's reply to q. An error (a record that does not build
// or parse for q) wraps ErrRecord: the reply is SERVFAIL.
func (m Match) Answer(q Question) (Answer, error) {
	t := m.t
	a := Answer{Rcode: t.rcode, Volatile: t.volatile}
	if t.rcode == dns.RcodeServerFailure {
		return a, nil
	}
	d := m.data(q)
	var err error
	if a.Answer, err = records("answer", t.answer, d); err != nil {
		return Answer{}, err
	}
	if a.Extra, err = records("additional", t.additional, d); err != nil {
		return Answer{}, err
	}
	if a.Ns, err = records("authority", t.authority, d); err != nil {
		return Answer{}, err
	}
	return a, nil
}

func records(section string, ts []*gotmpl.Template, d *data) ([]dns.RR, error) {
	var out []dns.RR
	for j, pt := range ts {
		rr, err := record(pt, d)
		if err != nil {
			return nil, fmt.Errorf("%w: %s[%d]: %w", ErrRecord, section, j, err)
		}
		out = append(out, rr)
	}
	return out, nil
}

// record executes one record template and parses its text.
func record(pt *gotmpl.Template, d *data) (dns.RR, error) {
	var b bytes.Buffer
	if err := pt.Execute(&b, d); err != nil {
		return nil, err
	}
	rr, err := dns.NewRR(b.String())
	if err != nil {
		return nil, fmt.Errorf("%q: %w", b.String(), err)
	}
	if rr == nil {
		return nil, fmt.Errorf("%q: no record", b.String())
	}
	return rr, nil
}

// inZone reports whether lname is zone or below it (both lowercase with
// their dots).
func inZone(lname, zone string) bool {
	if zone == "." {
		return true
	}
	if !strings.HasSuffix(lname, zone) {
		return false
	}
	return len(lname) == len(zone) || lname[len(lname)-len(zone)-1] == '.'
}

// longestZone is the longest of zones lname is in, "" for none.
func longestZone(zones []string, lname string) string {
	best := ""
	for _, z := range zones {
		if inZone(lname, z) && len(z) > len(best) {
			best = z
		}
	}
	return best
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Volatile reports whether m's records read the client or the message.
func (m Match) Volatile() bool { return m.t != nil && m.t.volatile }
