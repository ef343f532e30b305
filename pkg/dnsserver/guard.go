package dnsserver

import (
	"log/slog"
	"net"
	"runtime/debug"
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// guard is the dns.Handler every listener of a Server calls. It reads the
// current handler per query (so SetHandler swaps it without dropping a
// query), bounds how many UDP queries are answered at once (miekg/dns starts
// a goroutine per datagram: beyond the bound the datagram is dropped, as a
// kernel drops when its buffer is full, and the client retries), and turns a
// panic in the handler into SERVFAIL: the replica keeps serving, the panic
// is counted and its stack logged the first time.
type guard struct {
	handler atomic.Pointer[dns.Handler]
	udp     chan struct{}
	log     *slog.Logger

	panics     atomic.Uint64
	udpDropped atomic.Uint64
	tcpRefused atomic.Uint64
	tcpOpen    atomic.Int64
	loggedOnce atomic.Bool
}

func (g *guard) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	udp := isUDP(w)
	if udp {
		select {
		case g.udp <- struct{}{}:
			defer func() { <-g.udp }()
		default:
			g.udpDropped.Add(1)
			return
		}
	}
	defer g.recover(w, r)
	(*g.handler.Load()).ServeDNS(w, r)
}

// recover answers SERVFAIL for a query whose handler panicked. A reply that
// was already written is not written again: the write fails harmlessly on
// UDP, and on TCP the connection is closed so the client is not left waiting.
func (g *guard) recover(w dns.ResponseWriter, r *dns.Msg) {
	v := recover()
	if v == nil {
		return
	}
	g.panicked(v, "answered SERVFAIL")
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeServerFailure)
	if err := w.WriteMsg(m); err != nil && !isUDP(w) {
		w.Close()
	}
}

// panicked counts the handler's panic v, and logs it with its stack and
// what became of the query the first time (called in the deferred function
// that recovered it).
func (g *guard) panicked(v any, then string) {
	g.panics.Add(1)
	if g.loggedOnce.CompareAndSwap(false, true) {
		g.log.Error("dns handler panicked; "+then+" (stack logged once, later panics only counted)",
			"panic", v, "stack", string(debug.Stack()))
	}
}

func isUDP(w dns.ResponseWriter) bool {
	_, ok := w.RemoteAddr().(*net.UDPAddr)
	return ok
}

var (
	panicsDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_panics_total",
		"Queries whose handler panicked (answered SERVFAIL).", nil, nil)
	udpDroppedDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_udp_dropped_total",
		"UDP queries dropped because MaxUDPInFlight queries were being answered.", nil, nil)
	tcpRefusedDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_tcp_refused_total",
		"TCP connections closed at once because MaxTCPConns were open.", nil, nil)
	tcpOpenDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_tcp_connections",
		"Open TCP connections.", nil, nil)
	drainingDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_lameduck",
		"1 while the server is in lameduck (still answering, /readyz failing).", nil, nil)
)

// Describe implements prometheus.Collector for the listener metrics:
// dnsconfigurer_dnsserver_panics_total, _udp_dropped_total,
// _tcp_refused_total, _tcp_connections and _lameduck.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{panicsDesc, udpDroppedDesc, tcpRefusedDesc, tcpOpenDesc, drainingDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	g := s.guard()
	ch <- prometheus.MustNewConstMetric(panicsDesc, prometheus.CounterValue, float64(g.panics.Load()))
	ch <- prometheus.MustNewConstMetric(udpDroppedDesc, prometheus.CounterValue, float64(g.udpDropped.Load()))
	ch <- prometheus.MustNewConstMetric(tcpRefusedDesc, prometheus.CounterValue, float64(g.tcpRefused.Load()))
	ch <- prometheus.MustNewConstMetric(tcpOpenDesc, prometheus.GaugeValue, float64(g.tcpOpen.Load()))
	var d float64
	if s.draining.Load() {
		d = 1
	}
	ch <- prometheus.MustNewConstMetric(drainingDesc, prometheus.GaugeValue, d)
}
