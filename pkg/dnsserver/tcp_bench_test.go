package dnsserver_test

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// BenchmarkServeTCP is the TCP path on loopback, from the query read to
// its reply written, through ServeDNS: one query at a time on a
// connection (a stub resolver), or bursts of 16 pipelined (a forwarder);
// "slow" answers each after 1 ms, as a forwarded name would. The client
// opens a new connection every 128 queries (miekg/dns's tcpMaxQueries, so
// that the benchmark runs on both servers).
func BenchmarkServeTCP(b *testing.B) {
	slow := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		time.Sleep(time.Millisecond) // the upstream's answer
		answerA.ServeDNS(w, r)
	})
	for _, tc := range []struct {
		name    string
		burst   int
		handler dns.Handler
	}{{"sequential", 1, echoWire{}}, {"pipelined16", 16, echoWire{}}, {"pipelined16-slow", 16, slow}} {
		b.Run(tc.name, func(b *testing.B) {
			srv := &dnsserver.Server{Handler: tc.handler, UDPSockets: 1, Zones: []string{"cluster.local"}}
			addr := startServer(b, srv)
			q := new(dns.Msg).SetQuestion("web.prod.svc.cluster.local.", dns.TypeA)
			var c *dns.Conn
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			const perConn = 128
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += tc.burst {
				if i%perConn == 0 {
					if c != nil {
						c.Close()
					}
					nc, err := net.Dial("tcp", addr)
					if err != nil {
						b.Fatal(err)
					}
					c = &dns.Conn{Conn: nc}
				}
				k := min(tc.burst, b.N-i)
				for j := range k {
					q.Id = uint16(j)
					if err := c.WriteMsg(q); err != nil {
						b.Fatal(err)
					}
				}
				for range k {
					if _, err := c.ReadMsg(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
