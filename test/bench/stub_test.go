package bench

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// externalZone is the zone the upstream stub answers; externalIP is the
// address of every A record it gives (TTL 300).
const (
	externalZone = "example.com."
	externalIP   = "192.0.2.1"
)

// stubTCPQueries is how many queries a stub answers on one TCP connection
// before it closes it: miekg/dns's default, and what dnsconfigurer's own
// cluster DNS does (pkg/dnsserver); CoreDNS never closes for that.
const stubTCPQueries = 128

// stub is a live upstream: A records for every name under externalZone,
// NOERROR without answer for every other question (health probes included).
type stub struct {
	addr     string
	queries  atomic.Int64 // every query
	external atomic.Int64 // A queries under externalZone
}

func (s *stub) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	s.queries.Add(1)
	m := new(dns.Msg)
	m.SetReply(r)
	if len(r.Question) == 1 {
		q := r.Question[0]
		if q.Qtype == dns.TypeA && dns.IsSubDomain(externalZone, strings.ToLower(q.Name)) {
			s.external.Add(1)
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
				A:   net.ParseIP(externalIP).To4(),
			})
		}
	}
	if r.IsEdns0() != nil {
		m.SetEdns0(1232, false)
	}
	w.WriteMsg(m)
}

// startStub serves a stub on UDP and TCP of one port of 127.0.0.1 until t
// ends.
func startStub(t *testing.T) *stub {
	t.Helper()
	s := &stub{}
	s.addr = serveUDPTCP(t, s)
	return s
}

// serveUDPTCP serves h on UDP and TCP of one port of 127.0.0.1 until t ends
// and returns its address. A TCP connection is closed after stubTCPQueries
// queries.
func serveUDPTCP(t *testing.T, h dns.Handler) string {
	t.Helper()
	return testkit.NewUpstream(t, h, testkit.CountOnly(),
		testkit.Tune(func(s *dns.Server) { s.MaxTCPQueries = stubTCPQueries })).Addr
}

// startDead is a blackholed upstream: a UDP socket that reads every query
// and never answers (no ICMP port unreachable either, so the sender learns
// nothing but the silence). Its TCP port is not listened on.
func startDead(t *testing.T) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, testkit.Silent, testkit.UDPOnly())
}
