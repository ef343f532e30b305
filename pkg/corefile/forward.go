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
	zones := []string{from}
	if !s.main {
		// The names it takes are in both FROM and the block's zones: a
		// stub domain ("zone { forward . ip }"), or the narrower of the two.
		zones = nil
		for _, z := range s.zones {
			switch {
			case inZone(from, z):
				zones = append(zones, from)
			case inZone(z, from):
				zones = append(zones, z)
			}
		}
		if len(zones) == 0 {
			c.add(d.Where, d.Name, Dropped, "forward %s in the %s block takes no name: the block serves none of %s; CoreDNS never uses it either", d.Args[0], strings.Join(s.zones, " "), d.Args[0])
			return
		}
	}
	r := v1alpha1.ForwardRoute{}
	for _, to := range d.Args[1:] {
		switch {
		case strings.HasPrefix(to, "tls://"):
			c.add(d.Where, d.Name, Dropped, "%s: no DNS over TLS to upstreams (a documented gap); workaround: a local forwarder that speaks TLS, as upstream", to)
			return
		case strings.HasPrefix(to, "/"):
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
	done := []string{"upstreams " + strings.Join(r.Upstreams, " ")}
	for _, o := range d.Options {
		if note := c.forwardOption(&r, o); note != "" {
			done = append(done, note)
		}
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
	case o.Name == "tls" || o.Name == "tls_servername":
		c.add(o.Where, "forward", Dropped, "%s: no DNS over TLS to upstreams (a documented gap); workaround: a local forwarder that speaks TLS, as upstream", o.Name)
		return ""
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
