package testkit

import (
	"strings"

	"github.com/miekg/dns"
)

// Probe reports whether q is one of the forwarder's own probes rather than
// a client's question: the health probe (the root, ". NS") or a loop probe
// (a name under loop-probe.dnsconfigurer.).
func Probe(q dns.Question) bool {
	return q.Name == "." || strings.HasSuffix(strings.ToLower(q.Name), ".loop-probe.dnsconfigurer.")
}

// ClientQueries is the number of queries u got that are not probes.
func (u *Upstream) ClientQueries() int {
	n := 0
	for _, q := range u.Queries() {
		if !Probe(q.Msg.Question[0]) {
			n++
		}
	}
	return n
}

// AskedFor is the number of queries u got for name, in any case.
func (u *Upstream) AskedFor(name string) int {
	n := 0
	for _, q := range u.Queries() {
		if strings.EqualFold(q.Msg.Question[0].Name, name) {
			n++
		}
	}
	return n
}
