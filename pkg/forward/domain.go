package forward

import (
	"strings"

	"golang.org/x/net/publicsuffix"
)

// DomainOf is the registrable domain of a query name, by which a client
// over its share of the slots makes room (shares): its public suffix and
// one label more,
// lower case, without the final dot ("example.com" for
// "A.b.Example.com."; "example.co.uk" for "x.example.co.uk."). The names
// of one owner share it however deep they go, so random labels under a
// domain whose servers never answer pile up in that domain alone.
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
