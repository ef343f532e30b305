package dnsserver

import (
	"encoding/binary"
	"math"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

const (
	metricNamespace = "dnsconfigurer"
	metricSubsystem = "dnsserver"
)

// The label values of the request metrics are bounded: the query types of
// monitoredTypes by name and "other"; rcodes by name (dns.RcodeToString,
// BADVERS for 16) and "other"; proto udp or tcp; family 1 (IPv4) or 2 (IPv6),
// as CoreDNS's; zone one of Server.Zones or ".".

// monitoredTypes are the query types counted under their own name (CoreDNS's
// list, plus SVCB); every other type is "other".
var monitoredTypes = [...]uint16{dns.TypeA, dns.TypeAAAA, dns.TypeCNAME, dns.TypeMX, dns.TypeNS, dns.TypePTR,
	dns.TypeSOA, dns.TypeSRV, dns.TypeTXT, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeDS, dns.TypeDNSKEY, dns.TypeRRSIG,
	dns.TypeNSEC, dns.TypeNSEC3, dns.TypeIXFR, dns.TypeAXFR, dns.TypeANY}

const (
	otherType = len(monitoredTypes) // the slot of "other"
	numTypes  = otherType + 1
	// numRcodes is the slots of the rcodes: 0-23 (RcodeToString names all
	// but 12-15, which are "other") and "other".
	numRcodes  = 25
	otherRcode = numRcodes - 1
)

// typeSlots maps a query type below 256 to its slot (every monitored type
// is below 256); 0 is "other", else the slot plus one.
var typeSlots = func() (s [256]uint8) {
	for i, t := range monitoredTypes {
		s[t] = uint8(i + 1)
	}
	return s
}()

func typeSlot(qtype uint16) int {
	if qtype < 256 {
		if s := typeSlots[qtype]; s > 0 {
			return int(s - 1)
		}
	}
	return otherType
}

func typeName(slot int) string {
	if slot == otherType {
		return "other"
	}
	return dns.TypeToString[monitoredTypes[slot]]
}

// namedRcodes are the rcodes below otherRcode that miekg/dns names.
var namedRcodes = func() (n [otherRcode]bool) {
	for rc := range n {
		_, n[rc] = dns.RcodeToString[rc]
	}
	return n
}()

func rcodeSlot(rcode int) int {
	if rcode >= 0 && rcode < otherRcode && namedRcodes[rcode] {
		return rcode
	}
	return otherRcode
}

func rcodeName(slot int) string {
	switch slot {
	case otherRcode:
		return "other"
	case dns.RcodeBadVers:
		// Shared with BADSIG (TSIG), which miekg/dns names; a server
		// without TSIG answers BADVERS.
		return "BADVERS"
	}
	return dns.RcodeToString[slot]
}

var (
	protoNames  = [2]string{"udp", "tcp"}
	familyNames = [2]string{"1", "2"}
)

// familyOf is the slot of the client's address family: 0 for IPv4
// (IPv4-mapped IPv6 included), 1 for IPv6.
func familyOf(a net.Addr) int {
	if dnsmsg.ClientAddr(a).Is6() {
		return 1
	}
	return 0
}

// Bucket bounds of the request metrics: durations from 10µs (a cache hit)
// to 2.5s (past the forwarding timeout), in seconds; sizes as CoreDNS's, in
// bytes. The bounds compare observations in nanoseconds and bytes.
var (
	durationBuckets = []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 2.5}
	sizeBuckets     = []float64{0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3, 32e3, 48e3, 64e3}

	durationBounds = intBounds(durationBuckets, 1e9)
	sizeBounds     = intBounds(sizeBuckets, 1)
)

// intBounds are the bucket bounds in the integer unit of the observations
// (scale units per bucket unit).
func intBounds(buckets []float64, scale float64) []uint64 {
	b := make([]uint64, len(buckets))
	for i, v := range buckets {
		b[i] = uint64(math.Round(v * scale))
	}
	return b
}

// numBuckets is the buckets of a histogram: one per bound and +Inf (both
// bound lists have 14).
const numBuckets = 15

// histogram is one series of a histogram of integer observations
// (nanoseconds or bytes): an atomic count per bucket (not cumulative) and
// the sum, exported at scrape time with the sum scaled (nanoseconds to
// seconds). Observing is two atomic adds; a Prometheus histogram makes
// four, one a compare-and-swap loop for its float sum.
type histogram struct {
	counts [numBuckets]atomic.Uint64
	sum    atomic.Uint64
}

func (h *histogram) observe(bounds []uint64, v uint64) {
	i := 0
	for i < len(bounds) && v > bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(v)
}

// metric is the series as a Prometheus const histogram with the bucket
// bounds les and the sum times scale, and false when it has no
// observation.
func (h *histogram) metric(desc *prometheus.Desc, les []float64, scale float64, labels ...string) (prometheus.Metric, bool) {
	var n uint64
	buckets := make(map[float64]uint64, len(les))
	for i, le := range les {
		n += h.counts[i].Load()
		buckets[le] = n
	}
	n += h.counts[len(les)].Load()
	if n == 0 {
		return nil, false
	}
	return prometheus.MustNewConstHistogram(desc, n, float64(h.sum.Load())*scale, buckets, labels...), true
}

// requestMetrics are a Server's metrics of the queries it answers, the
// information of CoreDNS's coredns_dns_* families:
//
//   - dnsconfigurer_dnsserver_requests_total{zone,proto,family,type}
//   - dnsconfigurer_dnsserver_responses_total{zone,rcode}
//   - dnsconfigurer_dnsserver_request_duration_seconds{zone,type}
//   - dnsconfigurer_dnsserver_request_size_bytes{zone,proto}
//   - dnsconfigurer_dnsserver_response_size_bytes{zone,proto}
//   - dnsconfigurer_dnsserver_do_requests_total{zone}
//
// Every series is an atomic counter (or histogram) in an array indexed by
// the label values' slots, read at scrape time, which reports the series
// that have counted something: counting a query hashes no label values,
// takes no lock and allocates nothing. Durations are measured on the
// monotonic clock from base.
type requestMetrics struct {
	zones    []string // label values, longest first; "." last
	zoneWire [][]byte // zones[i] in wire form, lowercase; nil for "."
	base     time.Time

	requests, responses, duration, reqSize, respSize, do *prometheus.Desc

	by []zoneSeries // by zone index
}

// zoneSeries are the series of one zone.
type zoneSeries struct {
	requests          [2][2][numTypes]atomic.Uint64 // proto, family, type
	responses         [numRcodes]atomic.Uint64
	duration          [numTypes]histogram
	reqSize, respSize [2]histogram  // proto
	do                atomic.Uint64 // queries with the DO bit
}

// newRequestMetrics returns the metrics labelled with zones (lowercased,
// made fully qualified, duplicates and "." dropped; "." is always the
// last), with the constant labels. A zone that is not a domain name never
// matches.
func newRequestMetrics(zones []string, labels prometheus.Labels) *requestMetrics {
	m := &requestMetrics{base: time.Now()}
	for _, z := range zones {
		z = strings.ToLower(dns.Fqdn(z))
		if z == "." || slices.Contains(m.zones, z) {
			continue
		}
		m.zones = append(m.zones, z)
	}
	// Longest first: the first zone that contains a name is its closest.
	for i := 1; i < len(m.zones); i++ {
		for j := i; j > 0 && len(m.zones[j]) > len(m.zones[j-1]); j-- {
			m.zones[j], m.zones[j-1] = m.zones[j-1], m.zones[j]
		}
	}
	for _, z := range m.zones {
		buf := make([]byte, 256)
		n, err := dns.PackDomainName(z, buf, 0, nil, false)
		if err != nil {
			buf, n = nil, 0
		}
		m.zoneWire = append(m.zoneWire, buf[:n:n])
	}
	m.zones = append(m.zones, ".")
	m.zoneWire = append(m.zoneWire, nil)
	m.by = make([]zoneSeries, len(m.zones))

	desc := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_"+name, help, variable, labels)
	}
	m.requests = desc("requests_total", "DNS queries received, by the closest zone of the server containing the name, "+
		"transport, client address family (1 IPv4, 2 IPv6) and query type.", "zone", "proto", "family", "type")
	m.responses = desc("responses_total", "DNS replies written, by zone and response code.", "zone", "rcode")
	m.duration = desc("request_duration_seconds", "Time from reading a query to writing its reply (forwarding included), by zone and query type.", "zone", "type")
	m.reqSize = desc("request_size_bytes", "Size of the queries in bytes, by zone and transport.", "zone", "proto")
	m.respSize = desc("response_size_bytes", "Size of the replies in bytes, by zone and transport.", "zone", "proto")
	m.do = desc("do_requests_total", "DNS queries with the DO bit (DNSSEC OK) set in their EDNS0 OPT record, by zone.", "zone")
	return m
}

func (m *requestMetrics) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.requests, m.responses, m.duration, m.reqSize, m.respSize, m.do} {
		ch <- d
	}
}

// collect sends the series that have counted something.
func (m *requestMetrics) collect(ch chan<- prometheus.Metric) {
	hist := func(h *histogram, desc *prometheus.Desc, les []float64, scale float64, labels ...string) {
		if metric, ok := h.metric(desc, les, scale, labels...); ok {
			ch <- metric
		}
	}
	for z := range m.by {
		zs, zone := &m.by[z], m.zones[z]
		for p := range zs.requests {
			for f := range zs.requests[p] {
				for t := range zs.requests[p][f] {
					if n := zs.requests[p][f][t].Load(); n > 0 {
						ch <- prometheus.MustNewConstMetric(m.requests, prometheus.CounterValue, float64(n), zone, protoNames[p], familyNames[f], typeName(t))
					}
				}
			}
			hist(&zs.reqSize[p], m.reqSize, sizeBuckets, 1, zone, protoNames[p])
			hist(&zs.respSize[p], m.respSize, sizeBuckets, 1, zone, protoNames[p])
		}
		if n := zs.do.Load(); n > 0 {
			ch <- prometheus.MustNewConstMetric(m.do, prometheus.CounterValue, float64(n), zone)
		}
		for rc := range zs.responses {
			if n := zs.responses[rc].Load(); n > 0 {
				ch <- prometheus.MustNewConstMetric(m.responses, prometheus.CounterValue, float64(n), zone, rcodeName(rc))
			}
		}
		for t := range zs.duration {
			hist(&zs.duration[t], m.duration, durationBuckets, 1e-9, zone, typeName(t))
		}
	}
}

// now is the time since base, on the monotonic clock.
func (m *requestMetrics) now() time.Duration { return time.Since(m.base) }

// query is what labels one query's series, and when it was read (now).
type query struct {
	zone, proto, family, typ int
	start                    time.Duration
}

// zoneOf is the index of the closest zone containing name.
func (m *requestMetrics) zoneOf(name string) int {
	if name != "" && name[len(name)-1] != '.' {
		name += "."
	}
	for i, z := range m.zones[:len(m.zones)-1] {
		if len(name) >= len(z) && strings.EqualFold(name[len(name)-len(z):], z) &&
			(len(name) == len(z) || name[len(name)-len(z)-1] == '.') {
			return i
		}
	}
	return len(m.zones) - 1
}

// zoneOfWire is the index of the closest zone containing the name of the
// packed question at q[off:end] (end is past its root label).
func (m *requestMetrics) zoneOfWire(q []byte, off, end int) int {
	for s := off; s < end; s += int(q[s]) + 1 {
		for i, z := range m.zoneWire[:len(m.zoneWire)-1] {
			if len(z) == end-s && equalFoldASCII(q[s:end], z) {
				return i
			}
		}
	}
	return len(m.zones) - 1
}

// equalFoldASCII compares a packed name with a lowercase one (length
// octets are below 64: folding leaves them alone).
func equalFoldASCII(b, lower []byte) bool {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// start counts the query r (from addr, over UDP or TCP) and returns what
// its reply is counted with.
func (m *requestMetrics) start(r *dns.Msg, addr net.Addr, udp bool) query {
	q := query{zone: len(m.zones) - 1, typ: otherType, family: familyOf(addr), start: m.now()}
	if !udp {
		q.proto = 1
	}
	if len(r.Question) > 0 {
		q.zone = m.zoneOf(r.Question[0].Name)
		q.typ = typeSlot(r.Question[0].Qtype)
	}
	m.request(q, r.Len())
	if o := r.IsEdns0(); o != nil && o.Do() {
		m.by[q.zone].do.Add(1)
	}
	return q
}

func (m *requestMetrics) request(q query, size int) {
	zs := &m.by[q.zone]
	zs.requests[q.proto][q.family][q.typ].Add(1)
	zs.reqSize[q.proto].observe(sizeBounds, uint64(size))
}

// response counts the reply to q.
func (m *requestMetrics) response(q query, rcode, size int) {
	zs := &m.by[q.zone]
	zs.responses[rcodeSlot(rcode)].Add(1)
	d := m.now() - q.start
	if d < 0 {
		d = 0
	}
	zs.duration[q.typ].observe(durationBounds, uint64(d))
	zs.respSize[q.proto].observe(sizeBounds, uint64(size))
}

// wire counts a UDP query answered from its wire form (q, a datagram of at
// least a header) with reply, from a client of the family slot family,
// read at start (now).
func (m *requestMetrics) wire(q, reply []byte, family int, start time.Duration) {
	qr := query{zone: len(m.zones) - 1, typ: otherType, family: family, start: start}
	end, ok := dnsmsg.QuestionEnd(q)
	if ok {
		qr.zone = m.zoneOfWire(q, 12, end)
		qr.typ = typeSlot(binary.BigEndian.Uint16(q[end:]))
	}
	m.request(qr, len(q))
	if ok && dnsmsg.QueryDO(q, end) {
		m.by[qr.zone].do.Add(1)
	}
	m.response(qr, dnsmsg.Rcode(reply), len(reply))
}
