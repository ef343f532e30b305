package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Rewrite match types (Rewrite.Match), CoreDNS's "rewrite name" types.
const (
	RewriteExact     = "exact"
	RewritePrefix    = "prefix"
	RewriteSuffix    = "suffix"
	RewriteSubstring = "substring"
	RewriteRegex     = "regex"
)

// DefaultRewriteMatch is the match type of a rule that names none, as
// CoreDNS assumes for `rewrite name FROM TO`.
const DefaultRewriteMatch = RewriteExact

// MaxRewrites bounds the rewrite rules: each query is compared with every
// rule until one matches.
const MaxRewrites = 64

// maxRewritePattern bounds a regex pattern (CoreDNS refuses patterns over
// 10000 characters; a name has at most 255).
const maxRewritePattern = 1024

// placeholder is a regex group reference in a replacement: {0}..{9}.
var placeholder = regexp.MustCompile(`\{([0-9]+)\}`)

func (r *Rewrite) setDefaults() {
	setString(&r.Match, DefaultRewriteMatch)
}

// validateRewrites checks the rules, each field by its path
// (rewrites[i].from).
func (c *ServerConfiguration) validateRewrites(e *fieldErrors) {
	c.validateClusterList(e, "rewrites", len(c.Rewrites), MaxRewrites, "rules", "the cluster DNS rewrites", func(i int, prefix string) {
		c.Rewrites[i].validate(e, prefix)
	})
}

func (r *Rewrite) validate(e *fieldErrors, prefix string) {
	groups := -1 // the regex's groups; -1: no regex
	switch r.Match {
	case RewriteExact:
		checkRequired(e, prefix+"from", r.From, func(s string) error { _, err := normalizeName(s); return err })
		checkRequired(e, prefix+"to", r.To, func(s string) error { _, err := normalizeName(s); return err })
	case RewritePrefix, RewriteSuffix, RewriteSubstring:
		checkRequired(e, prefix+"from", r.From, checkNamePart)
		checkRequired(e, prefix+"to", r.To, checkNamePart)
	case RewriteRegex:
		if re, ok := checkPattern(e, prefix+"from", r.From); ok {
			groups = re.NumSubexp()
		}
		checkRequired(e, prefix+"to", r.To, func(s string) error { return checkReplacement(s, groups) })
	default:
		e.add(prefix+"match", "%q: must be %q, %q, %q, %q or %q", r.Match,
			RewriteExact, RewritePrefix, RewriteSuffix, RewriteSubstring, RewriteRegex)
	}
	switch {
	case r.AnswerFrom == "" && r.AnswerTo == "":
	case r.AnswerFrom == "":
		e.add(prefix+"answerFrom", "required with answerTo")
	case r.AnswerTo == "":
		e.add(prefix+"answerTo", "required with answerFrom")
	default:
		ag := -1
		if re, ok := checkPattern(e, prefix+"answerFrom", r.AnswerFrom); ok {
			ag = re.NumSubexp()
		}
		checkRequired(e, prefix+"answerTo", r.AnswerTo, func(s string) error { return checkReplacement(s, ag) })
	}
}

// checkRequired adds path's error when s is empty or check refuses it.
func checkRequired(e *fieldErrors, path, s string, check func(string) error) {
	if s == "" {
		e.add(path, "required")
		return
	}
	if err := check(s); err != nil {
		e.add(path, "%q: %v", s, err)
	}
}

// checkPattern compiles a regex field; false when it is empty or invalid.
func checkPattern(e *fieldErrors, path, s string) (*regexp.Regexp, bool) {
	if s == "" {
		e.add(path, "required")
		return nil, false
	}
	if len(s) > maxRewritePattern {
		e.add(path, "%d characters: at most %d", len(s), maxRewritePattern)
		return nil, false
	}
	re, err := regexp.Compile(s)
	if err != nil {
		e.add(path, "%q: not a regular expression: %v", s, err)
		return nil, false
	}
	return re, true
}

// checkNamePart accepts a part of a domain name: letters, digits, '-',
// '_' and dots, no empty label inside, at most 253 characters.
func checkNamePart(s string) error {
	if len(s) > 253 {
		return fmt.Errorf("longer than 253 characters")
	}
	if strings.Contains(s, "..") {
		return fmt.Errorf("has an empty label")
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) > 63 {
			return fmt.Errorf("has a label longer than 63 characters")
		}
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("has the character %q", c)
		}
	}
	return nil
}

// checkReplacement accepts a regex replacement: a name part whose {N}
// refer to groups of the pattern ({0} is the whole match, {1}..{9} its
// groups). groups < 0: the pattern is invalid, only the text is checked.
func checkReplacement(s string, groups int) error {
	for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
		n, _ := strconv.Atoi(m[1])
		switch {
		case n > 9:
			return fmt.Errorf("%s: groups are {0} to {9}", m[0])
		case groups >= 0 && n > groups:
			return fmt.Errorf("%s: the pattern has %d groups", m[0], groups)
		}
	}
	return checkNamePart(placeholder.ReplaceAllString(s, "x"))
}

// Typed accessors of a validated rule, in the form CoreDNS's rewrite
// plugin normalizes them to.

// FromValue is from as it is compared with the lowercase question name:
// lowercase with a trailing dot (the regex as written).
func (r *Rewrite) FromValue() string {
	if r.Match == RewriteRegex {
		return r.From
	}
	return fqdnLower(r.From)
}

// ToValue is to, lowercase with a trailing dot.
func (r *Rewrite) ToValue() string { return fqdnLower(r.To) }

// AnswerToValue is answerTo, lowercase with a trailing dot ("" when unset).
func (r *Rewrite) AnswerToValue() string {
	if r.AnswerTo == "" {
		return ""
	}
	return fqdnLower(r.AnswerTo)
}

// AnswerAuto reports "answer auto": no answerFrom and answerTo, so the
// answer's names are mapped back from the rewritten question.
func (r *Rewrite) AnswerAuto() bool { return r.AnswerFrom == "" && r.AnswerTo == "" }

// fqdnLower is s lowercase with a trailing dot (CoreDNS's Name.Normalize).
func fqdnLower(s string) string {
	s = strings.ToLower(s)
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
