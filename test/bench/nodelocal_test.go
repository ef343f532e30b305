package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

var (
	fillNames = flag.Int("fill-names", 100000, "TestNodeLocalMemoryFill: distinct names asked of each server")
	fillConns = flag.Int("fill-conns", 16, "TestNodeLocalMemoryFill: TCP connections, one query in flight each")
	fillFor   = flag.Duration("fill-for", 30*time.Second, "TestNodeLocalMemoryFill: longest fill per server")
)

const (
	// fillZone holds the names of the fill: fill-<n>.<fillZone>, in the
	// cluster zone, so the node-local stage asks --cluster-upstream.
	fillZone = "example.svc.cluster.local."
	// fillCacheSize is the node-local stage's --cache-size in the fill.
	fillCacheSize = 32 << 20
	// maxNodeLocalHWMKiB is the DaemonSet's memory limit
	// (deploy/nodelocal/daemonset.yaml): the fill's peak RSS must stay
	// within it.
	maxNodeLocalHWMKiB = 128 << 10
	// qpsTarget and cpuTarget are issue 28's targets for the node-local
	// stage on a cached name: at least this many times CoreDNS's QPS, at
	// most this fraction of its CPU per answer (logged, not asserted).
	qpsTarget = 2.0
	cpuTarget = 1.0 / 3
)

// CoreDNS as NodeLocal DNSCache runs it, reduced to its forward and cache
// lines.
const nodeLocalCorefile = `.:%d {
    bind 127.0.0.1
    forward . %s {
        max_concurrent 1000
    }
    cache 30
    prometheus %s
}
`

// clusterStub is the cluster DNS behind a node-local stage, on UDP and TCP
// of one port (a TCP connection closed after stubTCPQueries queries, as
// dnsconfigurer's own cluster DNS does): clusterName is A clusterIP and
// fill-<n>.<fillZone> is fillRecords(n) A records (1-4 KB packed), all TTL
// 300; every other question is NOERROR without answer (health probes
// included). A UDP reply is truncated to the size the query advertises
// (512 without EDNS0), so large answers come over TCP.
type clusterStub struct {
	addr     string
	cached   atomic.Int64 // A queries for clusterName
	external atomic.Int64 // A queries for cachedName (an external name)
	fill     atomic.Int64 // A queries for fill names
	udp, tcp atomic.Int64 // every query, by transport
}

func startClusterStub(t *testing.T) *clusterStub {
	t.Helper()
	s := &clusterStub{}
	s.addr = serveUDPTCP(t, s)
	return s
}

func (s *clusterStub) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	udp := w.LocalAddr().Network() == "udp"
	if udp {
		s.udp.Add(1)
	} else {
		s.tcp.Add(1)
	}
	m := new(dns.Msg)
	m.SetReply(r)
	if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeA {
		q := r.Question[0]
		name := strings.ToLower(q.Name)
		if name == clusterName {
			s.cached.Add(1)
			m.Answer = append(m.Answer, aRecord(q.Name, net.ParseIP(clusterIP)))
		} else if name == cachedName {
			s.external.Add(1)
			m.Answer = append(m.Answer, aRecord(q.Name, net.ParseIP(externalIP)))
		} else if n, ok := fillIndex(name); ok {
			s.fill.Add(1)
			for i := range fillRecords(n) {
				m.Answer = append(m.Answer, aRecord(q.Name, fillIP(n, i)))
			}
		}
	}
	size := dns.MinMsgSize
	if opt := r.IsEdns0(); opt != nil {
		size = int(opt.UDPSize())
		m.SetEdns0(1232, false)
	}
	if udp {
		m.Truncate(size)
	} else {
		m.Compress = true
	}
	w.WriteMsg(m)
}

func aRecord(name string, ip net.IP) *dns.A {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: ip.To4()}
}

func fillName(n int) string { return "fill-" + strconv.Itoa(n) + "." + fillZone }

// fillIndex is n of fill-<n>.<fillZone>.
func fillIndex(name string) (int, bool) {
	label, ok := strings.CutSuffix(name, "."+fillZone)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutPrefix(label, "fill-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n >= 0
}

// fillRecords is how many A records fill-<n> has: 64, 123, 182 or 241,
// about 1.1, 2.0, 3.0 and 3.9 KB packed with name compression.
func fillRecords(n int) int { return 64 + n%4*59 }

// fillIP is the i-th address of fill-<n>: 10.<n mod 256>.0.<i>.
func fillIP(n, i int) net.IP { return net.IPv4(10, byte(n), 0, byte(i)) }

// checkFill accepts the complete answer of fill-<n>.
func checkFill(n int, r *dns.Msg) error {
	if r.Rcode != dns.RcodeSuccess || r.Truncated || len(r.Answer) != fillRecords(n) {
		return fmt.Errorf("%s: rcode %s, truncated %v, %d answers, want %d A records",
			fillName(n), dns.RcodeToString[r.Rcode], r.Truncated, len(r.Answer), fillRecords(n))
	}
	seen := make(map[byte]bool, len(r.Answer))
	for _, rr := range r.Answer {
		a, ok := rr.(*dns.A)
		var ip net.IP
		if ok {
			ip = a.A.To4()
		}
		if ip == nil || !strings.EqualFold(a.Hdr.Name, fillName(n)) || ip[0] != 10 || ip[1] != byte(n) || ip[2] != 0 || seen[ip[3]] {
			return fmt.Errorf("%s: answer %v", fillName(n), rr)
		}
		seen[ip[3]] = true
	}
	return nil
}

// startNodeLocal runs `dnsconfigurer serve --mode node-local` forwarding to
// the cluster DNS at upstream, with extra flags and then
// $DNSCONFIGURER_SERVE_ARGS.
func startNodeLocal(t *testing.T, dir, upstream string, extra ...string) *server {
	t.Helper()
	bin := buildbin.Dnsconfigurer(t)
	addr := testkit.FreeAddr(t, "127.0.0.1")
	maddr := testkit.FreeAddr(t, "127.0.0.1")
	args := []string{"serve", "--mode", "node-local", "--listen", addr, "--cluster-upstream", upstream,
		"--cluster-domain", "cluster.local", "--resolv-conf", "", "--metrics-listen", maddr}
	args = append(args, extra...)
	args = append(args, strings.Fields(os.Getenv(envArgs))...)
	t.Logf("dnsconfigurer %q", args)
	s := startServer(t, "dnsconfigurer", dir, addr, "http://"+maddr+"/metrics", bin, args...)
	s.waitAnswer(t, question(clusterName, dns.TypeA), answersA(clusterIP))
	return s
}

// startNodeLocalCoreDNS runs coredns with nodeLocalCorefile.
func startNodeLocalCoreDNS(t *testing.T, dir, upstream string) *server {
	t.Helper()
	s := runCoreDNS(t, dir, func(port int, metrics string) string {
		return fmt.Sprintf(nodeLocalCorefile, port, upstream, metrics)
	})
	s.waitAnswer(t, question(clusterName, dns.TypeA), answersA(clusterIP))
	return s
}

// TestNodeLocalSideBySide measures the queries per second the node-local
// stage and CoreDNS (forward and cache, as NodeLocal DNSCache) answer for
// one cached name, in alternating rounds: a cluster name, and an external
// name (the node-local stage sends it to the cluster DNS, its default; the
// stub answers both).
func TestNodeLocalSideBySide(t *testing.T) {
	requireBench(t)
	for _, c := range []struct {
		what, name, ip string
		asked          func(*clusterStub) int64
	}{
		{"cached cluster name", clusterName, clusterIP, func(s *clusterStub) int64 { return s.cached.Load() }},
		{"cached external name", cachedName, externalIP, func(s *clusterStub) int64 { return s.external.Load() }},
	} {
		t.Run(strings.ReplaceAll(c.what, " ", "-"), func(t *testing.T) {
			dir := t.TempDir()
			dcStub, cdStub := startClusterStub(t), startClusterStub(t)
			servers := []*server{startNodeLocal(t, dir, dcStub.addr), startNodeLocalCoreDNS(t, dir, cdStub.addr)}
			stubs := map[*server]*clusterStub{servers[0]: dcStub, servers[1]: cdStub}
			q := question(c.name, dns.TypeA)
			for _, s := range servers {
				s.waitAnswer(t, q, answersA(c.ip))
			}
			rows := sideRounds(t, servers, q, func(s *server) int64 { return c.asked(stubs[s]) })
			for _, s := range servers {
				s.waitAnswer(t, q, answersA(c.ip)) // still the right answer after the load
			}
			t.Log(sideTable(c.what+" "+c.name+" (node-local stage)", rows))
			for _, s := range servers {
				st := stubs[s]
				t.Logf("%s's stub: %d queries over UDP, %d over TCP, %d for %s", s.name, st.udp.Load(), st.tcp.Load(), c.asked(st), c.name)
			}
			for _, row := range rows {
				if row.res.answered == 0 || (row.server == "dnsconfigurer" && row.res.bad > 0) {
					t.Errorf("%s round %d: %d answered, %d wrong replies for %s", row.server, row.round, row.res.answered, row.res.bad, c.name)
				}
			}
			dcQPS, dcCPU := sideMedians(rows, "dnsconfigurer")
			cdQPS, cdCPU := sideMedians(rows, "coredns")
			if dcQPS <= 0 || cdQPS <= 0 || dcCPU <= 0 || cdCPU <= 0 {
				t.Fatalf("ratios not measured: median QPS %.0f and %.0f, CPU µs/answer %.1f and %.1f", dcQPS, cdQPS, dcCPU, cdCPU)
			}
			t.Logf("targets (issue 28, not asserted: the machine is shared), %s: QPS >= %.1f× CoreDNS's: %.2f×, %s; CPU per answer <= %.2f× CoreDNS's: %.2f×, %s",
				c.what, qpsTarget, dcQPS/cdQPS, met(dcQPS/cdQPS >= qpsTarget), cpuTarget, dcCPU/cdCPU, met(dcCPU/cdCPU <= cpuTarget))
		})
	}
}

func met(ok bool) string {
	if ok {
		return "MET"
	}
	return "NOT MET"
}

// fillResult is what a fill saw.
type fillResult struct {
	sent     int    // queries sent
	answered int    // complete, right answers
	wrong    int    // other replies
	failed   int    // no reply (timeout, connection closed)
	bytes    int64  // packed size of the right answers (compressed)
	firstBad string // the first wrong reply or failure
	// reconnects counts queries asked again on a new connection because
	// the server had closed the one they were sent on.
	reconnects int
	took       time.Duration
}

// closedConn reports whether err says the peer closed the connection.
func closedConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// fill asks addr for fill-0 ... fill-<names-1>, each once, over conns TCP
// connections with one query in flight each, until every name is asked or
// d passes. A query on a connection the server closed is asked again on a
// new one; a query without a reply within 5 s, or that fails on a new
// connection, counts as failed and the connection is dialled again.
func fill(addr string, names, conns int, d time.Duration) (fillResult, error) {
	type part struct {
		fillResult
		err error
	}
	parts := make([]part, conns)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range conns {
		wg.Go(func() {
			p := &parts[w]
			c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
			conn, err := c.Dial(addr)
			if err != nil {
				p.err = err
				return
			}
			defer func() {
				if conn != nil {
					conn.Close()
				}
			}()
			for time.Now().Before(end) {
				n := int(next.Add(1) - 1)
				if n >= names {
					return
				}
				p.sent++
				q := question(fillName(n), dns.TypeA)
				r, _, err := c.ExchangeWithConn(q, conn)
				if closedConn(err) {
					// A server may close a connection between queries
					// (RFC 7766 6.2.3; dnsconfigurer does after 128 of
					// them): ask again on a new one, as resolvers do.
					p.reconnects++
					conn.Close()
					if conn, err = c.Dial(addr); err != nil {
						p.err = err
						return // conn is nil
					}
					r, _, err = c.ExchangeWithConn(q, conn)
				}
				if err != nil {
					p.failed++
					if p.firstBad == "" {
						p.firstBad = fmt.Sprintf("%s: %v", fillName(n), err)
					}
					conn.Close()
					if conn, err = c.Dial(addr); err != nil {
						p.err = err
						return // conn is nil
					}
					continue
				}
				if err := checkFill(n, r); err != nil {
					p.wrong++
					if p.firstBad == "" {
						p.firstBad = err.Error()
					}
					continue
				}
				p.answered++
				r.Compress = true // as it was sent
				p.bytes += int64(r.Len())
			}
		})
	}
	wg.Wait()
	res := fillResult{took: time.Since(start)}
	var errs []error
	for _, p := range parts {
		res.sent += p.sent
		res.answered += p.answered
		res.wrong += p.wrong
		res.failed += p.failed
		res.bytes += p.bytes
		res.reconnects += p.reconnects
		if res.firstBad == "" {
			res.firstBad = p.firstBad
		}
		errs = append(errs, p.err)
	}
	return res, errors.Join(errs...)
}

// fillReport is one server's fill.
type fillReport struct {
	server string
	res    fillResult
	// The largest cache bytes and entries scraped during the fill and
	// after it; -1 when never scraped (CoreDNS has no bytes metric).
	maxCacheBytes, endCacheBytes float64
	maxEntries, endEntries       float64
	scrapes                      int
	maxRSSKiB                    int64
	end                          usage // after the fill: VmHWM is the peak RSS
	stubUDP, stubTCP             int64
}

// cacheMetrics are the metrics of the answers a server's cache holds.
type cacheMetrics struct {
	bytes, entries string
	labels         []string
}

var fillMetrics = map[string]cacheMetrics{
	"dnsconfigurer": {"dnsconfigurer_cache_bytes", "dnsconfigurer_cache_entries", []string{`server="nodelocal"`}},
	"coredns":       {"", "coredns_cache_entries", nil},
}

// TestNodeLocalMemoryFill asks each server in turn for many distinct names
// with large answers (1-4 KB, over TCP) and samples its peak RSS and cache
// size: the node-local stage, with --cache-size 32Mi and no GOMEMLIMIT,
// must stay within the DaemonSet's 128 MiB and its cache within 32 MiB.
func TestNodeLocalMemoryFill(t *testing.T) {
	requireBench(t)
	// No help from the Go runtime: the bound must come from the cache.
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	sideBySide(t, func(t *testing.T, name string) fillReport {
		dir := t.TempDir()
		st := startClusterStub(t)
		var s *server
		if name == "dnsconfigurer" {
			s = startNodeLocal(t, dir, st.addr, "--cache-size", "32Mi") // fillCacheSize
		} else {
			s = startNodeLocalCoreDNS(t, dir, st.addr)
		}
		return runFill(t, s, st)
	}, fillViolations, fillTable)
}

func runFill(t *testing.T, s *server, st *clusterStub) fillReport {
	t.Helper()
	rep := fillReport{server: s.name, maxCacheBytes: -1, endCacheBytes: -1, maxEntries: -1, endEntries: -1}
	met := fillMetrics[s.name]
	client := &http.Client{Timeout: time.Second}
	// observe scrapes the cache metrics and reads /proc once; it reports
	// the metrics' values (-1: absent).
	observe := func(ctx context.Context) (bytes, entries float64) {
		bytes, entries = -1, -1
		if text, err := scrape(ctx, client, s.metrics); err == nil {
			rep.scrapes++
			if met.bytes != "" {
				if v, ok := metricSum(text, met.bytes, met.labels...); ok {
					bytes = v
				}
			}
			if v, ok := metricSum(text, met.entries, met.labels...); ok {
				entries = v
			}
		}
		rep.maxCacheBytes, rep.maxEntries = max(rep.maxCacheBytes, bytes), max(rep.maxEntries, entries)
		if u, err := readUsage(s.cmd.Process.Pid); err == nil {
			rep.maxRSSKiB = max(rep.maxRSSKiB, u.rssKiB)
		}
		return bytes, entries
	}
	ctx, cancel := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		testkit.Every(ctx, 250*time.Millisecond, func() bool { observe(ctx); return true })
	}()
	res, err := fill(s.dns, *fillNames, *fillConns, *fillFor)
	cancel()
	<-sampled
	if err != nil {
		t.Fatalf("%s: fill: %v", s.name, err)
	}
	s.alive(t, "the fill")
	rep.res = res
	rep.endCacheBytes, rep.endEntries = observe(context.Background())
	if rep.end, err = readUsage(s.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	rep.stubUDP, rep.stubTCP = st.udp.Load(), st.tcp.Load()
	return rep
}

// fillViolations lists where the node-local stage's fill r misses its
// bounds.
func fillViolations(r fillReport) []string {
	var v []string
	if r.res.wrong > 0 || r.res.failed > 0 {
		v = append(v, fmt.Sprintf("%d wrong replies and %d unanswered of %d queries; first: %s", r.res.wrong, r.res.failed, r.res.sent, r.res.firstBad))
	}
	// Answers of at least twice the cache size, or the bound was not
	// tested.
	if r.res.bytes < 2*fillCacheSize {
		v = append(v, fmt.Sprintf("the fill offered %.1f MiB of answers (%d names in %v), want at least %d MiB: raise -fill-for",
			float64(r.res.bytes)/(1<<20), r.res.answered, r.res.took.Round(time.Millisecond), 2*fillCacheSize>>20))
	}
	switch {
	case r.maxCacheBytes < 0:
		v = append(v, fmt.Sprintf("dnsconfigurer_cache_bytes never scraped (%d scrapes of /metrics)", r.scrapes))
	case max(r.maxCacheBytes, r.endCacheBytes) > fillCacheSize:
		v = append(v, fmt.Sprintf("cache bytes reached %.1f MiB, want at most %d MiB", max(r.maxCacheBytes, r.endCacheBytes)/(1<<20), fillCacheSize>>20))
	}
	if hwm := max(r.end.hwmKiB, r.maxRSSKiB); hwm > maxNodeLocalHWMKiB {
		v = append(v, fmt.Sprintf("RSS peaked at %.1f MiB (VmHWM), want at most %d MiB", mib(hwm), maxNodeLocalHWMKiB>>10))
	}
	return v
}

func fillTable(reports []fillReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fill: %d names fill-<n>.%s (%d-%d A records, 1-4 KB), TCP, %d connections with one query in flight each, at most %v per server; load average %s\n\n",
		*fillNames, fillZone, fillRecords(0), fillRecords(3), *fillConns, *fillFor, loadAvg())
	b.WriteString("| server | answered | wrong | unanswered | TCP reconnects | took | names/s | answers MiB | stub UDP / TCP | cache MiB (max / end) | cache entries (max / end) | max RSS MiB | VmHWM MiB |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|\n")
	val := func(v float64, scale float64, format string) string {
		if v < 0 {
			return "–"
		}
		return fmt.Sprintf(format, v/scale)
	}
	for _, r := range reports {
		rate := 0.0
		if r.res.took > 0 {
			rate = float64(r.res.sent) / r.res.took.Seconds()
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.1f s | %.0f | %.1f | %d / %d | %s / %s | %s / %s | %.1f | %.1f |\n",
			r.server, r.res.answered, r.res.wrong, r.res.failed, r.res.reconnects, r.res.took.Seconds(), rate, float64(r.res.bytes)/(1<<20),
			r.stubUDP, r.stubTCP,
			val(r.maxCacheBytes, 1<<20, "%.1f"), val(r.endCacheBytes, 1<<20, "%.1f"),
			val(r.maxEntries, 1, "%.0f"), val(r.endEntries, 1, "%.0f"),
			mib(r.maxRSSKiB), mib(r.end.hwmKiB))
	}
	for _, r := range reports {
		if r.res.firstBad != "" {
			fmt.Fprintf(&b, "\n%s, first wrong or unanswered: %s", r.server, r.res.firstBad)
		}
	}
	return b.String()
}
