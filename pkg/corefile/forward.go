package corefile

import (
	"net/netip"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// forward: a route per zone.
func (c *converter) forward(s scope, d Directive) {
	if len(d.Args) < 2 {
		c.add(d.Where, d.Name, Dropped, "forward needs FROM and at least one TO")
		return
	}
	from := fqdn(d.Args[0])
	// The names it takes are in both FROM and the block's zones: a stub
	// domain ("zone { forward . ip }"), or the narrower of the two.
	var zones []string
	eachBlockZone([]string{from}, s, func(z string) { zones = append(zones, z) })
	if len(zones) == 0 {
		c.add(d.Where, d.Name, Dropped, "forward %s in the %s block takes no name: the block serves none of %s; CoreDNS never uses it either", d.Args[0], strings.Join(s.zones, " "), d.Args[0])
		return
	}
	r := v1alpha1.ForwardRoute{}
	t := forwardTLS{}
	file := ""
	for _, to := range d.Args[1:] {
		switch {
		case strings.HasPrefix(to, "tls://"):
			if up := t.upstream(c, d, to); up != "" {
				r.Upstreams = append(r.Upstreams, up)
			}
		case strings.HasPrefix(to, "https://"), strings.HasPrefix(to, "quic://"), strings.HasPrefix(to, "grpc://"):
			c.add(d.Where, d.Name, Dropped, "%s: no DNS over HTTPS, QUIC or gRPC to upstreams; workaround: the same resolver's DNS over TLS (tls://IP with tls_servername NAME), which public resolvers offer", to)
		case strings.HasPrefix(to, "/"):
			if file != "" {
				c.add(d.Where, d.Name, Dropped, "%s: a second resolv.conf (%s is the route's); workaround: list its nameservers as addresses", to, file)
				continue
			}
			file = to
			r.Upstreams = append(r.Upstreams, to)
		case c.pillars && strings.HasPrefix(to, "__PILLAR__"):
			r.Upstreams = append(r.Upstreams, to) // node-cache fills it in
		case !isAddr(strings.TrimPrefix(to, "dns://")):
			c.refuse(d.Where, d.Name, "not an IP address or file %q (a resolv.conf is an absolute path)", to)
			return
		default:
			r.Upstreams = append(r.Upstreams, strings.TrimPrefix(to, "dns://"))
		}
	}
	if len(r.Upstreams) == 0 {
		c.add(d.Where, d.Name, Dropped, "forward %s: no upstream left; its names are not forwarded", d.Args[0])
		return
	}
	done := []string{"upstreams " + strings.Join(r.Upstreams, " ")}
	for _, o := range d.Options {
		if o.Name == "tls" || o.Name == "tls_servername" {
			if !t.option(c, o) {
				return
			}
			continue
		}
		if note := c.forwardOption(&r, o); note != "" {
			done = append(done, note)
		}
	}
	if !t.route(c, d, &r) {
		return
	}
	if r.TLS != nil {
		done = append(done, "tls "+t.String())
	}
	for _, z := range zones {
		if i, dup := c.routes[z]; dup {
			c.add(d.Where, d.Name, Dropped, "a second route for %s (forward[%d] is first); CoreDNS refuses it too", z, i)
			continue
		}
		rz := r
		rz.Zone = strings.TrimSuffix(z, ".")
		if z == "." {
			rz.Zone = "."
		}
		c.routeWhere[rz.Zone] = d.Where
		if !s.main {
			c.blockRoutes[z] = true
		}
		c.routes[z] = len(c.cfg.Forward)
		c.cfg.Forward = append(c.cfg.Forward, rz)
		c.add(d.Where, d.Name, Converted, "forward route %s: %s", rz.Zone, strings.Join(done, ", "))
	}
}

// forwardOption converts one option; "" when it got a finding of its own.
func (c *converter) forwardOption(r *v1alpha1.ForwardRoute, o Option) string {
	one := len(o.Args) == 1
	switch {
	case o.Name == "except":
		r.Except = append(r.Except, o.Args...)
		return "except " + strings.Join(o.Args, " ")
	case o.Name == "force_tcp":
		r.ForceTCP = true
		return "forceTCP"
	case o.Name == "prefer_udp":
		r.PreferUDP = true
		return "preferUDP"
	case o.Name == "expire" && one:
		r.Expire = v1alpha1.Duration(o.Args[0])
		return "expire " + o.Args[0]
	case o.Name == "max_fails" && one:
		n := atoi(o.Args[0])
		r.MaxFails = &n
		return "maxFails " + o.Args[0]
	case o.Name == "health_check" && len(o.Args) >= 1:
		r.HealthCheck = v1alpha1.Duration(o.Args[0])
		if len(o.Args) > 1 {
			c.add(o.Where, "forward", Differs, "health_check %s: the probe is always \". IN NS\" with recursion desired", strings.Join(o.Args[1:], " "))
		}
		return "healthCheck " + o.Args[0]
	case o.Name == "policy" && one:
		r.Policy = o.Args[0]
		return "policy " + o.Args[0]
	case o.Name == "max_concurrent" && one:
		n := atoi(o.Args[0])
		if c.cfg.MaxConcurrent != 0 && c.cfg.MaxConcurrent != n {
			c.add(o.Where, "forward", Differs, "max_concurrent %d: one bound for every route (maxConcurrent %d)", n, c.cfg.MaxConcurrent)
			return ""
		}
		if n != v1alpha1.DefaultMaxConcurrent {
			c.cfg.MaxConcurrent = n
		}
		return "maxConcurrent " + o.Args[0]
	case o.Name == "next":
		c.add(o.Where, "forward", Dropped, "next %s: a failed forward is the answer; workaround: none", strings.Join(o.Args, " "))
		return ""
	case o.Name == "failover":
		c.add(o.Where, "forward", Dropped, "failover: an upstream's rcode is the answer; workaround: list only upstreams that agree")
		return ""
	case o.Name == "failfast_all_unhealthy_upstreams" && len(o.Args) == 0:
		if len(c.cfg.Forward) > 1 {
			c.add(o.Where, "forward", Differs, "failfast_all_unhealthy_upstreams: one setting for every route (failFastAllUnhealthy)")
		}
		c.cfg.FailFastAllUnhealthy = true
		return "failFastAllUnhealthy"
	}
	c.add(o.Where, "forward", Dropped, "%s %s: not supported", o.Name, strings.Join(o.Args, " "))
	return ""
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return -1
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// inZone reports whether name (FQDN) is zone or under it.
func inZone(name, zone string) bool {
	return zone == "." || name == zone || strings.HasSuffix(name, "."+zone)
}

// isAddr: an IP address, with a port or not (CoreDNS's HostPortOrFile,
// files aside).
func isAddr(s string) bool {
	if _, err := netip.ParseAddrPort(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil
}

// forwardTLS gathers what a forward directive says about TLS: its tls://
// upstreams, their per-upstream server name (tls://IP%NAME), tls and
// tls_servername.
type forwardTLS struct {
	upstreams  int
	perName    string // the per-upstream server name, of every tls:// upstream
	perWhere   string // the upstream that set it
	serverName string // tls_servername
	nameWhere  string
	files      v1alpha1.ForwardTLS // tls CERT KEY CA
	set        bool                // a tls option was given
	unnamed    int                 // tls:// upstreams without %NAME
}

// upstream converts a tls:// target to "tls://ip[:port]", or "" when it is
// dropped with a finding.
func (t *forwardTLS) upstream(c *converter, d Directive, to string) string {
	host, name := splitServerName(strings.TrimPrefix(to, "tls://"))
	if !isAddr(host) {
		c.add(d.Where, d.Name, Dropped, "%s: a host name, which CoreDNS resolves at start; workaround: its IP address, with tls_servername %s", to, host)
		return ""
	}
	if name == "" {
		t.unnamed++
	} else {
		switch {
		case t.perName == "":
			t.perName, t.perWhere = name, to
		case !strings.EqualFold(name, t.perName):
			c.add(d.Where, d.Name, Dropped, "%s: server name %s, where %s has %s: one server name per route; workaround: a route per server name (a zone each)", to, name, t.perWhere, t.perName)
			return ""
		}
	}
	t.upstreams++
	return "tls://" + host
}

// splitServerName splits "IP%NAME[:PORT]" into "IP[:PORT]" and NAME, as
// CoreDNS's splitZone ("[IPv6%NAME]:PORT" too); name is "" without '%'.
func splitServerName(host string) (addr, name string) {
	i := strings.LastIndex(host, "%")
	if i < 0 {
		return host, ""
	}
	addr, name = host[:i], host[i+1:]
	if strings.HasPrefix(addr, "[") {
		addr += "]"
	}
	if j := strings.LastIndex(name, ":"); j >= 0 {
		addr += name[j:]
		name = strings.TrimSuffix(name[:j], "]")
	}
	return addr, name
}

// option reads tls or tls_servername; false when CoreDNS refuses it.
func (t *forwardTLS) option(c *converter, o Option) bool {
	if o.Name == "tls_servername" {
		if len(o.Args) != 1 {
			c.refuse(o.Where, "forward", "tls_servername needs one NAME")
			return false
		}
		t.serverName, t.nameWhere = strings.TrimSuffix(o.Args[0], "."), o.Where
		return true
	}
	switch a := o.Args; len(a) {
	case 0: // the system's roots
	case 1:
		t.files.CAFile = a[0]
	case 2:
		t.files.CertFile, t.files.KeyFile = a[0], a[1]
	case 3:
		t.files.CertFile, t.files.KeyFile, t.files.CAFile = a[0], a[1], a[2]
	default:
		c.refuse(o.Where, "forward", "tls takes at most three arguments (CERT KEY CA), got %d", len(a))
		return false
	}
	t.set = true
	return true
}

// route sets r.TLS; false when the directive is refused.
func (t *forwardTLS) route(c *converter, d Directive, r *v1alpha1.ForwardRoute) bool {
	if t.serverName != "" && t.perName != "" {
		c.refuse(d.Where, d.Name, "both forward (%q) and per-upstream (%q in %s) TLS server names are set", t.serverName, t.perName, t.perWhere)
		return false
	}
	if t.upstreams == 0 {
		if t.set || t.serverName != "" {
			c.add(d.Where, d.Name, Converted, "tls, tls_servername: no tls:// upstream to use them; CoreDNS ignores them too")
		}
		return true
	}
	name := t.serverName
	if name == "" {
		name = t.perName
	}
	if t.perName != "" && t.unnamed > 0 {
		c.add(d.Where, d.Name, Differs, "tls:// upstreams without %%NAME are verified as %s too, where CoreDNS verifies their IP address", t.perName)
	}
	if name != "" && !isHostName(name) {
		c.add(t.nameWhere, "forward", Dropped, "tls_servername %s: not a host name; the tls:// upstreams are verified by their IP address", name)
		name = ""
	}
	tc := t.files
	tc.ServerName = name
	if tc != (v1alpha1.ForwardTLS{}) {
		r.TLS = &tc
	}
	return true
}

// String is the TLS settings for the report.
func (t *forwardTLS) String() string {
	var parts []string
	if t.serverName != "" || t.perName != "" {
		parts = append(parts, "serverName "+t.serverName+t.perName)
	}
	if t.files.CAFile != "" {
		parts = append(parts, "caFile "+t.files.CAFile)
	}
	if t.files.CertFile != "" {
		parts = append(parts, "certFile "+t.files.CertFile, "keyFile "+t.files.KeyFile)
	}
	return strings.Join(parts, " ")
}

// isHostName: dot-separated labels of letters, digits and inner '-'.
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
