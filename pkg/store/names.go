package store

import (
	"net/netip"
	"strconv"
	"strings"
)

// How names spell addresses: the dashed labels of pods and endpoints
// and the reverse names. The build makes them, a query parses them.

// DashedIP is the label a pod or an endpoint without a hostname gets:
// 10-1-2-3 for IPv4, the compressed IPv6 form with ':' replaced by '-'
// (fd00--1) for IPv6.
func DashedIP(a netip.Addr) string { return string(appendDashedIP(nil, a)) }

// appendDashedIP appends DashedIP(a) to dst.
func appendDashedIP(dst []byte, a netip.Addr) []byte {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		dst = strconv.AppendUint(dst, uint64(b[0]), 10)
		for _, x := range b[1:] {
			dst = append(dst, '-')
			dst = strconv.AppendUint(dst, uint64(x), 10)
		}
		return dst
	}
	start := len(dst)
	dst = a.WithZone("").AppendTo(dst)
	for i := start; i < len(dst); i++ {
		if dst[i] == ':' {
			dst[i] = '-'
		}
	}
	return dst
}

// EndpointDashedIP is the label of an endpoint without a hostname:
// DashedIP, with a "0" after a trailing '-' (an IPv6 address ending in
// "::"), as CoreDNS names endpoints. Pod names keep DashedIP, as CoreDNS's
// verified mode matches them.
func EndpointDashedIP(a netip.Addr) string { return string(appendEndpointDashedIP(nil, a)) }

// appendEndpointDashedIP appends EndpointDashedIP(a) to dst.
func appendEndpointDashedIP(dst []byte, a netip.Addr) []byte {
	start := len(dst)
	dst = appendDashedIP(dst, a)
	if len(dst) > start && dst[len(dst)-1] == '-' {
		dst = append(dst, '0')
	}
	return dst
}

// ParseDashedIP is the inverse of DashedIP. A label with exactly three dashes
// and no "--" is IPv4, anything else is tried as IPv6.
func ParseDashedIP(label string) (netip.Addr, bool) {
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", "."))
		if err != nil || !a.Is4() {
			return netip.Addr{}, false
		}
		return a, true
	}
	if !strings.Contains(label, "-") {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ":"))
	if err != nil || !a.Is6() || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a, true
}

const hexDigits = "0123456789abcdef"

// The reverse zones of IPv4 and IPv6 addresses.
const (
	reverse4 = "in-addr.arpa."
	reverse6 = "ip6.arpa."
)

// ReverseName is the PTR owner name of an address: d.c.b.a.in-addr.arpa. for
// IPv4 and the 32-nibble form under ip6.arpa. for IPv6.
func ReverseName(a netip.Addr) string {
	var buf [74]byte
	return string(appendReverseName(buf[:0], a))
}

// ReverseZone is the reverse name of an octet-aligned (IPv4) or
// nibble-aligned (IPv6) masked prefix: "10.in-addr.arpa." for 10.0.0.0/8.
func ReverseZone(p netip.Prefix) string {
	var buf [74]byte
	return string(appendReverse(buf[:0], p.Addr(), p.Bits()))
}

// appendReverseName appends ReverseName(a) to dst.
func appendReverseName(dst []byte, a netip.Addr) []byte {
	a = a.Unmap()
	return appendReverse(dst, a, a.BitLen())
}

// appendReverse appends the reverse name of the first bits of a, whole
// octets (IPv4) or nibbles (IPv6).
func appendReverse(dst []byte, a netip.Addr, bits int) []byte {
	if a.Is4() {
		b := a.As4()
		for i := bits/8 - 1; i >= 0; i-- {
			dst = strconv.AppendUint(dst, uint64(b[i]), 10)
			dst = append(dst, '.')
		}
		return append(dst, reverse4...)
	}
	b := a.As16()
	for i := bits/4 - 1; i >= 0; i-- {
		nib := b[i/2] >> 4
		if i%2 == 1 {
			nib = b[i/2] & 0xf
		}
		dst = append(dst, hexDigits[nib], '.')
	}
	return append(dst, reverse6...)
}

// ParseReverse is the inverse of ReverseZone: the prefix a lowercase
// reverse name stands for, 96.10.in-addr.arpa. for 10.96.0.0/16, a nibble
// name under ip6.arpa. for a prefix of 4 bits per label. ok is false for
// names that stand for no address (labels that are not octets or nibbles,
// too many labels).
func ParseReverse(name string) (p netip.Prefix, ok bool) {
	rest, v4 := strings.CutSuffix(name, reverse4)
	if !v4 {
		if rest, ok = strings.CutSuffix(name, reverse6); !ok {
			return p, false
		}
	}
	if rest != "" && rest[len(rest)-1] != '.' {
		return p, false // not a label boundary: "xin-addr.arpa."
	}
	labels := strings.Split(rest, ".")
	labels = labels[:len(labels)-1] // the empty string after the last dot
	if v4 {
		if len(labels) > 4 {
			return p, false
		}
		var a [4]byte
		for i, l := range labels {
			n, err := strconv.ParseUint(l, 10, 8)
			if err != nil || strconv.FormatUint(n, 10) != l {
				return p, false
			}
			a[len(labels)-1-i] = byte(n)
		}
		return netip.PrefixFrom(netip.AddrFrom4(a), 8*len(labels)), true
	}
	if len(labels) > 32 {
		return p, false
	}
	var a [16]byte
	for i, l := range labels {
		nib := -1
		if len(l) == 1 {
			nib = strings.IndexByte(hexDigits, l[0])
		}
		if nib < 0 {
			return p, false
		}
		pos := len(labels) - 1 - i // nibble position from the left
		if pos%2 == 0 {
			a[pos/2] |= byte(nib) << 4
		} else {
			a[pos/2] |= byte(nib)
		}
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), 4*len(labels)), true
}

// reverseAddr is the inverse of ReverseName: the address of a full PTR owner
// name, false for any other name.
func reverseAddr(name string) (netip.Addr, bool) {
	p, ok := ParseReverse(name)
	if !ok || p.Bits() != p.Addr().BitLen() {
		return netip.Addr{}, false
	}
	return p.Addr(), true
}

// podNameOf is the verified pod name of ip in namespace ns (lowercase)
// under zone: <dashed-ip>.<ns>.pod.<zone>.
func podNameOf(ip netip.Addr, ns, zone string) string {
	return string(appendDashedIP(nil, ip)) + "." + ns + ".pod." + zone
}

// implicitHost reports whether the endpoint name host of address a is
// its dashed address, one label, under the Service name base: a name
// Lookup can make from the address's PTR.
func implicitHost(host string, a netip.Addr, base string) bool {
	var buf [64]byte
	d := appendEndpointDashedIP(buf[:0], a)
	return len(host) == len(d)+1+len(base) && host[len(d)] == '.' && host[:len(d)] == string(d) && host[len(d)+1:] == base
}

// foreignDashed reports whether label, the hostname or pod name of an
// endpoint of address a, is the dashed form of another address: that
// endpoint's name is the implicit name of the other's, so the Service
// keeps every endpoint name (see addEndpointNames).
func foreignDashed(label []byte, a netip.Addr) bool {
	if !dashedChars(label) {
		return false
	}
	ip, ok := ParseDashedIP(string(label))
	return ok && ip.Unmap() != a.Unmap()
}

// dashedChars reports whether label holds only what a dashed address
// spells: lowercase hex digits and dashes.
func dashedChars[T string | []byte](label T) bool {
	for i := range len(label) {
		if c := label[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}

// parseSpelled is the address label spells in the canonical form spell
// appends (appendDashedIP for pods, appendEndpointDashedIP for endpoints);
// false when it spells none, or not in that form. It keeps no part of
// label (which may be borrowed: LookupBytes).
func parseSpelled(label string, spell func([]byte, netip.Addr) []byte) (netip.Addr, bool) {
	if !dashedChars(label) {
		return netip.Addr{}, false
	}
	ip, ok := ParseDashedIP(strings.Clone(label))
	if !ok {
		return netip.Addr{}, false
	}
	var buf [80]byte
	if string(spell(buf[:0], ip)) != label {
		return netip.Addr{}, false // not the canonical form
	}
	return ip, true
}
