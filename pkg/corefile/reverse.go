package corefile

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// cidrZone reads a zone written as a CIDR ("10.0.0.0/24"), as CoreDNS's
// plugin.SplitHostPort does: ok is false when z is no CIDR. A CIDR that
// starts with ':' or is "0…:…" is invalid there: CoreDNS's kubernetes
// ignores it without a word (bad).
func cidrZone(z string) (p netip.Prefix, ok, bad bool) {
	z = strings.TrimSuffix(z, ".")
	if _, _, err := net.ParseCIDR(z); err != nil {
		return netip.Prefix{}, false, false
	}
	if z[0] == ':' || z[0] == '0' && strings.Contains(z, ":") {
		return netip.Prefix{}, true, true
	}
	p, err := netip.ParsePrefix(z)
	if err != nil {
		return netip.Prefix{}, false, false
	}
	return p.Masked(), true, false
}

// splitCIDR is CoreDNS's cidr.Split: p as the networks on a reverse
// name boundary (8 bits for IPv4, 4 for IPv6) that together make it, the
// mask rounded up. A /12 is sixteen /16s; at most 128 networks.
func splitCIDR(p netip.Prefix) []netip.Prefix {
	step := 8
	if p.Addr().Is6() {
		step = 4
	}
	if p.Bits()%step == 0 {
		return []netip.Prefix{p}
	}
	bits := (p.Bits()/step + 1) * step
	n := 1 << (bits - p.Bits())
	out := make([]netip.Prefix, 0, n)
	a := p.Addr()
	for range n {
		out = append(out, netip.PrefixFrom(a, bits))
		a = nextNet(a, bits)
	}
	return out
}

// nextNet is the address of the network of length bits after a's.
func nextNet(a netip.Addr, bits int) netip.Addr {
	b := a.AsSlice()
	i := (bits - 1) / 8
	inc := byte(1) << (7 - (bits-1)%8)
	for ; i >= 0; i-- {
		b[i] += inc
		if b[i] != 0 {
			break
		}
		inc = 1
	}
	n, _ := netip.AddrFromSlice(b)
	return n
}

// reverseZoneName is the reverse zone of a network on a reverse name
// boundary: 10.0.0.0/24 is "0.0.10.in-addr.arpa.", fd00::/16
// "0.0.d.f.ip6.arpa.".
func reverseZoneName(p netip.Prefix) string {
	var labels []string
	b := p.Addr().AsSlice()
	if p.Addr().Is4() {
		for i := p.Bits()/8 - 1; i >= 0; i-- {
			labels = append(labels, fmt.Sprint(b[i]))
		}
		return strings.Join(append(labels, "in-addr.arpa."), ".")
	}
	for i := p.Bits()/4 - 1; i >= 0; i-- {
		nib := b[i/2] >> 4
		if i%2 == 1 {
			nib = b[i/2] & 0xf
		}
		labels = append(labels, fmt.Sprintf("%x", nib))
	}
	return strings.Join(append(labels, "ip6.arpa."), ".")
}

// fallZones are the zones a kubernetes fallthrough's args pass on, as
// CoreDNS's fall.SetZonesFromArgs reads them: none is the root; a CIDR is
// its reverse zones.
func fallZones(args []string) []string {
	if len(args) == 0 {
		return []string{"."}
	}
	var zs []string
	for _, a := range args {
		p, ok, bad := cidrZone(a)
		switch {
		case bad:
		case ok:
			for _, n := range splitCIDR(p) {
				zs = append(zs, reverseZoneName(n))
			}
		default:
			zs = append(zs, fqdn(a))
		}
	}
	return zs
}

// reverseCIDRs converts a kubernetes plugin's CIDR zones: each becomes
// CoreDNS's reverse zones (splitCIDR), and those no fallthrough passes on
// are reverseZones, answered authoritatively (NXDOMAIN for unknown
// names), as CoreDNS answers its zones. Those fallthrough passes on need
// nothing: serve answers the reverse names it knows and forwards the
// others, as CoreDNS falls through.
func (c *converter) reverseCIDRs(d Directive, cidrs []netip.Prefix, fall []string, whole bool) []string {
	var done, passed []string
	for _, p := range cidrs {
		var auth, zones []string
		for _, n := range splitCIDR(p) {
			z := reverseZoneName(n)
			if covered(z, fall) {
				passed = append(passed, z)
				continue
			}
			zones = append(zones, z)
			if !contains(c.cfg.ReverseZones, n.String()) {
				c.cfg.ReverseZones = append(c.cfg.ReverseZones, n.String())
			}
			auth = append(auth, n.String())
		}
		if len(auth) > 0 {
			done = append(done, fmt.Sprintf("%s: reverseZones %s (CoreDNS's zones %s; their unknown names NXDOMAIN)", p, span(auth), span(zones)))
		}
	}
	if len(passed) > 0 {
		done = append(done, fmt.Sprintf("reverse zones %s: names of no Service or pod forwarded, as its fallthrough passes them on", span(passed)))
	}
	if !whole {
		// No in-addr.arpa or ip6.arpa zone: CoreDNS forwards the reverse
		// names outside its CIDR zones.
		for _, p := range cidrs {
			if !contains(c.cfg.ReverseScope, p.Masked().String()) {
				c.cfg.ReverseScope = append(c.cfg.ReverseScope, p.Masked().String())
			}
		}
		done = append(done, fmt.Sprintf("reverseScope %s (the reverse names of Services and pods outside it forwarded, as CoreDNS has no in-addr.arpa or ip6.arpa zone)", prefixList(cidrs)))
	}
	return done
}

// covered: fallthrough passes on every name of zone z.
func covered(z string, fall []string) bool {
	for _, f := range fall {
		if inZone(z, f) {
			return true
		}
	}
	return false
}

// span shows a list, its first and last only when it is long.
func span(l []string) string {
	if len(l) > 3 {
		return fmt.Sprintf("%s … %s (%d)", l[0], l[len(l)-1], len(l))
	}
	return strings.Join(l, " ")
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, " ")
}
