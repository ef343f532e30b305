package dnsserver_test

import (
	"net"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// echoWire answers every query from its wire form: the query with QR set,
// the least a wire answer can cost.
type echoWire struct{}

func (echoWire) ServeDNS(w dns.ResponseWriter, r *dns.Msg) { answerA.ServeDNS(w, r) }

func (echoWire) AnswerWire(dst, q []byte) ([]byte, bool) {
	dst = append(dst[:0], q...)
	dst[2] |= 0x80
	return dst, true
}

// BenchmarkServeUDPWire is the listener's wire path on loopback, from the
// datagram read to its reply written: the client sends bursts of 16
// queries on one socket and reads the 16 replies, so the server reads and
// writes batches. allocs/op counts the whole process per query, the
// client's reads and writes included (they allocate nothing).
func BenchmarkServeUDPWire(b *testing.B) {
	for _, tc := range []struct {
		name        string
		perDatagram bool
	}{{"batch", false}, {"per-datagram", true}} {
		b.Run(tc.name, func(b *testing.B) {
			srv := &dnsserver.Server{Handler: echoWire{}, UDPSockets: 1, Zones: []string{"cluster.local"}}
			if tc.perDatagram {
				dnsserver.PerDatagram(srv)
			}
			addr := startServer(b, srv)
			conn, err := net.Dial("udp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			q, _ := new(dns.Msg).SetQuestion("web.prod.svc.cluster.local.", dns.TypeA).Pack()
			buf := make([]byte, 512)
			const burst = 16
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += burst {
				k := min(burst, b.N-i)
				for range k {
					if _, err := conn.Write(q); err != nil {
						b.Fatal(err)
					}
				}
				for range k {
					if _, err := conn.Read(buf); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
