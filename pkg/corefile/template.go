package corefile

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// templateClasses are the classes CoreDNS's template takes (miekg/dns's
// StringToClass: upper case only).
var templateClasses = map[string]bool{"IN": true, "CS": true, "CH": true, "HS": true, "NONE": true, "ANY": true}

// templateRcodes are miekg/dns's StringToRcode keys a template may name.
var templateRcodes = map[string]bool{"NOERROR": true, "FORMERR": true, "SERVFAIL": true, "NXDOMAIN": true, "NOTIMP": true,
	"REFUSED": true, "YXDOMAIN": true, "YXRRSET": true, "NXRRSET": true, "NOTAUTH": true, "NOTZONE": true}

// templateDirective: template CLASS TYPE [ZONE...] { match, answer,
// additional, authority, rcode, fallthrough }, as CoreDNS's
// templateParse reads it, to a templates entry. Its zones default to the
// block's; in a zone block they are cut to the block's zones, the only
// names that reach it.
func (c *converter) templateDirective(s scope, d Directive) {
	if len(d.Args) < 2 {
		c.refuse(d.Where, d.Name, "%v", argErr(d.Name))
		return
	}
	if !templateClasses[d.Args[0]] {
		c.refuse(d.Where, d.Name, "invalid query class %s", d.Args[0])
		return
	}
	if !slices.Contains(v1alpha1.TemplateTypes, d.Args[1]) {
		c.refuse(d.Where, d.Name, "invalid RR class %s", d.Args[1])
		return
	}
	t := v1alpha1.Template{Class: d.Args[0], Type: d.Args[1]}
	zones := s.zones
	if len(d.Args) > 2 {
		zones = nil
		for _, z := range d.Args[2:] {
			zones = append(zones, fqdn(z))
		}
	}
	t.Zones = blockZones(zones, s)
	if len(t.Zones) == 0 {
		c.add(d.Where, d.Name, Dropped, "its zones %s are outside the block's %s: CoreDNS never asks it", strings.Join(zones, " "), strings.Join(s.zones, " "))
		return
	}
	var differs []string
	for _, o := range d.Options {
		switch o.Name {
		case "match", "answer", "additional", "authority":
			if len(o.Args) == 0 {
				c.refuse(o.Where, d.Name, "%v", argErr(o.Name))
				return
			}
			if !c.templateOption(&t, o) {
				return
			}
		case "rcode":
			if len(o.Args) != 1 {
				c.refuse(o.Where, d.Name, "%v", argErr(o.Name))
				return
			}
			if !templateRcodes[o.Args[0]] {
				c.refuse(o.Where, d.Name, "unknown rcode %s", o.Args[0])
				return
			}
			t.Rcode = o.Args[0]
		case "fallthrough":
			t.Fallthrough = true
			for _, z := range o.Args {
				t.FallthroughZones = append(t.FallthroughZones, fqdn(z))
			}
		case "upstream":
			// Ignored by CoreDNS ("remove soon").
		case "ederror":
			if len(o.Args) != 1 && len(o.Args) != 2 {
				c.refuse(o.Where, d.Name, "%v", argErr(o.Name))
				return
			}
			differs = append(differs, "ederror: the reply carries no extended DNS error")
		case "var", "expr":
			c.add(o.Where, d.Name, Dropped, "%s: no expressions in templates; workaround: a match pattern that admits only the names to answer", o.Name)
			return
		default:
			c.refuse(o.Where, d.Name, "%v", argErr(o.Name))
			return
		}
	}
	for _, s := range append(append(t.Answer, t.Additional...), t.Authority...) {
		if strings.Contains(s, "Meta") {
			differs = append(differs, ".Meta is empty: no metadata plugin")
			break
		}
	}
	c.carveBlocks(&t, s)
	c.entryAt[fmt.Sprintf("templates[%d]", len(c.cfg.Templates))] = d.Where
	c.cfg.Templates = append(c.cfg.Templates, t)
	what := fmt.Sprintf("templates[%d]: %s %s in %s", len(c.cfg.Templates)-1, t.Class, t.Type, strings.Join(t.Zones, " "))
	if t.Fallthrough {
		what += ", fallthrough"
	}
	if len(differs) > 0 {
		c.add(d.Where, d.Name, Differs, "%s; %s", what, strings.Join(differs, "; "))
		return
	}
	c.add(d.Where, d.Name, Converted, "%s", what)
}

// templateOption adds a match pattern or a section's records to t,
// refusing what CoreDNS's setup refuses; false when refused.
func (c *converter) templateOption(t *v1alpha1.Template, o Option) bool {
	for _, a := range o.Args {
		if o.Name == "match" {
			if len(a) > 10000 {
				c.refuse(o.Where, "template", "regex pattern too long: %d > %d", len(a), 10000)
				return false
			}
			if _, err := regexp.Compile(a); err != nil {
				c.refuse(o.Where, "template", "could not parse regex: %s, %v", a, err)
				return false
			}
			continue
		}
		if _, err := v1alpha1.ParseRecordTemplate(o.Name, a); err != nil {
			c.refuse(o.Where, "template", "could not compile template: %s, %v", o.Name, err)
			return false
		}
	}
	switch o.Name {
	case "match":
		t.Match = append(t.Match, o.Args...)
	case "answer":
		t.Answer = append(t.Answer, o.Args...)
	case "additional":
		t.Additional = append(t.Additional, o.Args...)
	default:
		t.Authority = append(t.Authority, o.Args...)
	}
	return true
}

// carveBlocks keeps the names of more specific server blocks, before or
// after t's block s, from t, as CoreDNS routes a name to its most
// specific block.
func (c *converter) carveBlocks(t *v1alpha1.Template, s scope) {
	for _, z := range c.blocks {
		if belowAny(z, t.Zones) && !slices.Contains(s.zones, z) {
			t.Except = appendNew(t.Except, z)
		}
	}
	slices.Sort(t.Except)
}

// belowAny reports whether name is strictly below one of zones.
func belowAny(name string, zones []string) bool {
	for _, z := range zones {
		if name != z && under(name, z) {
			return true
		}
	}
	return false
}

// blockZones are the parts of zones that reach a block of zones s: a
// zone inside one of the block's, or the block's zone below it. The root
// block sees them all (other blocks' names excepted).
func blockZones(zones []string, s scope) []string {
	if s.main {
		return zones
	}
	var out []string
	eachBlockZone(zones, s, func(z string) { out = appendNew(out, z) })
	return out
}

// eachBlockZone calls f with each part of zones that reaches a block of
// zones s, repeats included: in the root block each zone; otherwise, for
// each zone and block zone that meet, the narrower of the two.
func eachBlockZone(zones []string, s scope, f func(string)) {
	for _, z := range zones {
		if s.main {
			f(z)
			continue
		}
		for _, b := range s.zones {
			switch {
			case under(z, b):
				f(z)
			case under(b, z):
				f(b)
			}
		}
	}
}

// under reports whether name is zone or below it (both FQDN, lowercase).
func under(name, zone string) bool {
	return zone == "." || name == zone || strings.HasSuffix(name, "."+zone)
}

func appendNew(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
