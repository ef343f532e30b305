package corefile

import (
	"net"
	"net/netip"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

func (c *converter) log(_ scope, d Directive) {
	c.cfg.LogQueries = true
	if len(d.Args) > 0 && !(len(d.Args) == 1 && d.Args[0] == ".") || len(d.Options) > 0 {
		c.add(d.Where, d.Name, Differs, "logQueries logs every query in its own format; names, classes and formats are not filtered")
		return
	}
	c.add(d.Where, d.Name, Converted, "logQueries: every query is logged (client, name, type, rcode, duration)")
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

// rewrite: name rules; other rules have no equivalent.
func (c *converter) rewrite(_ scope, d Directive) {
	args := d.Args
	cont := false
	if len(args) > 0 && (args[0] == "continue" || args[0] == "stop") {
		cont, args = args[0] == "continue", args[1:]
	}
	if len(args) == 0 && len(d.Options) > 0 {
		// The block form: "rewrite stop { name ...; answer name ... }".
		for _, o := range d.Options {
			args = append(append(args, o.Name), o.Args...)
		}
	}
	if len(args) == 0 || args[0] != "name" {
		kind := "(none)"
		if len(args) > 0 {
			kind = args[0]
		}
		c.add(d.Where, d.Name, Dropped, "rewrite %s: only name rules; workaround: none in serve, keep a CoreDNS in front for it", kind)
		return
	}
	args = args[1:]
	r := v1alpha1.Rewrite{Match: "exact", Continue: cont}
	if len(args) > 0 && contains(matches, args[0]) {
		r.Match, args = args[0], args[1:]
	}
	if len(args) < 2 {
		c.add(d.Where, d.Name, Dropped, "rewrite name: needs FROM and TO")
		return
	}
	r.From, r.To, args = args[0], args[1], args[2:]
	status, note := Converted, "rewrite "+r.Match+" "+r.From+" → "+r.To
	for len(args) >= 2 && args[0] == "answer" {
		switch {
		case args[1] == "auto":
			args = args[2:]
		case args[1] == "name" && len(args) >= 4:
			r.AnswerFrom, r.AnswerTo = args[2], args[3]
			args = args[4:]
		case args[1] == "value" && len(args) >= 4:
			status, note = Differs, note+"; answer value is not rewritten (CNAME and SRV targets keep their names)"
			args = args[4:]
		default:
			args = nil
		}
	}
	if r.Match == "regex" && r.AnswerFrom == "" {
		status, note = Differs, note+"; the answer gets the question's name back (CoreDNS needs answer name for that)"
	}
	c.cfg.Rewrites = append(c.cfg.Rewrites, r)
	c.add(d.Where, d.Name, status, "%s", note)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
