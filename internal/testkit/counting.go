package testkit

import (
	"sync/atomic"

	"github.com/miekg/dns"
)

// WireHandler is a handler that also answers UDP queries from their wire
// form, as dnsserver.WireAnswerer.
type WireHandler interface {
	dns.Handler
	AnswerWire(dst, q []byte) ([]byte, bool)
}

// Counting counts the queries that reach its handler's ServeDNS; its
// AnswerWire is the handler's, not counted.
type Counting struct {
	WireHandler
	served atomic.Int64
}

func (c *Counting) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	c.served.Add(1)
	c.WireHandler.ServeDNS(w, r)
}

// Served is the number of queries ServeDNS got.
func (c *Counting) Served() int { return int(c.served.Load()) }
