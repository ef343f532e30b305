package dnsmsg

import (
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// LimitAnswer cuts each run of A or AAAA records of one owner in rrs that
// is longer than limit down to limit records: the window of the run that
// starts at record c*limit mod its length, wrapping round. So calls with
// c, c+1, ... hand out every record of a run of n within ceil(n/limit)
// calls. It returns a new slice (rrs may be shared), or rrs itself when
// no run is longer than limit or limit is 0 or less.
//
// It is the UDP answer limit (v1alpha1 udpAnswerLimit) of both stages:
// a reply cut this way is whole, not truncated, so its TC bit stays clear.
func LimitAnswer(rrs []dns.RR, limit int, c uint32) []dns.RR {
	if limit <= 0 || len(rrs) <= limit {
		return rrs
	}
	var out []dns.RR
	for i := 0; i < len(rrs); {
		j := i + 1
		for j < len(rrs) && sameAddrRun(rrs[i], rrs[j]) {
			j++
		}
		n := j - i
		if n <= limit {
			if out != nil {
				out = append(out, rrs[i:j]...)
			}
			i = j
			continue
		}
		if out == nil {
			out = append(make([]dns.RR, 0, len(rrs)), rrs[:i]...)
		}
		first := int(uint64(c) * uint64(limit) % uint64(n))
		for k := range limit {
			out = append(out, rrs[i+(first+k)%n])
		}
		i = j
	}
	if out == nil {
		return rrs
	}
	return slices.Clip(out)
}

// sameAddrRun reports whether b continues a's run of A or AAAA records:
// the same type and owner.
func sameAddrRun(a, b dns.RR) bool {
	ha, hb := a.Header(), b.Header()
	return (ha.Rrtype == dns.TypeA || ha.Rrtype == dns.TypeAAAA) && ha.Rrtype == hb.Rrtype &&
		strings.EqualFold(ha.Name, hb.Name)
}
