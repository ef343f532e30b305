package dnsserver_test

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// wireHandler answers A queries with one record through ServeDNS, and
// through AnswerWire those for names starting with "fast." (the same
// reply but TTL 7) and, by panicking, those starting with "boom.".
type wireHandler struct {
	served, wired atomic.Int32
	// gate, when set, holds the first wire answer until it is closed: the
	// reader waits in it while the rest of a burst queues on the socket.
	gate  chan struct{}
	gated atomic.Bool
}

func (h *wireHandler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	h.served.Add(1)
	answerA.ServeDNS(w, req)
}

func (h *wireHandler) AnswerWire(dst, q []byte) ([]byte, bool) {
	switch {
	case bytes.HasPrefix(q[12:], []byte("\x04fast")):
	case bytes.HasPrefix(q[12:], []byte("\x04boom")):
		var m map[string]int
		m["x"]++ // nil map write: a real runtime panic
	default:
		return dst, false
	}
	req := new(dns.Msg)
	if err := req.Unpack(q); err != nil {
		return dst, false
	}
	if h.gate != nil && h.gated.CompareAndSwap(false, true) {
		<-h.gate
	}
	h.wired.Add(1)
	m := new(dns.Msg)
	m.SetReply(req)
	m.Answer = []dns.RR{testkit.A(req.Question[0].Name, 7, "192.0.2.1")}
	b, err := m.PackBuffer(dst[:0])
	return b, err == nil
}

var _ dnsserver.WireAnswerer = (*wireHandler)(nil)

// exchange asks addr for name A over network.
func exchange(t *testing.T, network, addr, name string) *dns.Msg {
	t.Helper()
	r := testkit.Ask(t, network, addr, new(dns.Msg).SetQuestion(name, dns.TypeA))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("%s %s: %v", network, name, r)
	}
	return r
}

// TestWireAnswerer: a handler that implements WireAnswerer answers UDP
// queries from their wire form where it can, ServeDNS the others and every
// TCP query; a panic in AnswerWire is counted and the query goes to
// ServeDNS; swapping the handler for one without AnswerWire and back
// works; and Shutdown still ends the reads promptly.
func TestWireAnswerer(t *testing.T) {
	h := &wireHandler{}
	srv := &dnsserver.Server{Handler: h, Listen: []string{"127.0.0.1:0"}}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addrs()[0]
	check := func(name, network string, served, wired int32, ttl uint32) {
		t.Helper()
		s, w := h.served.Load(), h.wired.Load()
		r := exchange(t, network, addr, name)
		if got := h.served.Load() - s; got != served {
			t.Errorf("%s over %s: ServeDNS called %d times, want %d", name, network, got, served)
		}
		if got := h.wired.Load() - w; got != wired {
			t.Errorf("%s over %s: AnswerWire answered %d times, want %d", name, network, got, wired)
		}
		if r.Answer[0].Header().Ttl != ttl {
			t.Errorf("%s over %s: TTL %d, want %d", name, network, r.Answer[0].Header().Ttl, ttl)
		}
	}
	for range 3 {
		check("fast.example.", "udp", 0, 1, 7)
		check("slow.example.", "udp", 1, 0, 5)
		check("fast.example.", "tcp", 1, 0, 5)
	}
	check("boom.example.", "udp", 1, 0, 5)
	if got := metric(t, srv, "dnsconfigurer_dnsserver_panics_total"); got != 1 {
		t.Errorf("panics_total = %v, want 1", got)
	}

	// A datagram too short for a header is miekg/dns's to drop.
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	plain := &wireHandler{}
	srv.SetHandler(dns.HandlerFunc(plain.ServeDNS))
	check("fast.example.", "udp", 0, 0, 5) // counted on plain
	if plain.served.Load() != 1 {
		t.Errorf("the handler without AnswerWire served %d queries, want 1", plain.served.Load())
	}
	srv.SetHandler(h)
	// The read in progress when the handler changed is the plain one's:
	// its datagram goes to ServeDNS; the next is read for AnswerWire.
	exchange(t, "udp", addr, "fast.example.")
	check("fast.example.", "udp", 0, 1, 7)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestQueriesCounted: the server counts the queries it answers from their
// wire form as those ServeDNS answers, by zone, transport, address family
// and type, with the reply's rcode and size, over IPv4 and (when the host
// has it) IPv6 loopback.
func TestQueriesCounted(t *testing.T) {
	h := &wireHandler{}
	srv := &dnsserver.Server{Handler: h, Listen: []string{"127.0.0.1:0"}, Zones: []string{"example"}}
	if ln, err := net.ListenPacket("udp", "[::1]:0"); err == nil {
		ln.Close()
		srv.Listen = append(srv.Listen, "[::1]:0")
	}
	startServer(t, srv)
	var wireBytes float64
	for _, addr := range srv.Addrs() {
		for range 2 {
			r := exchange(t, "udp", addr, "fast.example.") // AnswerWire
			b, _ := r.Pack()
			wireBytes += float64(len(b))
		}
		exchange(t, "udp", addr, "slow.example.")     // ServeDNS
		exchange(t, "tcp", addr, "fast.example.")     // ServeDNS
		exchange(t, "udp", addr, "slow.example.org.") // outside the zone
	}
	n := float64(len(srv.Addrs()))
	if got := float64(h.wired.Load()); got != 2*n {
		t.Fatalf("AnswerWire answered %v queries, want %v", got, 2*n)
	}
	reg := testkit.Registry(t, srv)
	got := testkit.Gather(t, reg)
	want := map[string]float64{
		`dnsconfigurer_dnsserver_responses_total{rcode="NOERROR",zone="example."}`:         4 * n,
		`dnsconfigurer_dnsserver_responses_total{rcode="NOERROR",zone="."}`:                n,
		`dnsconfigurer_dnsserver_request_duration_seconds_count{type="A",zone="example."}`: 4 * n,
		`dnsconfigurer_dnsserver_request_duration_seconds_count{type="A",zone="."}`:        n,
		`dnsconfigurer_dnsserver_request_size_bytes_count{proto="udp",zone="example."}`:    3 * n,
		`dnsconfigurer_dnsserver_request_size_bytes_count{proto="tcp",zone="example."}`:    n,
		`dnsconfigurer_dnsserver_response_size_bytes_count{proto="udp",zone="example."}`:   3 * n,
		`dnsconfigurer_dnsserver_response_size_bytes_count{proto="udp",zone="."}`:          n,
		// The query's own size: header, fast.example. and type and class.
		`dnsconfigurer_dnsserver_request_size_bytes_sum{proto="tcp",zone="example."}`: n * (12 + 14 + 4),
	}
	for _, family := range []string{"1", "2"}[:len(srv.Addrs())] {
		want[`dnsconfigurer_dnsserver_requests_total{family="`+family+`",proto="udp",type="A",zone="example."}`] = 3
		want[`dnsconfigurer_dnsserver_requests_total{family="`+family+`",proto="tcp",type="A",zone="example."}`] = 1
		want[`dnsconfigurer_dnsserver_requests_total{family="`+family+`",proto="udp",type="A",zone="."}`] = 1
	}
	// Each listen address counts its own queries, from the wire or not,
	// by the address as configured.
	for _, l := range srv.Listen {
		want[`dnsconfigurer_dnsserver_listen_queries_total{listen="`+l+`"}`] = 5
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// The replies AnswerWire wrote are counted with their own size: the
	// UDP reply bytes in the zone are those plus ServeDNS's.
	if all := got[`dnsconfigurer_dnsserver_response_size_bytes_sum{proto="udp",zone="example."}`]; all <= wireBytes {
		t.Errorf("UDP reply bytes in the zone = %v, want more than the %v of the wire answers alone", all, wireBytes)
	}
}

// TestServerNameLabel: with Name set, every metric of the server has the
// label server, so that one job can scrape the cluster DNS and node-local.
func TestServerNameLabel(t *testing.T) {
	srv := &dnsserver.Server{Handler: &wireHandler{}, Name: "nodelocal"}
	addr := startServer(t, srv)
	exchange(t, "udp", addr, "slow.example.")
	reg := testkit.Registry(t, srv)
	got := testkit.Gather(t, reg)
	for _, k := range []string{
		`dnsconfigurer_dnsserver_requests_total{family="1",proto="udp",server="nodelocal",type="A",zone="."}`,
		`dnsconfigurer_dnsserver_responses_total{rcode="NOERROR",server="nodelocal",zone="."}`,
		`dnsconfigurer_dnsserver_request_duration_seconds_count{server="nodelocal",type="A",zone="."}`,
		`dnsconfigurer_dnsserver_request_size_bytes_count{proto="udp",server="nodelocal",zone="."}`,
		`dnsconfigurer_dnsserver_response_size_bytes_count{proto="udp",server="nodelocal",zone="."}`,
	} {
		if got[k] != 1 {
			t.Errorf("%s = %v, want 1", k, got[k])
		}
	}
	for _, k := range []string{"panics_total", "udp_dropped_total", "tcp_refused_total", "tcp_connections", "lameduck"} {
		if _, ok := got[`dnsconfigurer_dnsserver_`+k+`{server="nodelocal"}`]; !ok {
			t.Errorf("dnsconfigurer_dnsserver_%s has no server label: %v", k, got)
		}
	}
}

// TestDOCounted: queries with the DO bit are counted by zone, answered
// from the wire form or by ServeDNS, over UDP and TCP; EDNS0 without DO
// and plain queries are not.
func TestDOCounted(t *testing.T) {
	h := &wireHandler{}
	srv := &dnsserver.Server{Handler: h, Zones: []string{"example"}}
	addr := startServer(t, srv)
	ask := func(network, name string, edns, do bool) {
		t.Helper()
		m := new(dns.Msg).SetQuestion(name, dns.TypeA)
		if edns {
			m.SetEdns0(1232, do)
		}
		testkit.Ask(t, network, addr, m)
	}
	ask("udp", "fast.example.", true, true)     // AnswerWire
	ask("udp", "slow.example.", true, true)     // ServeDNS
	ask("tcp", "fast.example.", true, true)     // ServeDNS
	ask("udp", "slow.example.org.", true, true) // outside the zone
	ask("udp", "fast.example.", true, false)    // EDNS0 without DO
	ask("udp", "slow.example.", false, false)   // no EDNS0
	if h.wired.Load() < 1 {
		t.Fatal("no query answered from the wire form")
	}
	reg := testkit.Registry(t, srv)
	got := testkit.Gather(t, reg)
	for k, v := range map[string]float64{
		`dnsconfigurer_dnsserver_do_requests_total{zone="example."}`: 3,
		`dnsconfigurer_dnsserver_do_requests_total{zone="."}`:        1,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
