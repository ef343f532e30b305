package forward

import (
	"strings"
	"sync"

	"golang.org/x/net/publicsuffix"
)

// DomainOf is the registrable domain of a query name, the unit of
// Config.MaxConcurrentPerDomain: its public suffix and one label more,
// lower case, without the final dot ("example.com" for
// "A.b.Example.com."; "example.co.uk" for "x.example.co.uk."). The names
// of one owner share it however deep they go, so random labels under a
// domain whose servers never answer count against that domain alone.
// Reverse names count per /16 (in-addr.arpa) or /32 (ip6.arpa), and a
// name that is a public suffix itself counts as itself.
func DomainOf(name string) string {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	switch {
	case strings.HasSuffix(name, ".in-addr.arpa"):
		return lastLabels(name, 4)
	case strings.HasSuffix(name, ".ip6.arpa"):
		return lastLabels(name, 10)
	}
	if d, err := publicsuffix.EffectiveTLDPlusOne(name); err == nil {
		return d
	}
	return name
}

// lastLabels is the last n labels of name (all of them when fewer).
func lastLabels(name string, n int) string {
	i := len(name)
	for ; n > 0 && i > 0; n-- {
		i = strings.LastIndexByte(name[:i], '.')
		if i < 0 {
			return name
		}
	}
	return name[i+1:]
}

// domainSlots counts the exchanges in flight per registrable domain. Its
// map holds only the domains with one in flight.
type domainSlots struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more exchange for dom, unless limit are in flight.
func (d *domainSlots) take(dom string, limit int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n[dom] >= limit {
		return false
	}
	d.n[dom]++
	return true
}

func (d *domainSlots) release(dom string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n[dom]--; d.n[dom] <= 0 {
		delete(d.n, dom)
	}
}
