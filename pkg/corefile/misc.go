package corefile

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

func (c *converter) log(s scope, d Directive) {
	classes := map[string]bool{}
	for _, o := range d.Options {
		if o.Name == "class" {
			for _, a := range o.Args {
				classes[a] = true
			}
		}
	}
	// "class error" (and denial) only: CoreDNS logs failures, which serve
	// logs anyway; every query is not logged.
	if len(classes) > 0 && !classes["all"] && !classes["success"] && !classes["denial"] && len(d.Options) == 1 {
		c.add(d.Where, d.Name, Converted, "class %s: errors are always logged; logQueries stays off", strings.Join(d.Options[0].Args, " "))
		return
	}
	c.cfg.LogQueries = true
	switch {
	case !s.main:
		c.add(d.Where, d.Name, Differs, "in the %s block: logQueries logs every query, not only the zone's", strings.Join(s.zones, " "))
	case len(d.Args) > 0 && !(len(d.Args) == 1 && d.Args[0] == ".") || len(d.Options) > 0:
		c.add(d.Where, d.Name, Differs, "logQueries logs every query in its own format; names, classes and formats are not filtered")
	default:
		c.add(d.Where, d.Name, Converted, "logQueries: every query is logged (client, name, type, rcode, duration)")
	}
}

func (c *converter) health(_ scope, d Directive) {
	for _, o := range d.Options {
		if o.Name == "lameduck" && len(o.Args) == 1 {
			c.cfg.Lameduck = v1alpha1.Duration(o.Args[0])
			continue
		}
		c.add(o.Where, d.Name, Dropped, "%s: not supported", o.Name)
	}
	if c.cfg.Lameduck == "" {
		// CoreDNS's health has no lameduck unless asked.
		c.cfg.Lameduck = "0s"
	}
	c.add(d.Where, d.Name, Differs, "liveness is /healthz on metricsListen, not %s/health; lameduck %s", orDefault(d.Args, ":8080"), c.cfg.Lameduck)
}

func (c *converter) prometheus(_ scope, d Directive) {
	addr := orDefault(d.Args, "localhost:9153")
	if h, p, err := net.SplitHostPort(addr); err == nil && h == "localhost" {
		addr = net.JoinHostPort("127.0.0.1", p)
	}
	c.cfg.MetricsListen = addr
	c.cfg.CoreDNSMetrics = true
	c.add(d.Where, d.Name, Converted, "metricsListen %s, coreDNSMetrics: CoreDNS's request, cache and forward metrics (coredns_*) keep their names beside dnsconfigurer_*, so its dashboards and alerts keep working (docs/reference.md)", addr)
}

func orDefault(args []string, def string) string {
	if len(args) > 0 {
		return args[0]
	}
	return def
}

func (c *converter) loadbalance(_ scope, d Directive) {
	if len(d.Args) > 0 && d.Args[0] != "round_robin" {
		c.add(d.Where, d.Name, Dropped, "loadbalance %s: only round_robin; workaround: Service endpoints carry the weight", d.Args[0])
		return
	}
	t := true
	c.cfg.Loadbalance = &t
	c.add(d.Where, d.Name, Converted, "loadbalance: A, AAAA and SRV records rotate")
}

func (c *converter) bind(s scope, d Directive) {
	if !s.main {
		c.add(d.Where, d.Name, Differs, "bind in the %s block: the addresses serve every name", strings.Join(s.zones, " "))
	}
	var listen []string
	for _, a := range d.Args {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			c.add(d.Where, d.Name, Dropped, "%s: not an IP address (interface names are not supported); workaround: list its addresses", a)
			continue
		}
		listen = append(listen, netip.AddrPortFrom(ip, uint16(atoi(s.port))).String())
	}
	if len(listen) == 0 {
		return
	}
	if s.main {
		c.cfg.Listen = listen
	}
	c.add(d.Where, d.Name, Converted, "listen %s", strings.Join(listen, " "))
}

// Rewrite match types; the default of "rewrite name FROM TO" is exact.
var matches = []string{"exact", "prefix", "suffix", "substring", "regex"}

// rewrite follows CoreDNS's rule grammar ([continue|stop] TYPE ...; the
// block form's lines are read as one rule) and refuses what its setup
// refuses. Name rules convert; the other types have no equivalent.
func (c *converter) rewrite(_ scope, d Directive) {
	args := d.Args
	if len(args) < 2 {
		for _, o := range d.Options {
			args = append(append(args, o.Name), o.Args...)
		}
	}
	if len(args) == 0 {
		c.refuse(d.Where, d.Name, "no rule type specified for rewrite")
		return
	}
	mode, start := "stop", 1
	ruleType := strings.ToLower(args[0])
	if ruleType == "continue" || ruleType == "stop" {
		if len(args) < 2 {
			c.refuse(d.Where, d.Name, "%s rule must begin with a rule type", ruleType)
			return
		}
		mode, start, ruleType = ruleType, 2, strings.ToLower(args[1])
	}
	switch ruleType {
	case "answer":
		c.refuse(d.Where, d.Name, "response rewrites must begin with a name rule")
	case "name":
		c.nameRule(d, mode == "continue", args[start:])
	case "class", "type":
		if len(args[start:]) != 2 {
			c.refuse(d.Where, d.Name, "%s rules must have exactly two arguments", ruleType)
			return
		}
		c.add(d.Where, d.Name, Dropped, "rewrite %s: only name rules; workaround: none in serve, keep a CoreDNS in front for it", ruleType)
	case "edns0", "ttl", "cname", "rcode":
		c.add(d.Where, d.Name, Dropped, "rewrite %s: only name rules; workaround: none in serve, keep a CoreDNS in front for it", ruleType)
	default:
		c.refuse(d.Where, d.Name, "invalid rule type %q", args[start-1])
	}
}

// subexp finds the {N} references of a rewrite's replacement.
var subexp = regexp.MustCompile(`\{(\d+)\}`)

// validPattern is CoreDNS's isValidRegexPattern: from compiles, and to
// refers to no more groups than it has.
func validPattern(from, to string) error {
	re, err := regexp.Compile(from)
	if err != nil {
		return fmt.Errorf("invalid regex matching pattern: %s", from)
	}
	used := 0
	for _, m := range subexp.FindAllStringSubmatch(to, -1) {
		used = max(used, atoi(m[1]))
	}
	if used > re.NumSubexp() {
		return fmt.Errorf("the rewrite regex pattern (%s) uses more subexpressions than its corresponding matching regex pattern (%s)", to, from)
	}
	return nil
}

// nameRule: [MATCH] FROM TO [answer auto | answer name FROM TO | answer
// value FROM TO]..., as CoreDNS's newNameRule reads it: a match type is
// required when answer rules follow.
func (c *converter) nameRule(d Directive, cont bool, args []string) {
	if len(args) < 2 {
		c.refuse(d.Where, d.Name, "too few arguments for a name rule")
		return
	}
	r := v1alpha1.Rewrite{Match: "exact", Continue: cont, From: args[0], To: args[1]}
	if len(args) >= 3 {
		r.Match, r.From, r.To = strings.ToLower(args[0]), args[1], args[2]
	}
	if !contains(matches, r.Match) {
		c.refuse(d.Where, d.Name, "name rule supports only exact, prefix, suffix, substring, and regex name matching, received: %s", r.Match)
		return
	}
	from, to := r.From, r.To
	if r.Match == "exact" {
		from, to = to, from // CoreDNS checks them this way round
	}
	if r.Match == "exact" || r.Match == "regex" {
		if err := validPattern(from, to); err != nil {
			c.refuse(d.Where, d.Name, "%v", err)
			return
		}
	}
	status, note := Converted, "rewrite "+r.Match+" "+r.From+" → "+r.To
	if len(args) > 3 {
		var ok bool
		if status, note, ok = c.answerRules(d, &r, args[3:], status, note); !ok {
			return
		}
	}
	if r.Match == "regex" && r.AnswerFrom == "" {
		status, note = Differs, note+"; the answer gets the question's name back (CoreDNS needs answer name for that)"
	}
	c.entryAt[fmt.Sprintf("rewrites[%d]", len(c.cfg.Rewrites))] = d.Where
	c.cfg.Rewrites = append(c.cfg.Rewrites, r)
	c.add(d.Where, d.Name, status, "%s", note)
}

// answerRules reads a name rule's answer rules as CoreDNS's
// parseAnswerRules does; ok is false when it refused them.
func (c *converter) answerRules(d Directive, r *v1alpha1.Rewrite, args []string, status Status, note string) (Status, string, bool) {
	if len(args) < 2 {
		c.refuse(d.Where, d.Name, "invalid arguments for %s rule", r.Match)
		return status, note, false
	}
	auto, names := false, 0
	for i, last := 0, ""; i < len(args); {
		if last == "" && args[i] != "answer" {
			c.refuse(d.Where, d.Name, "exceeded the number of arguments for a non-answer rule argument for %s rule", r.Match)
			return status, note, false
		}
		if args[i] == "answer" {
			i++
		}
		if i == len(args) {
			c.refuse(d.Where, d.Name, "type missing for answer rule for %s rule", r.Match)
			return status, note, false
		}
		last, i = args[i], i+1
		switch last {
		case "auto":
			auto = true
			continue
		case "name", "value":
		default:
			c.refuse(d.Where, d.Name, "invalid type %q for answer rule for %s rule", last, r.Match)
			return status, note, false
		}
		if len(args)-i < 2 {
			c.refuse(d.Where, d.Name, "%s answer rule for %s rule: 2 arguments required", last, r.Match)
			return status, note, false
		}
		if err := validPattern(args[i], args[i+1]); err != nil {
			c.refuse(d.Where, d.Name, "%s answer rule for %s rule: %v", last, r.Match, err)
			return status, note, false
		}
		switch {
		case last == "value":
			status, note = Differs, note+"; answer value is not rewritten (CNAME and SRV targets keep their names)"
		case names == 0:
			r.AnswerFrom, r.AnswerTo = args[i], args[i+1]
			names++
		default:
			status, note = Differs, note+"; only the first answer name rule applies"
			names++
		}
		i += 2
	}
	if auto && names > 0 {
		c.refuse(d.Where, d.Name, "auto name answer rule cannot be combined with explicit name anwer rules")
		return status, note, false
	}
	return status, note, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
