package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"text/template"
)

// Template answers the questions of its zones, class and type whose name
// one of its patterns matches, as CoreDNS's template plugin: with records
// built by Go templates from the question, or with an rcode alone.
// Templates are tried in order before the cluster zone, the hosts and
// the forwarders, as CoreDNS's plugin order has it.
type Template struct {
	// Zones are the zones whose names the template sees (default ["."]).
	Zones []string `json:"zones,omitempty"`
	// Class is the question class, in upper case as CoreDNS takes it: IN
	// (default), CH, HS, NONE or ANY (every class).
	Class string `json:"class,omitempty"`
	// Type is the question type as CoreDNS takes it (TemplateTypes), e.g.
	// A, AAAA, PTR, or ANY (every type; default). A question of type ANY
	// matches every template.
	Type string `json:"type,omitempty"`
	// Match are regular expressions (Go syntax) on the lowercase name with
	// its dot; the first that matches wins (default: every name). Named
	// and numbered groups are .Group in the records.
	Match []string `json:"match,omitempty"`
	// Answer, Additional and Authority are the records of each section,
	// each a Go template of one zone-file record, over .Name, .Zone,
	// .Class, .Type, .Match, .Group, .Question, .Message, .Remote and
	// .Meta, with the function parseInt (CoreDNS's set).
	Answer     []string `json:"answer,omitempty"`
	Additional []string `json:"additional,omitempty"`
	Authority  []string `json:"authority,omitempty"`
	// Rcode is the reply's response code in upper case (default
	// NOERROR), e.g. NXDOMAIN. SERVFAIL answers SERVFAIL without records.
	Rcode string `json:"rcode,omitempty"`
	// Fallthrough passes a name of the zones that no pattern matches on
	// to the next template, then to the cluster zone, hosts and
	// forwarders. Without it such a name is answered SERVFAIL.
	Fallthrough bool `json:"fallthrough,omitempty"`
	// Except are zones inside Zones whose names the template leaves
	// alone: convert fills it with the zones of a Corefile's more specific
	// server blocks, whose names CoreDNS never shows this template.
	Except []string `json:"except,omitempty"`
	// FallthroughZones limit fallthrough to the names of these zones
	// (default: every zone); needs fallthrough.
	FallthroughZones []string `json:"fallthroughZones,omitempty"`
}

// MaxTemplates bounds the templates: a name of their zones is compared
// with each until one answers.
const MaxTemplates = 64

// maxTemplatePattern is CoreDNS's bound on a template's regex.
const maxTemplatePattern = 10000

// templateClasses are the classes a template may name (miekg/dns's
// StringToClass).
var templateClasses = map[string]uint16{"IN": 1, "CS": 2, "CH": 3, "HS": 4, "NONE": 254, "ANY": 255}

// templateRcodes are the rcodes a template may name (miekg/dns's
// RcodeToString, CoreDNS's StringToRcode).
var templateRcodes = map[string]int{"NOERROR": 0, "FORMERR": 1, "SERVFAIL": 2, "NXDOMAIN": 3, "NOTIMP": 4,
	"REFUSED": 5, "YXDOMAIN": 6, "YXRRSET": 7, "NXRRSET": 8, "NOTAUTH": 9, "NOTZONE": 10}

// TemplateTypes are the type names a template may name: miekg/dns's
// StringToType keys, as CoreDNS takes them (pkg/template's test keeps the
// two equal).
var TemplateTypes = []string{
	"A", "AAAA", "AFSDB", "AMTRELAY", "ANY", "APL", "ATMA", "AVC", "AXFR", "CAA", "CDNSKEY", "CDS",
	"CERT", "CNAME", "CSYNC", "DHCID", "DLV", "DNAME", "DNSKEY", "DS", "EID", "EUI48", "EUI64", "GID",
	"GPOS", "HINFO", "HIP", "HTTPS", "IPSECKEY", "ISDN", "IXFR", "KEY", "KX", "L32", "L64", "LOC",
	"LP", "MAILA", "MAILB", "MB", "MD", "MF", "MG", "MINFO", "MR", "MX", "NAPTR", "NID", "NIMLOC",
	"NINFO", "NS", "NSAP-PTR", "NSEC", "NSEC3", "NSEC3PARAM", "NULL", "NXNAME", "NXT", "None",
	"OPENPGPKEY", "OPT", "PTR", "PX", "RESINFO", "RKEY", "RP", "RRSIG", "RT", "Reserved", "SIG",
	"SMIMEA", "SOA", "SPF", "SRV", "SSHFP", "SVCB", "TA", "TALINK", "TKEY", "TLSA", "TSIG", "TXT",
	"UID", "UINFO", "UNSPEC", "URI", "X25", "ZONEMD",
}

func (t *Template) setDefaults() {
	setString(&t.Class, "IN")
	setString(&t.Type, "ANY")
	setString(&t.Rcode, "NOERROR")
	if len(t.Zones) == 0 {
		t.Zones = []string{"."}
	}
}

// validateTemplates checks the templates, each field by its path
// (templates[i].match[j]). That each record parses for a name is
// pkg/template's check, which the server runs at load.
func (c *ServerConfiguration) validateTemplates(e *fieldErrors) {
	c.validateClusterList(e, "templates", len(c.Templates), MaxTemplates, "templates", "the cluster DNS answers templates", func(i int, prefix string) {
		c.Templates[i].validate(e, prefix)
	})
}

// validateClusterList checks a list of n items at field that only the
// cluster DNS uses (role says how): none in mode NodeLocal, at most limit
// (counted in unit), and each item by validate with its path prefix
// (field[i].).
func (c *ServerConfiguration) validateClusterList(e *fieldErrors, field string, n, limit int, unit, role string, validate func(i int, prefix string)) {
	if n == 0 {
		return
	}
	if c.Mode == ModeNodeLocal {
		e.add(field, "not used in mode %q: %s (nodeLocal.clusterConfig)", ModeNodeLocal, role)
	}
	if n > limit {
		e.add(field, "%d %s: at most %d", n, unit, limit)
	}
	for i := 0; i < n; i++ {
		validate(i, fmt.Sprintf("%s[%d].", field, i))
	}
}

func (t *Template) validate(e *fieldErrors, prefix string) {
	for j, z := range t.Zones {
		if _, err := normalizeName(z); err != nil {
			e.add(fmt.Sprintf("%szones[%d]", prefix, j), "%q: %v", z, err)
		}
	}
	if _, ok := templateClasses[t.Class]; !ok {
		e.add(prefix+"class", "%q: must be IN, CH, HS, NONE or ANY", t.Class)
	}
	if !slices.Contains(TemplateTypes, t.Type) {
		e.add(prefix+"type", "%q: not a DNS type such as A, AAAA or PTR", t.Type)
	}
	for j, m := range t.Match {
		path := fmt.Sprintf("%smatch[%d]", prefix, j)
		if len(m) > maxTemplatePattern {
			e.add(path, "%d characters: at most %d", len(m), maxTemplatePattern)
			continue
		}
		if _, err := regexp.Compile(m); err != nil {
			e.add(path, "%q: not a regular expression: %v", m, err)
		}
	}
	for _, sec := range []struct {
		name  string
		texts []string
	}{{"answer", t.Answer}, {"additional", t.Additional}, {"authority", t.Authority}} {
		section := sec.name
		for j, s := range sec.texts {
			if _, err := ParseRecordTemplate(section, s); err != nil {
				e.add(fmt.Sprintf("%s%s[%d]", prefix, section, j), "%q: not a template: %v", s, err)
			}
		}
	}
	if _, ok := templateRcodes[t.Rcode]; !ok {
		e.add(prefix+"rcode", "%q: not a response code (NOERROR, NXDOMAIN, SERVFAIL, REFUSED, ...)", t.Rcode)
	}
	if len(t.FallthroughZones) > 0 && !t.Fallthrough {
		e.add(prefix+"fallthroughZones", "needs fallthrough: true")
	}
	for j, z := range t.Except {
		if _, err := normalizeName(z); err != nil {
			e.add(fmt.Sprintf("%sexcept[%d]", prefix, j), "%q: %v", z, err)
		}
	}
	for j, z := range t.FallthroughZones {
		if _, err := normalizeName(z); err != nil {
			e.add(fmt.Sprintf("%sfallthroughZones[%d]", prefix, j), "%q: %v", z, err)
		}
	}
}

// ParseRecordTemplate parses the Go template of one record of a
// Template's section, with CoreDNS's functions (parseInt).
func ParseRecordTemplate(section, text string) (*template.Template, error) {
	return template.New(section).Funcs(template.FuncMap{"parseInt": strconv.ParseUint}).Parse(text)
}

// Typed accessors of a validated template.

// ZoneNames are the zones, lowercase FQDN.
func (t *Template) ZoneNames() []string { return fqdnAll(t.Zones) }

// ExceptNames are the except zones, lowercase FQDN.
func (t *Template) ExceptNames() []string { return fqdnAll(t.Except) }

// FallthroughZoneNames are the fallthrough zones, lowercase FQDN.
func (t *Template) FallthroughZoneNames() []string { return fqdnAll(t.FallthroughZones) }

// ClassValue is the class's number (255 for ANY).
func (t *Template) ClassValue() uint16 { return templateClasses[t.Class] }

// TypeName is the type's mnemonic.
func (t *Template) TypeName() string { return t.Type }

// RcodeValue is the rcode's number.
func (t *Template) RcodeValue() int { return templateRcodes[t.Rcode] }

// The templates' rules in ServerFieldRules (the schema): the parts of
// Validate one field's value decides alone.
func init() {
	r := ServerFieldRules
	r["templates"] = FieldRule{MaxItems: MaxTemplates}
	r["templates[].zones[]"] = FieldRule{Pattern: nameRule.Pattern, Says: nameRule.Says, MaxLength: nameMax}
	r["templates[].fallthroughZones[]"] = r["templates[].zones[]"]
	r["templates[].except[]"] = r["templates[].zones[]"]
	r["templates[].class"] = oneOfOrDefault(keys(templateClasses)...)
	r["templates[].rcode"] = oneOfOrDefault(keys(templateRcodes)...)
	r["templates[].type"] = oneOfOrDefault(TemplateTypes...)
	r["templates[].match[]"] = FieldRule{MaxLength: maxTemplatePattern}
}

// keys are m's keys, sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func fqdnAll(zones []string) []string {
	out := make([]string, 0, len(zones))
	for _, z := range zones {
		if n, err := normalizeName(z); err == nil {
			out = append(out, n)
		}
	}
	return out
}
