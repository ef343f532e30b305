package testkit

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// AskTimeout bounds Ask: a server on loopback answers well within it.
const AskTimeout = 5 * time.Second

// Ask sends m to addr over network ("udp" or "tcp") and returns the reply.
// It fails t when no reply comes within AskTimeout; the reply's rcode is
// the caller's to check.
func Ask(t testing.TB, network, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	return ask(t, &dns.Client{Net: network, Timeout: AskTimeout}, addr, m)
}

// AskFrom is Ask sent from the local address src, such as a pod's.
func AskFrom(t testing.TB, network, src, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	d := &net.Dialer{Timeout: AskTimeout}
	if network == "udp" {
		d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(src)}
	} else {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	return ask(t, &dns.Client{Net: network, Dialer: d, Timeout: AskTimeout}, addr, m)
}

func ask(t testing.TB, c *dns.Client, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		q := m.Question[0]
		t.Fatalf("%s %s %s to %s: %v", c.Net, q.Name, dns.TypeToString[q.Qtype], addr, err)
	}
	return r
}

// NewQuery is a query for name and qtype, with an OPT record of size (DO
// unset) holding opts when size is over 0.
func NewQuery(name string, qtype uint16, size uint16, opts ...dns.EDNS0) *dns.Msg {
	m := new(dns.Msg).SetQuestion(name, qtype)
	if size > 0 {
		m.SetEdns0(size, false)
		m.IsEdns0().Option = opts
	}
	return m
}

// ThroughWire is m packed and unpacked again, as the other end reads it.
func ThroughWire(t testing.TB, m *dns.Msg) *dns.Msg {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	got := new(dns.Msg)
	if err := got.Unpack(b); err != nil {
		t.Fatal(err)
	}
	return got
}
