package clusterdns

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// rewriter renames questions before they are answered and the answers'
// names back, as CoreDNS 1.15's "rewrite name" (plugin/rewrite name.go,
// reverter.go). Rules run in order on the lowercase question name; a rule
// that matches ends the run unless it continues.
type rewriter struct {
	rules []rewriteRule
}

// rewriteRule is one compiled v1alpha1.Rewrite.
type rewriteRule struct {
	match    string
	from, to string         // normalized (v1alpha1.Rewrite.FromValue, ToValue)
	re       *regexp.Regexp // match regex
	auto     bool           // "answer auto": always for exact, as CoreDNS
	cont     bool
	// answer is "answer name": a regex over the answer's owner names.
	answer   *regexp.Regexp
	answerTo string
}

// Kinds of the steps that rewrite an answer back.
const (
	stepRemap  = iota // a name equal to from, or below it, gets to instead
	stepSuffix        // a name ending in from ends in to instead
	stepRegex         // a name re matches becomes to, its groups filled in
)

// revertStep rewrites the names of an answer back. values also rewrites
// the names records point to (CNAME, SRV, MX, NS, DNAME, NAPTR, PTR
// targets and the SOA's primary server), as CoreDNS's auto mode does.
type revertStep struct {
	kind     int
	from, to string
	re       *regexp.Regexp
	values   bool
}

// reversal undoes a run of rules on a reply: the steps of every rule that
// matched, applied to each record in reverse order.
type reversal struct {
	steps []revertStep
	// names are the names the question was rewritten to: a cached reply
	// depends on them.
	names []string
}

// WithRewrites renames questions as rules say (validated) before they are
// answered, zone and forwarded names alike, and the answers back: the
// reply carries the question as asked. An invalid pattern is an error.
func WithRewrites(rules []v1alpha1.Rewrite) (Option, error) {
	rw, err := newRewriter(rules)
	if err != nil {
		return nil, err
	}
	return func(h *Handler) { h.rw = rw }, nil
}

func newRewriter(rules []v1alpha1.Rewrite) (*rewriter, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	rw := &rewriter{}
	for i := range rules {
		r := &rules[i]
		match := r.Match
		if match == "" {
			match = v1alpha1.DefaultRewriteMatch
		}
		rr := rewriteRule{match: match, from: r.FromValue(), to: r.ToValue(), auto: r.AnswerAuto() || match == v1alpha1.RewriteExact, cont: r.Continue}
		var err error
		switch match {
		case v1alpha1.RewriteExact, v1alpha1.RewritePrefix, v1alpha1.RewriteSuffix, v1alpha1.RewriteSubstring:
		case v1alpha1.RewriteRegex:
			if rr.re, err = regexp.Compile(r.From); err != nil {
				return nil, fmt.Errorf("rewrites[%d].from: %w", i, err)
			}
		default:
			return nil, fmt.Errorf("rewrites[%d].match: %q: unknown", i, r.Match)
		}
		if r.AnswerFrom != "" {
			if rr.answer, err = regexp.Compile(r.AnswerFrom); err != nil {
				return nil, fmt.Errorf("rewrites[%d].answerFrom: %w", i, err)
			}
			rr.answerTo = r.AnswerToValue()
		}
		rw.rules = append(rw.rules, rr)
	}
	return rw, nil
}

// rewrite runs the rules on lname, a lowercase name with its dot. It
// returns how to undo it, which holds the new name (reversal.name), or nil
// when no rule matched. A rule that makes an invalid name is an error (the
// query is SERVFAIL, as CoreDNS's).
func (rw *rewriter) rewrite(lname string) (*reversal, error) {
	cur := lname
	var rev *reversal
	for i := range rw.rules {
		r := &rw.rules[i]
		next, ok := r.apply(cur)
		if !ok {
			continue
		}
		if _, valid := dns.IsDomainName(next); !valid {
			return nil, fmt.Errorf("invalid name after rewrite: %q", next)
		}
		if rev == nil {
			rev = &reversal{}
		}
		rev.steps = r.revert(rev.steps, cur, next)
		rev.names = append(rev.names, lowerFQDN(next))
		cur = next
		if !r.cont {
			break
		}
	}
	return rev, nil
}

// name is the name the rules made, lowercase with its dot.
func (rv *reversal) name() string { return rv.names[len(rv.names)-1] }

// apply rewrites the lowercase name; false when the rule does not match.
func (r *rewriteRule) apply(name string) (string, bool) {
	switch r.match {
	case v1alpha1.RewriteExact:
		if name == r.from {
			return r.to, true
		}
	case v1alpha1.RewritePrefix:
		if after, ok := strings.CutPrefix(name, r.from); ok {
			return r.to + after, true
		}
	case v1alpha1.RewriteSuffix:
		if before, ok := strings.CutSuffix(name, r.from); ok {
			return before + r.to, true
		}
	case v1alpha1.RewriteSubstring:
		if strings.Contains(name, r.from) {
			return strings.ReplaceAll(name, r.from, r.to), true
		}
	case v1alpha1.RewriteRegex:
		if groups := r.re.FindStringSubmatch(name); groups != nil {
			return fillGroups(r.to, groups), true
		}
	}
	return "", false
}

// revert appends the steps that undo the rule's rewrite of orig to
// rewritten: CoreDNS's auto steps (names and values), then "answer name".
// Suffix rules undo by the suffixes swapped, the others by mapping the
// rewritten name (and the names below it) back to orig.
func (r *rewriteRule) revert(steps []revertStep, orig, rewritten string) []revertStep {
	if r.auto {
		if r.match == v1alpha1.RewriteSuffix {
			steps = append(steps, revertStep{kind: stepSuffix, from: r.to, to: r.from, values: true})
		} else {
			steps = append(steps, revertStep{kind: stepRemap, from: rewritten, to: orig, values: true})
		}
	}
	if r.answer != nil {
		steps = append(steps, revertStep{kind: stepRegex, re: r.answer, to: r.answerTo})
	}
	return steps
}

// fillGroups replaces {0}, {1}, ... in repl with the groups.
func fillGroups(repl string, groups []string) string {
	for i, g := range groups {
		repl = strings.ReplaceAll(repl, "{"+strconv.Itoa(i)+"}", g)
	}
	return repl
}

// rewriteString is the step applied to one name; s itself when it does
// not apply.
func (s *revertStep) rewriteString(name string) string {
	switch s.kind {
	case stepRemap:
		if name == s.from {
			return s.to
		}
		if i := len(name) - len(s.from); i > 0 && name[i-1] == '.' && name[i:] == s.from {
			return name[:i] + s.to
		}
	case stepSuffix:
		if before, ok := strings.CutSuffix(name, s.from); ok {
			return before + s.to
		}
	case stepRegex:
		if groups := s.re.FindStringSubmatch(name); groups != nil {
			return fillGroups(s.to, groups)
		}
	}
	return name
}

// section returns rrs with the steps applied, in a new slice when a record
// changed (rrs and its records may be shared: changed records are copies).
func (rv *reversal) section(rrs []dns.RR) ([]dns.RR, error) {
	var out []dns.RR
	for i, rr := range rrs {
		c, err := rv.record(rr)
		if err != nil {
			return nil, err
		}
		if c != rr {
			if out == nil {
				out = slices.Clone(rrs)
			}
			out[i] = c
		}
	}
	if out == nil {
		return rrs, nil
	}
	return out, nil
}

// record applies the steps, last rule's first, to rr's owner and, where
// they do, to its target; rr when nothing changed; an invalid name errs.
func (rv *reversal) record(rr dns.RR) (dns.RR, error) {
	if _, ok := rr.(*dns.OPT); ok {
		return rr, nil
	}
	name, value := rr.Header().Name, ""
	field := valueField(rr)
	if field != nil {
		value = *field
	}
	newName, newValue := name, value
	for i := len(rv.steps) - 1; i >= 0; i-- {
		s := &rv.steps[i]
		newName = s.rewriteString(newName)
		if s.values && newValue != "" {
			newValue = s.rewriteString(newValue)
		}
	}
	if newName == name && newValue == value {
		return rr, nil
	}
	for _, n := range [...]string{newName, newValue} {
		if _, valid := dns.IsDomainName(n); n != "" && !valid {
			return nil, fmt.Errorf("invalid name after rewriting the answer back: %q", n)
		}
	}
	c := dns.Copy(rr)
	c.Header().Name = newName
	if newValue != value {
		*valueField(c) = newValue
	}
	return c, nil
}

// msg undoes the rewrite on every section of a reply; the question is the
// caller's to restore. After an error m is half done: SERVFAIL it.
func (rv *reversal) msg(m *dns.Msg) error {
	return rv.sections([...]*[]dns.RR{&m.Answer, &m.Ns, &m.Extra})
}

// result undoes the rewrite on a Result.
func (rv *reversal) result(r Result) (Result, error) {
	if err := rv.sections([...]*[]dns.RR{&r.Answer, &r.Ns, &r.Extra}); err != nil {
		return Result{}, err
	}
	r.Answer, r.Ns, r.Extra = clip(r.Answer), clip(r.Ns), clip(r.Extra)
	r.deps = append(slices.Clip(r.deps), rv.names...)
	return r, nil
}

// sections applies section to each of secs in place.
func (rv *reversal) sections(secs [3]*[]dns.RR) error {
	for _, sec := range secs {
		rrs, err := rv.section(*sec)
		if err != nil {
			return err
		}
		*sec = rrs
	}
	return nil
}

// valueField is the name rr points to, for the types CoreDNS's value
// rewrite knows (nil for the others).
func valueField(rr dns.RR) *string {
	switch v := rr.(type) {
	case *dns.CNAME:
		return &v.Target
	case *dns.SRV:
		return &v.Target
	case *dns.MX:
		return &v.Mx
	case *dns.NS:
		return &v.Ns
	case *dns.DNAME:
		return &v.Target
	case *dns.NAPTR:
		return &v.Replacement
	case *dns.SOA:
		return &v.Ns
	case *dns.PTR:
		return &v.Ptr
	}
	return nil
}
