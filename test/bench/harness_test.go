package bench

// The harness's own tests: they run without DNSCONFIGURER_BENCH, in about
// three seconds, against in-process stubs.

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

func TestClosedLoopCounts(t *testing.T) {
	s := startStub(t)
	for _, c := range []struct {
		name     string
		question string
		wantOK   bool
	}{
		{"answer", cachedName, true},
		{"no answer", "www.example.org.", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := s.queries.Load()
			wire, err := question(c.question, dns.TypeA).Pack()
			if err != nil {
				t.Fatal(err)
			}
			res, err := closedLoop(s.addr, wire, 4, 200*time.Millisecond, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			replies := res.answered + res.bad
			if replies == 0 || res.timeouts != 0 || int64(len(res.lat)) != replies {
				t.Fatalf("%d answered, %d wrong, %d timeouts, %d latencies", res.answered, res.bad, res.timeouts, len(res.lat))
			}
			if got := s.queries.Load() - before; got != replies {
				t.Errorf("stub saw %d queries, the generator counted %d replies", got, replies)
			}
			if ok := res.bad == 0; ok != c.wantOK || (res.answered > 0) != c.wantOK {
				t.Errorf("%d answered, %d wrong; want all answered %v", res.answered, res.bad, c.wantOK)
			}
		})
	}
}

func TestClosedLoopTimesOut(t *testing.T) {
	d := startDead(t)
	wire, err := question(cachedName, dns.TypeA).Pack()
	if err != nil {
		t.Fatal(err)
	}
	res, err := closedLoop(d.Addr, wire, 2, 200*time.Millisecond, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.answered != 0 || res.bad != 0 || res.timeouts < 2 {
		t.Errorf("%d answered, %d wrong, %d timeouts; want only timeouts", res.answered, res.bad, res.timeouts)
	}
}

// servfailer answers SERVFAIL to every query except those whose first
// label's number is a multiple of 10, which it drops.
type servfailer struct{ dropped atomic.Int64 }

func (s *servfailer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	label := strings.SplitN(r.Question[0].Name, ".", 2)[0]
	if n, err := strconv.Atoi(strings.TrimPrefix(label, "f")); err == nil && n%10 == 0 {
		s.dropped.Add(1)
		return
	}
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeServerFailure)
	w.WriteMsg(m)
}

func TestFloodAccountsForEveryQuery(t *testing.T) {
	h := &servfailer{}
	addr := testkit.NewUpstream(t, h, testkit.UDPOnly(), testkit.CountOnly()).Addr

	const qps, d = 500, time.Second
	res, err := flood(addr, uniqueNames(floodZone), qps, d, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.sent < qps/2 || res.sent > qps { // the pacer catches up unless the last ticks come late
		t.Errorf("sent %d queries in %v at %d qps", res.sent, d, qps)
	}
	if got := len(res.replies) + len(res.lost); got != res.sent {
		t.Errorf("%d replies + %d unanswered, want %d sent", len(res.replies), len(res.lost), res.sent)
	}
	if got := int64(len(res.lost)); got != h.dropped.Load() {
		t.Errorf("%d unanswered, the server dropped %d", got, h.dropped.Load())
	}
	for _, r := range res.replies {
		if r.rcode != dns.RcodeServerFailure || r.lat <= 0 || r.sent > d {
			t.Fatalf("reply %+v", r)
		}
	}
	if res.stray != 0 {
		t.Errorf("%d stray replies", res.stray)
	}
}

// goodFlood is a report that meets every target: the first second waits
// 2 s for SERVFAIL, then every answer takes 200 µs.
func goodFlood() floodReport {
	r := floodReport{server: "test", deadPackets: 10, end: usage{hwmKiB: 50 << 10}}
	for i := range 20000 {
		sent, lat := time.Duration(i)*time.Millisecond, 200*time.Microsecond
		if sent < time.Second {
			lat = 2 * time.Second
		}
		r.res.replies = append(r.res.replies, floodReply{sent: sent, lat: lat, rcode: dns.RcodeServerFailure})
	}
	r.res.sent = len(r.res.replies)
	for i := range 20 {
		r.samples = append(r.samples, sample{at: time.Duration(i) * time.Second, goroutines: 100, u: usage{rssKiB: 50 << 10, hwmKiB: 50 << 10}})
	}
	for i := range 200 {
		r.probes = append(r.probes, probe{at: time.Duration(i) * 100 * time.Millisecond, lat: time.Millisecond, ok: true})
	}
	return r
}

// spoiled is a report spoiled one way, and what the one violation it
// then has must say.
type spoiled[R any] struct {
	name  string
	spoil func(R)
	want  string
}

// wantViolations checks that good() has no violations and that each case
// spoils it into exactly one, naming what the case wants.
func wantViolations[R any](t *testing.T, good func() R, violations func(R) []string, cases []spoiled[R]) {
	t.Helper()
	if v := violations(good()); len(v) != 0 {
		t.Fatalf("the good report violates %q", v)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := good()
			c.spoil(r)
			if v := violations(r); len(v) != 1 || !strings.Contains(v[0], c.want) {
				t.Errorf("violations %q, want one with %q", v, c.want)
			}
		})
	}
}

func TestFloodViolations(t *testing.T) {
	good := func() *floodReport { r := goodFlood(); return &r }
	violations := func(r *floodReport) []string { return floodViolations(*r) }
	wantViolations(t, good, violations, []spoiled[*floodReport]{
		{"goroutines", func(r *floodReport) { r.samples[5].goroutines = 3001 }, "3001 goroutines"},
		{"not scraped", func(r *floodReport) {
			for i := range r.samples {
				r.samples[i].goroutines = -1
			}
		}, "never scraped"},
		{"rss", func(r *floodReport) { r.end.hwmKiB = 201 << 10 }, "201.0 MiB"},
		{"upstreams never asked", func(r *floodReport) { r.deadPackets = 0 }, "never asked"},
		{"slow servfail", func(r *floodReport) {
			for i := range 300 {
				r.res.replies[i].lat = 3 * time.Second
			}
		}, "within 2.5s"},
		{"unanswered", func(r *floodReport) {
			// 0.9% of all, 1.1% of those after 3.5 s
			for _, rep := range r.res.replies[5000:5180] {
				r.res.lost = append(r.res.lost, rep.sent)
			}
			r.res.replies = append(r.res.replies[:5000], r.res.replies[5180:]...)
		}, "after the flood began answered"},
		{"past the timeout after detection", func(r *floodReport) {
			for i := 10000; i < 10200; i++ {
				r.res.replies[i].lat = 3 * time.Second
			}
		}, "reply p99 3s"},
		{"no servfail", func(r *floodReport) {
			for i := range r.res.replies {
				r.res.replies[i].rcode = dns.RcodeRefused
			}
		}, "no SERVFAIL"},
		{"in-cluster lost", func(r *floodReport) { r.probes[100].ok = false }, "1 of 200 probes"},
		{"in-cluster slow", func(r *floodReport) {
			for i := range 5 {
				r.probes[i].lat = 150 * time.Millisecond
			}
		}, "p99 150ms"},
	})
}

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := range 100 {
		lat = append(lat, time.Duration(i+1)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := percentile(lat, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of none = %v", got)
	}
}

func TestClusterStubTransports(t *testing.T) {
	s := startClusterStub(t)
	big := fillName(3) // 241 A records, about 3.9 KB
	for _, c := range []struct {
		name    string
		net     string
		edns    uint16 // 0: none
		q       string
		wantTC  bool
		wantErr func(*dns.Msg) error
	}{
		{"cluster name udp", "udp", 0, clusterName, false, answersA(clusterIP)},
		{"cluster name tcp", "tcp", 0, clusterName, false, answersA(clusterIP)},
		{"fill udp 1232 truncated", "udp", 1232, big, true, nil},
		{"fill udp 4096", "udp", 4096, big, false, func(r *dns.Msg) error { return checkFill(3, r) }},
		{"fill tcp", "tcp", 0, big, false, func(r *dns.Msg) error { return checkFill(3, r) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := question(c.q, dns.TypeA)
			if c.edns > 0 {
				q.SetEdns0(c.edns, false)
			}
			cl := &dns.Client{Net: c.net, UDPSize: max(c.edns, dns.MinMsgSize), Timeout: time.Second}
			r, _, err := cl.Exchange(q, s.addr)
			if err != nil {
				t.Fatal(err)
			}
			if r.Truncated != c.wantTC {
				t.Errorf("truncated %v, want %v", r.Truncated, c.wantTC)
			}
			if c.wantTC {
				r.Compress = true
				if n := r.Len(); n > int(c.edns) {
					t.Errorf("truncated reply of %d bytes, want at most %d", n, c.edns)
				}
				return
			}
			if err := c.wantErr(r); err != nil {
				t.Error(err)
			}
		})
	}
	if s.udp.Load() != 3 || s.tcp.Load() != 2 || s.cached.Load() != 2 || s.fill.Load() != 3 {
		t.Errorf("stub counted %d UDP, %d TCP, %d cluster, %d fill queries; want 3, 2, 2, 3", s.udp.Load(), s.tcp.Load(), s.cached.Load(), s.fill.Load())
	}
}

func TestFillAnswersEveryName(t *testing.T) {
	s := startClusterStub(t)
	const names = 200
	res, err := fill(s.addr, names, 4, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.sent != names || res.answered != names || res.wrong != 0 || res.failed != 0 {
		t.Fatalf("%+v, want %d answered", res, names)
	}
	if got := s.fill.Load(); got != names {
		t.Errorf("stub saw %d fill queries, want %d", got, names)
	}
	// 1.1 to 3.9 KB each
	if res.bytes < names*1000 || res.bytes > names*4000 {
		t.Errorf("%d bytes of answers for %d names", res.bytes, names)
	}
	if err := checkFill(5, question(fillName(5), dns.TypeA)); err == nil {
		t.Error("checkFill accepted an empty reply")
	}
}

// goodFill is a fill report within every bound.
func goodFill() fillReport {
	return fillReport{
		server:        "test",
		res:           fillResult{sent: 100000, answered: 100000, bytes: 240 << 20, took: 20 * time.Second},
		maxCacheBytes: 30 << 20, endCacheBytes: 29 << 20, maxEntries: 10000, endEntries: 10000, scrapes: 80,
		maxRSSKiB: 90 << 10, end: usage{rssKiB: 80 << 10, hwmKiB: 95 << 10},
	}
}

func TestFillViolations(t *testing.T) {
	good := func() *fillReport { r := goodFill(); return &r }
	violations := func(r *fillReport) []string { return fillViolations(*r) }
	wantViolations(t, good, violations, []spoiled[*fillReport]{
		{"wrong", func(r *fillReport) { r.res.wrong, r.res.firstBad = 1, "fill-7: rcode SERVFAIL" }, "fill-7: rcode SERVFAIL"},
		{"unanswered", func(r *fillReport) { r.res.failed = 2 }, "2 unanswered"},
		{"too little", func(r *fillReport) { r.res.bytes = 60 << 20 }, "offered 60.0 MiB"},
		{"not scraped", func(r *fillReport) { r.maxCacheBytes, r.endCacheBytes = -1, -1 }, "never scraped"},
		{"cache", func(r *fillReport) { r.endCacheBytes = 33 << 20 }, "33.0 MiB, want at most 32"},
		{"hwm", func(r *fillReport) { r.end.hwmKiB = 129 << 10 }, "129.0 MiB (VmHWM)"},
		{"rss sample", func(r *fillReport) { r.maxRSSKiB = 130 << 10 }, "130.0 MiB (VmHWM)"},
	})
}

func TestMetricSum(t *testing.T) {
	const text = `# HELP dnsconfigurer_cache_bytes Memory.
# TYPE dnsconfigurer_cache_bytes gauge
dnsconfigurer_cache_bytes{kind="denial",server="nodelocal"} 1024
dnsconfigurer_cache_bytes{kind="success",server="nodelocal"} 2.5e+06
dnsconfigurer_cache_bytes{kind="success",server="cluster"} 7
dnsconfigurer_cache_bytes_total 99
go_goroutines 12
`
	for _, c := range []struct {
		metric string
		labels []string
		want   float64
		ok     bool
	}{
		{"dnsconfigurer_cache_bytes", []string{`server="nodelocal"`}, 2501024, true},
		{"dnsconfigurer_cache_bytes", nil, 2501031, true},
		{"dnsconfigurer_cache_bytes", []string{`server="nodelocal"`, `kind="success"`}, 2.5e6, true},
		{"dnsconfigurer_cache_bytes", []string{`server="other"`}, 0, false},
		{"go_goroutines", nil, 12, true},
		{"go_gor", nil, 0, false},
	} {
		if got, ok := metricSum(text, c.metric, c.labels...); got != c.want || ok != c.ok {
			t.Errorf("metricSum(%s, %q) = %v, %v; want %v, %v", c.metric, c.labels, got, ok, c.want, c.ok)
		}
	}
}
