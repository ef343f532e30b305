package testkit

import (
	"github.com/miekg/dns"
)

// Exchange asks addr the question name of qtype (NewQuery, no EDNS) over
// network ("udp" or "tcp"; "" is UDP) and returns the reply or the error,
// bounded by AskTimeout: Ask for a caller that handles a failed exchange
// itself, one it waits out or expects.
func Exchange(network, addr, name string, qtype uint16) (*dns.Msg, error) {
	r, _, err := (&dns.Client{Net: network, Timeout: AskTimeout}).Exchange(NewQuery(name, qtype, 0), addr)
	return r, err
}
