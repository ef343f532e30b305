package dnsserver_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// TestTCPClientThatNeverReads: a client that pipelines queries with large
// answers and never reads is dropped within 20 s, and the connection's
// slot is released (before, the server blocked in Write for as long as the
// client kept the connection open).
func TestTCPClientThatNeverReads(t *testing.T) {
	big := make([]string, 230) // one TXT record of about 59 KB
	for i := range big {
		big[i] = strings.Repeat("x", 255)
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 5}, Txt: big}}
		_ = w.WriteMsg(m)
	})
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: handler}
	testkit.StartServer(t, srv)
	c, err := net.DialTimeout("tcp", srv.Addrs()[0], 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	const queries = 100 // about 5.9 MB of answers, more than loopback buffers hold; under tcpMaxQueries
	var batch []byte
	for i := range queries {
		q := new(dns.Msg)
		q.SetQuestion("big.example.", dns.TypeTXT)
		q.Id = uint16(i)
		b, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		batch = binary.BigEndian.AppendUint16(batch, uint16(len(b)))
		batch = append(batch, b...)
	}
	if _, err := c.Write(batch); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	open := func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_connections") }
	testkit.WaitEqual(t, 5*time.Second, "connections the server took", open, 1)
	// Every 10 ms: released is timed.
	testkit.WaitEvery(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := open(); n != 0 {
			return fmt.Errorf("connection still served after the queries (%v open)", n)
		}
		return nil
	})
	released := time.Since(sent)
	// The client sees the end of the connection (EOF or reset) once it reads
	// what was left in flight, and not every answer arrived.
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after %d bytes: %v", n, err)
	}
	if full := int64(queries) * 59000; n >= full {
		t.Errorf("read %d bytes, every answer (%d) was written", n, full)
	}
	t.Logf("released %.1fs after the queries; client read %d bytes before %v", released.Seconds(), n, errOrEOF(err))
}

func errOrEOF(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}

// TestTCPIdleTimeout: a TCP connection on which no query comes is closed
// by the server after the idle timeout, whether it never sent one or
// went quiet after some; the client sees the close (EOF), not sooner than
// about the timeout and within a bound, and the connection's slot is freed.
func TestTCPIdleTimeout(t *testing.T) {
	const idle = 400 * time.Millisecond
	srv := &dnsserver.Server{Handler: answerA, TCPIdleTimeout: idle}
	addr := startServer(t, srv)
	for _, tc := range []struct {
		name    string
		queries int
	}{
		{"silent client", 0},
		{"quiet after one query", 1},
		{"quiet after three queries", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			c := &dns.Conn{Conn: nc}
			start := time.Now()
			for i := range tc.queries {
				_ = c.SetDeadline(time.Now().Add(3 * time.Second))
				if err := c.WriteMsg(new(dns.Msg).SetQuestion("x.example.", dns.TypeA)); err != nil {
					t.Fatal(err)
				}
				if r, err := c.ReadMsg(); err != nil || len(r.Answer) != 1 {
					t.Fatalf("query %d: %v %v", i, r, err)
				}
				start = time.Now()
			}
			// Wait for the close: a read that ends with EOF, not with the
			// client's own deadline.
			_ = nc.SetReadDeadline(time.Now().Add(idle + 5*time.Second))
			n, err := nc.Read(make([]byte, 512))
			took := time.Since(start)
			if errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
				t.Fatalf("connection still open %v after the last query (read %d bytes, %v)", took, n, err)
			}
			t.Logf("closed %v after the last query: %v", took.Round(time.Millisecond), err)
			if took < idle/2 {
				t.Errorf("closed after %v, before the %v idle timeout", took, idle)
			}
			if took > idle+2*time.Second {
				t.Errorf("closed after %v, want within %v of the %v idle timeout", took, 2*time.Second, idle)
			}
			testkit.WaitEqual(t, 5*time.Second, "tcp_connections after the close",
				func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_connections") }, 0)
		})
	}
}
