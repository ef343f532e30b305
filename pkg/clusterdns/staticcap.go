package clusterdns

import (
	"time"

	"github.com/miekg/dns"
)

// cappedStatic caps the TTLs of static records at the reply cache's
// maxTTL for their name. CoreDNS's cache plugin caps every answer of its
// server block, a hosts entry's too: with cache 5, a hosts line of the
// default TTL (3600 s) is answered with TTL 5.
type cappedStatic struct {
	Static
	// maxTTL is the cap for a name; ok false: none.
	maxTTL func(name string) (d time.Duration, ok bool)
}

// Lookup is Static's, with TTLs over the cap copied and lowered.
func (s cappedStatic) Lookup(name string, qtype uint16) ([]dns.RR, bool) {
	rrs, found := s.Static.Lookup(name, qtype)
	if len(rrs) == 0 {
		// Most names have none: no cap to look up.
		return rrs, found
	}
	d, ok := s.maxTTL(name)
	if !ok {
		return rrs, found
	}
	limit := uint32(d / time.Second)
	var out []dns.RR
	for i, rr := range rrs {
		if rr.Header().Ttl > limit && out == nil {
			out = make([]dns.RR, i, len(rrs))
			copy(out, rrs[:i])
		}
		if out == nil {
			continue
		}
		if rr.Header().Ttl > limit {
			rr = dns.Copy(rr)
			rr.Header().Ttl = limit
		}
		out = append(out, rr)
	}
	if out == nil {
		return rrs, found
	}
	return out, found
}
