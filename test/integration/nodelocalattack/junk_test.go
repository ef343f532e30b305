package nodelocalattack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// junk is a TCP message whose header does not parse: four bytes.
var junk = []byte{0x00, 0x04, 0x00, 0x00, 0x00, 0x00}

// squatter is one of the tenant's TCP connections to the cluster DNS.
// Every period it sends a message that is never answered: junk, or one
// more byte of a 64-byte message that never completes (partial). When
// the server closed it, it dials again at once (the worst case: the
// tenant takes back every slot it loses).
func squatter(ctx context.Context, from, server string, partial bool, period time.Duration, dials *atomic.Int64) {
	var c net.Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	sent := 0
	send := func() error {
		if c == nil {
			nc, err := d.DialContext(ctx, "tcp", server)
			if err != nil {
				return err
			}
			c, sent = nc, 0
			dials.Add(1)
		}
		msg := junk
		if partial {
			msg = []byte{0x00, 0x40, 0x00}[min(sent, 2):3] // the length, then one byte a period
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(msg); err != nil {
			return err
		}
		sent += len(msg)
		// Closed by the server? A read that ends before its short deadline.
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return errors.New("closed by the server")
		}
		return nil
	}
	tick := func() bool {
		for range 2 { // once more at once when the server closed it
			if send() == nil || ctx.Err() != nil {
				break
			}
			if c != nil {
				c.Close()
				c = nil
			}
		}
		return true
	}
	tick()
	testkit.Every(ctx, period, tick)
}

// TestJunkTCPConnections (issue 66 row 1): a tenant on four addresses
// holds 1,000 TCP connections to the cluster DNS (the whole pool), each
// sending every 8 s a message that gets no answer, junk (a 4-byte
// message) or one more byte of a partial one, and dialing again whenever
// one is closed. Beside it for 20 s, 400 cluster names through node-local
// (which asks the cluster DNS over TCP only) and 100 fresh TCP clients
// straight to the cluster DNS: at most 1 % of either fails. On 8c15235 a
// junk connection counted as busy for good and was never evicted: every
// node-local query was SERVFAIL and every fresh client closed at once.
// Figures: -v.
func TestJunkTCPConnections(t *testing.T) {
	silent := silentUpstream(t, "127.0.0.81")
	cluster := buildbin.StartServe(t, writeObjects(t), "127.0.0.82:0", silent)
	nl := startNodeLocal(t, "127.0.0.83:0", cluster.DNS)
	began := time.Now()
	defer func() { t.Logf("the attack and the queries took %v", time.Since(began).Round(time.Second)) }()

	const (
		period    = 8 * time.Second
		perSource = 250
		queries   = 400
		fresh     = 100
		span      = 20 * time.Second
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	var dials atomic.Int64
	for _, from := range []string{"127.0.0.91", "127.0.0.92", "127.0.0.93", "127.0.0.94"} {
		for i := range perSource {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Spread the first dials over a second.
				t := time.NewTimer(time.Second * time.Duration(i) / perSource)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				squatter(ctx, from, cluster.DNS, i%2 == 1, period, &dials)
			}()
		}
	}
	testkit.WaitFor(t, 2*period, func() error {
		if n := dials.Load(); n < 4*perSource {
			return fmt.Errorf("the tenant dialed %d connections", n)
		}
		return nil
	})
	t.Logf("the tenant dialed %d connections; the cluster DNS holds %v", dials.Load(),
		cluster.Metric(t, "dnsconfigurer_dnsserver_tcp_connections"))

	var viaNL, direct tally
	legitLoad(span, nl.DNS, queries, &viaNL, cluster.DNS, "127.0.0.84", fresh, &direct)

	for _, name := range []string{"dnsconfigurer_dnsserver_tcp_connections", "dnsconfigurer_dnsserver_tcp_evicted_total",
		"dnsconfigurer_dnsserver_tcp_refused_total", "dnsconfigurer_dnsserver_tcp_client_limited_total",
		"dnsconfigurer_dnsserver_tcp_malformed_total"} {
		t.Logf("cluster DNS %s %v", name, cluster.Metric(t, name))
	}
	t.Logf("the tenant: %d dials", dials.Load())
	wantLegitServed(t, &viaNL, &direct)
}
