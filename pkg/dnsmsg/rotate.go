package dnsmsg

import (
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// RotateAnswer returns rrs with each run of A, AAAA, or same-priority SRV
// records of one owner rotated to start at its record c mod len, in a new
// slice (rrs may be shared), or rrs itself when there is nothing to rotate.
// It is the load balancing (loadbalance) of a reply made per query; the
// cluster DNS's reply cache rotates its packed replies to the same order.
func RotateAnswer(rrs []dns.RR, c uint32) []dns.RR {
	var out []dns.RR
	for i := 0; i < len(rrs); {
		j := i + 1
		for j < len(rrs) && sameRun(rrs[i], rrs[j]) {
			j++
		}
		if n := j - i; n >= 2 {
			if out == nil {
				out = slices.Clone(rrs)
			}
			k := int(c % uint32(n))
			copy(out[i:], rrs[i+k:j])
			copy(out[i+n-k:], rrs[i:i+k])
		}
		i = j
	}
	if out == nil {
		return rrs
	}
	return out
}

// sameRun reports whether b continues a's run: same owner and type, A, AAAA
// or SRV of the same priority.
func sameRun(a, b dns.RR) bool {
	ha, hb := a.Header(), b.Header()
	if ha.Rrtype != hb.Rrtype || !strings.EqualFold(ha.Name, hb.Name) {
		return false
	}
	switch ha.Rrtype {
	case dns.TypeA, dns.TypeAAAA:
		return true
	case dns.TypeSRV:
		sa, ok1 := a.(*dns.SRV)
		sb, ok2 := b.(*dns.SRV)
		return ok1 && ok2 && sa.Priority == sb.Priority
	}
	return false
}
