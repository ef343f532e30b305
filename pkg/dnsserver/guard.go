package dnsserver

import (
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// guard is the dns.Handler every listener of a Server calls. It reads the
// current handler per query (so SetHandler swaps it without dropping a
// query), bounds how many UDP queries are answered at once (miekg/dns starts
// a goroutine per datagram: beyond the bound the datagram is dropped, as a
// kernel drops when its buffer is full, and the client retries), counts the
// query and its reply (requestMetrics), and turns a panic in the handler
// into SERVFAIL: the replica keeps serving, the panic is counted and its
// stack logged the first time.
type guard struct {
	handler atomic.Pointer[dns.Handler]
	udp     chan struct{}
	log     *slog.Logger
	req     *requestMetrics
	descs   listenerDescs

	panics     atomic.Uint64
	udpDropped atomic.Uint64
	tcpRefused atomic.Uint64
	tcpEvicted atomic.Uint64
	// tcpClientLimited: connections closed at once for their client's
	// MaxTCPConnsPerClient.
	tcpClientLimited atomic.Uint64
	tcpOpen          atomic.Int64
	// tcpMalformed: connections closed at once for a message that does
	// not parse (or a response); tcpWaited: queries whose connection was
	// not read until an in-flight slot freed; tcpInFlight: queries being
	// answered.
	tcpMalformed atomic.Uint64
	tcpWaited    atomic.Uint64
	tcpInFlight  atomic.Int64
	loggedOnce   atomic.Bool

	mu      sync.Mutex
	listens []*listenCount // by listen address, in Start's order
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
	cw := countingWriters.Get().(*countingWriter)
	cw.ResponseWriter, cw.m, cw.q, cw.counted = w, g.req, g.req.start(r, w.RemoteAddr(), udp), false
	defer countingWriters.Put(cw)
	defer cw.release()
	defer g.recover(cw, r)
	(*g.handler.Load()).ServeDNS(cw, r)
}

// countingWriter counts the reply to one query as it is written, before it
// leaves (a client holding its answer finds it in the metrics). A reply
// written twice (a panic after the write) is counted once.
type countingWriter struct {
	dns.ResponseWriter
	m       *requestMetrics
	q       query
	counted bool
}

var countingWriters = sync.Pool{New: func() any { return new(countingWriter) }}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.count(dnsmsg.Rcode(b), len(b))
	return w.ResponseWriter.Write(b)
}

func (w *countingWriter) WriteMsg(m *dns.Msg) error {
	w.count(m.Rcode, m.Len())
	return w.ResponseWriter.WriteMsg(m)
}

func (w *countingWriter) count(rcode, size int) {
	if !w.counted {
		w.counted = true
		w.m.response(w.q, rcode, size)
	}
}

// release drops the query's writer before the countingWriter is reused.
func (w *countingWriter) release() { w.ResponseWriter, w.m = nil, nil }

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

// listenerDescs are the descriptors of the listener metrics of a Server.
type listenerDescs struct {
	panics, udpDropped, tcpRefused, tcpEvicted, tcpClientLimited, tcpOpen, draining, listenQueries *prometheus.Desc
	tcpMalformed, tcpWaited, tcpInFlight                                                           *prometheus.Desc
}

func newListenerDescs(labels prometheus.Labels) listenerDescs {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_"+name, help, nil, labels)
	}
	return listenerDescs{
		panics:           d("panics_total", "Queries whose handler panicked (answered SERVFAIL)."),
		udpDropped:       d("udp_dropped_total", "UDP queries dropped because MaxUDPInFlight queries were being answered."),
		tcpRefused:       d("tcp_refused_total", "TCP connections closed at once because MaxTCPConns were open and none could be evicted."),
		tcpEvicted:       d("tcp_evicted_total", "TCP connections closed to make room for a new one when MaxTCPConns were open (of the client holding the most, busy or idle)."),
		tcpClientLimited: d("tcp_client_limited_total", "TCP connections closed at once because their client address held MaxTCPConnsPerClient."),
		tcpOpen:          d("tcp_connections", "Open TCP connections."),
		tcpMalformed:     d("tcp_malformed_total", "TCP connections closed at once for a message whose header does not parse, or a response."),
		tcpWaited:        d("tcp_waited_total", "TCP queries whose connection was not read until an in-flight slot freed (its own, or its client's share)."),
		tcpInFlight:      d("tcp_queries_in_flight", "TCP queries being answered."),
		draining:         d("lameduck", "1 while the server is in lameduck (still answering, /readyz failing)."),
		listenQueries: prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_listen_queries_total",
			"Queries received on each listen address as configured (UDP and TCP, answered from the wire or not).", []string{"listen"}, labels),
	}
}

// Describe implements prometheus.Collector for the listener metrics, each
// with the label server=Name when Name is set: the request metrics
// (dnsconfigurer_dnsserver_requests_total, _responses_total,
// _request_duration_seconds, _request_size_bytes, _response_size_bytes;
// see Server.Zones), and dnsconfigurer_dnsserver_panics_total,
// _udp_dropped_total, _tcp_refused_total, _tcp_evicted_total,
// _tcp_client_limited_total, _tcp_connections, _tcp_malformed_total,
// _tcp_waited_total, _tcp_queries_in_flight, _lameduck and
// _listen_queries_total{listen} (one series per Listen address once
// started).
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	g := s.guard()
	ds := g.descs
	for _, d := range []*prometheus.Desc{ds.panics, ds.udpDropped, ds.tcpRefused, ds.tcpEvicted, ds.tcpClientLimited, ds.tcpOpen,
		ds.tcpMalformed, ds.tcpWaited, ds.tcpInFlight, ds.draining, ds.listenQueries} {
		ch <- d
	}
	g.req.describe(ch)
}

// Collect implements prometheus.Collector.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	g := s.guard()
	g.req.collect(ch)
	d := g.descs
	ch <- prometheus.MustNewConstMetric(d.panics, prometheus.CounterValue, float64(g.panics.Load()))
	ch <- prometheus.MustNewConstMetric(d.udpDropped, prometheus.CounterValue, float64(g.udpDropped.Load()))
	ch <- prometheus.MustNewConstMetric(d.tcpRefused, prometheus.CounterValue, float64(g.tcpRefused.Load()))
	ch <- prometheus.MustNewConstMetric(d.tcpEvicted, prometheus.CounterValue, float64(g.tcpEvicted.Load()))
	ch <- prometheus.MustNewConstMetric(d.tcpClientLimited, prometheus.CounterValue, float64(g.tcpClientLimited.Load()))
	ch <- prometheus.MustNewConstMetric(d.tcpOpen, prometheus.GaugeValue, float64(g.tcpOpen.Load()))
	ch <- prometheus.MustNewConstMetric(d.tcpMalformed, prometheus.CounterValue, float64(g.tcpMalformed.Load()))
	ch <- prometheus.MustNewConstMetric(d.tcpWaited, prometheus.CounterValue, float64(g.tcpWaited.Load()))
	ch <- prometheus.MustNewConstMetric(d.tcpInFlight, prometheus.GaugeValue, float64(g.tcpInFlight.Load()))
	var draining float64
	if s.draining.Load() {
		draining = 1
	}
	ch <- prometheus.MustNewConstMetric(d.draining, prometheus.GaugeValue, draining)
	g.mu.Lock()
	listens := g.listens
	g.mu.Unlock()
	for _, l := range listens {
		ch <- prometheus.MustNewConstMetric(d.listenQueries, prometheus.CounterValue, float64(l.queries.Load()), l.addr)
	}
}

// listenCount counts the queries of one listen address, both transports.
type listenCount struct {
	addr    string
	queries atomic.Uint64
}

// listen returns the counter of the listen address addr, made on first
// use (a second Start counts on).
func (g *guard) listen(addr string) *listenCount {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.listens {
		if l.addr == addr {
			return l
		}
	}
	l := &listenCount{addr: addr}
	g.listens = append(g.listens, l)
	return l
}

// listenHandler is the handler of one listen address: it counts the query
// there, then serves it through the guard.
type listenHandler struct {
	g *guard
	c *listenCount
}

func (h listenHandler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	h.c.queries.Add(1)
	h.g.ServeDNS(w, r)
}
