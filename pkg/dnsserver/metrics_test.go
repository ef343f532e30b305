package dnsserver

import (
	"net"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

func TestZoneOf(t *testing.T) {
	m := newRequestMetrics([]string{"cluster.local", "in-addr.arpa.", "Example.COM.", "corp.cluster.local.", ".", "cluster.local."}, nil)
	if want := []string{"corp.cluster.local.", "cluster.local.", "in-addr.arpa.", "example.com.", "."}; len(m.zones) != len(want) {
		t.Fatalf("zones %q, want %q", m.zones, want)
	} else {
		for i := range want {
			if m.zones[i] != want[i] {
				t.Fatalf("zones %q, want %q", m.zones, want)
			}
		}
	}
	cases := []struct{ name, want string }{
		{"web.prod.svc.cluster.local.", "cluster.local."},
		{"WEB.Prod.SVC.Cluster.Local.", "cluster.local."},
		{"web.prod.svc.cluster.local", "cluster.local."},
		{"cluster.local.", "cluster.local."},
		{"a.corp.cluster.local.", "corp.cluster.local."},
		{"xcorp.cluster.local.", "cluster.local."},
		{"notcluster.local.", "."},
		{"1.0.96.10.in-addr.arpa.", "in-addr.arpa."},
		{"www.example.com.", "example.com."},
		{"www.example.org.", "."},
		{".", "."},
		{"", "."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.zones[m.zoneOf(tc.name)]; got != tc.want {
				t.Errorf("zoneOf = %q, want %q", got, tc.want)
			}
			if tc.name == "" {
				return
			}
			q, err := new(dns.Msg).SetQuestion(dns.Fqdn(tc.name), dns.TypeA).Pack()
			if err != nil {
				t.Fatal(err)
			}
			end, ok := dnsmsg.QuestionEnd(q)
			if !ok {
				t.Fatalf("QuestionEnd(%q) failed", tc.name)
			}
			if got := m.zones[m.zoneOfWire(q, 12, end)]; got != tc.want {
				t.Errorf("zoneOfWire = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSlots(t *testing.T) {
	if len(durationBounds)+1 != numBuckets || len(sizeBounds)+1 != numBuckets {
		t.Fatalf("%d and %d bucket bounds, want %d each", len(durationBounds), len(sizeBounds), numBuckets-1)
	}
	for _, tc := range []struct {
		qtype uint16
		want  string
	}{
		{dns.TypeA, "A"}, {dns.TypeHTTPS, "HTTPS"}, {dns.TypeANY, "ANY"}, {dns.TypeAXFR, "AXFR"},
		{dns.TypeHINFO, "other"}, {dns.TypeCAA, "other"}, {0, "other"}, {65535, "other"},
	} {
		if got := typeName(typeSlot(tc.qtype)); got != tc.want {
			t.Errorf("type %d: %q, want %q", tc.qtype, got, tc.want)
		}
	}
	for _, tc := range []struct {
		rcode int
		want  string
	}{
		{0, "NOERROR"}, {2, "SERVFAIL"}, {3, "NXDOMAIN"}, {5, "REFUSED"}, {16, "BADVERS"}, {23, "BADCOOKIE"},
		{12, "other"}, {24, "other"}, {4095, "other"}, {-1, "other"},
	} {
		if got := rcodeName(rcodeSlot(tc.rcode)); got != tc.want {
			t.Errorf("rcode %d: %q, want %q", tc.rcode, got, tc.want)
		}
	}
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.UDPAddr{IP: net.IPv4(192, 0, 2, 1)}, "1"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.1")}, "1"},
		{&net.UDPAddr{IP: net.ParseIP("2001:db8::1")}, "2"},
		{&net.TCPAddr{IP: net.IPv6loopback}, "2"},
	} {
		if got := familyNames[familyOf(tc.addr)]; got != tc.want {
			t.Errorf("family of %v: %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// addrWriter is a dns.ResponseWriter with a fixed client address that
// drops the reply; its other methods are not called.
type addrWriter struct {
	dns.ResponseWriter
	addr net.Addr
}

func (w *addrWriter) RemoteAddr() net.Addr           { return w.addr }
func (w *addrWriter) Write(b []byte) (int, error)    { return len(b), nil }
func (w *addrWriter) WriteMsg(*dns.Msg) error        { return nil }
func (w *addrWriter) setAddr(a net.Addr) *addrWriter { w.addr = a; return w }

// TestCountingAllocatesNothing: once a series is in use, counting a query
// allocates nothing, from its wire form or around ServeDNS.
func TestCountingAllocatesNothing(t *testing.T) {
	s := &Server{Zones: []string{"cluster.local"}, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		_, _ = w.Write(cannedReply)
	})}
	g := s.guard()
	q, _ := new(dns.Msg).SetQuestion("web.prod.svc.cluster.local.", dns.TypeA).Pack()
	addr := &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 4000}
	start := g.req.now()
	if n := testing.AllocsPerRun(100, func() { g.req.wire(q, cannedReply, familyOf(addr), start) }); n != 0 {
		t.Errorf("counting a wire answer: %v allocations, want 0", n)
	}
	req := new(dns.Msg).SetQuestion("web.prod.svc.cluster.local.", dns.TypeA)
	w := (&addrWriter{}).setAddr(addr)
	g.ServeDNS(w, req)
	if n := testing.AllocsPerRun(100, func() { g.ServeDNS(w, req) }); n != 0 {
		t.Errorf("ServeDNS through the guard: %v allocations, want 0", n)
	}
}

var cannedReply = func() []byte {
	m := new(dns.Msg).SetQuestion("web.prod.svc.cluster.local.", dns.TypeA)
	m.Response = true
	m.Answer = []dns.RR{testkit.A("web.prod.svc.cluster.local.", 5, "10.0.0.1")}
	m.SetEdns0(1232, false)
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}()

// BenchmarkCountWire is what the server adds to an answer from the wire
// form (node-local's cache hits): the question's zone and type, the
// reply's rcode, two counters and three histograms.
func BenchmarkCountWire(b *testing.B) {
	m := newRequestMetrics([]string{"cluster.local", "in-addr.arpa", "ip6.arpa", "ap.k8s.io"}, nil)
	q, _ := new(dns.Msg).SetQuestion("web.prod.svc.cluster.local.", dns.TypeA).SetEdns0(1232, false).Pack()
	b.ReportAllocs()
	for b.Loop() {
		m.wire(q, cannedReply, 0, m.now())
	}
}

// BenchmarkGuardServeDNS is the listener's part of a query served by
// ServeDNS (the handler writes a canned reply): the UDP slot, the counting
// writer, the request and response metrics.
func BenchmarkGuardServeDNS(b *testing.B) {
	s := &Server{Zones: []string{"cluster.local"}, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		_, _ = w.Write(cannedReply)
	})}
	g := s.guard()
	req := new(dns.Msg).SetQuestion("web.prod.svc.cluster.local.", dns.TypeA)
	w := (&addrWriter{}).setAddr(&net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 4000})
	b.ReportAllocs()
	for b.Loop() {
		g.ServeDNS(w, req)
	}
}

// TestHistogram: observations fall in the first bucket whose bound they
// do not exceed (Prometheus's le), and the export is cumulative with the
// sum scaled.
func TestHistogram(t *testing.T) {
	var h histogram
	for _, v := range []uint64{0, 100, 101, 70000} {
		h.observe(sizeBounds, v)
	}
	desc := prometheus.NewDesc("x", "x", nil, nil)
	if _, ok := (&histogram{}).metric(desc, sizeBuckets, 1); ok {
		t.Error("an empty histogram is exported")
	}
	m, ok := h.metric(desc, sizeBuckets, 0.5)
	if !ok {
		t.Fatal("not exported")
	}
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		t.Fatal(err)
	}
	got := map[float64]uint64{}
	for _, b := range pb.GetHistogram().GetBucket() {
		got[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	for le, want := range map[float64]uint64{0: 1, 100: 2, 200: 3, 48e3: 3, 64e3: 3} {
		if got[le] != want {
			t.Errorf("le %v: %d, want %d", le, got[le], want)
		}
	}
	if c, s := pb.GetHistogram().GetSampleCount(), pb.GetHistogram().GetSampleSum(); c != 4 || s != 70201*0.5 {
		t.Errorf("count %d sum %v, want 4 and %v", c, s, 70201*0.5)
	}
}
