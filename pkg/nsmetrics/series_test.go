package nsmetrics

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics/nsmetricstest"
)

// The namespace metrics as series: their families, their bound on
// cardinality, and the cost of counting.

const queriesFamily = "dnsconfigurer_dnsserver_namespace_queries_total"

var families = []string{queriesFamily, "dnsconfigurer_dnsserver_namespace_lookups_total",
	"dnsconfigurer_dnsserver_namespace_misses_total", "dnsconfigurer_dnsserver_namespace_hits_total",
	"dnsconfigurer_dnsserver_namespace_external_lookups_total"}

// TestSeries: the namespaces with series, their monotonic
// values, the swap rule, and deleted namespaces.
func TestSeries(t *testing.T) {
	st := nsmetricstest.Store(t, "a", "b", "c", "other")
	amp, _ := New(2, "cluster.local", st)
	clock := time.Unix(1e9, 0)
	amp.now = func() time.Time { return clock }
	reg := testkit.Registry(t, amp)
	ask := func(ns string, n int) {
		for range n {
			query(amp, st, "web."+ns+".svc.cluster.local.", dns.RcodeSuccess)
		}
	}
	check := func(step string, want map[string]float64) {
		t.Helper()
		got := nsmetricstest.Series(t, reg)[queriesFamily]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: queries series %v, want %v", step, got, want)
		}
	}
	check("nothing asked", map[string]float64{"other": 0})
	ask("a", 10)
	ask("b", 5)
	ask("c", 1)
	ask("other", 50) // a namespace named "other" never gets a series of its own
	// The first choice is at the next scrape (the first one chose while
	// nothing had been asked): a and b get series, from 0; what they
	// counted before stays in other.
	clock = clock.Add(interval)
	check("first choice", map[string]float64{"a": 0, "b": 0, "other": 66})
	ask("a", 3)
	ask("c", 200)
	check("within the minute", map[string]float64{"a": 3, "b": 0, "other": 266})
	// Scores: a 10/2+3 = 8, b 5/2 = 2.5, c 1/2+200 = 200.5 (other: 25): c
	// takes b's place; b's series ends at 0.
	clock = clock.Add(interval)
	check("c replaces b", map[string]float64{"a": 3, "c": 0, "other": 266})
	ask("b", 7)
	ask("c", 2)
	check("b counts in other", map[string]float64{"a": 3, "c": 2, "other": 273})
	// c is deleted: its series ends, and b, the busiest without one,
	// gets a series again, continuing from its last value (0).
	amp.idxMu.RLock()
	cached := Count{c: amp.idx["c"], d: [Kinds]uint8{Queries: 1}} // as kept with a cached reply
	amp.idxMu.RUnlock()
	st.DeleteService("c", "web")
	st.DeleteNamespace("c")
	clock = clock.Add(interval)
	st.Publish()
	check("c deleted", map[string]float64{"a": 3, "b": 0, "other": 273})
	// c's names are other's, and so is a count kept for c before.
	query(amp, st, "x.c.svc.cluster.local.", dns.RcodeNameError)
	amp.add(cached)
	check("c's names are other's", map[string]float64{"a": 3, "b": 0, "other": 275})
	if got := testkit.Value(t, reg, "dnsconfigurer_dnsserver_namespace_series_changes_total"); got != 6 {
		t.Errorf("series changes %v, want 6 (a, b, c given; b taken; c deleted; b given)", got)
	}
	if got := testkit.Value(t, reg, "dnsconfigurer_dnsserver_namespaces_tracked"); got != 3 {
		t.Errorf("namespaces tracked %v, want 3 (a, b, other)", got)
	}
}

// TestCardinality: 10,000 namespaces of the store, each with
// traffic, and a flood of names of namespaces that do not exist: every
// family has at most N+1 series, every series only grows, the series
// together count every attributed query, the counters exist for the
// store's namespaces only, and their memory is bounded.
func TestCardinality(t *testing.T) {
	const (
		namespaces = 10000
		topN       = 20
	)
	names := make([]string, namespaces)
	for i := range names {
		names[i] = fmt.Sprintf("team-%05d", i)
	}
	st := nsmetricstest.Store(t, names...)

	t.Run("memory", func(t *testing.T) {
		var m0, m1, m2 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		a, _ := New(topN, "cluster.local", st)
		snap := st.Snapshot()
		req := new(dns.Msg)
		for _, ns := range names {
			req.SetQuestion("www.example.com."+ns+".svc.cluster.local.", dns.TypeA)
			ac := a.Classify(req, snap, dns.RcodeNameError, false, nil)
			a.add(ac)
		}
		collect(a)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		rng := rand.New(rand.NewPCG(1, 2))
		for range 100000 {
			req.SetQuestion(fmt.Sprintf("x.%x.svc.cluster.local.", rng.Uint64()), dns.TypeA)
			ac := a.Classify(req, snap, dns.RcodeNameError, false, nil)
			a.add(ac)
		}
		collect(a)
		runtime.GC()
		runtime.ReadMemStats(&m2)
		used, flood := int64(m1.HeapAlloc)-int64(m0.HeapAlloc), int64(m2.HeapAlloc)-int64(m1.HeapAlloc)
		t.Logf("tracker with %d namespaces: %d KiB; after 100,000 queries for unknown namespaces: %+d KiB",
			namespaces, used>>10, flood>>10)
		if len(a.idx) != namespaces {
			t.Errorf("%d namespaces tracked, want %d", len(a.idx), namespaces)
		}
		if used > 4<<20 {
			t.Errorf("tracker uses %d bytes for %d namespaces, want under 4 MiB", used, namespaces)
		}
		if flood > 256<<10 {
			t.Errorf("the flood of unknown namespaces grew the heap by %d bytes", flood)
		}
		if got := a.Counts("other")[Queries]; got != 100000 {
			t.Errorf("other counted %d queries, want 100000", got)
		}
		runtime.KeepAlive(a)
	})

	t.Run("series", func(t *testing.T) {
		amp, _ := New(topN, "cluster.local", st)
		clock := time.Unix(1e9, 0)
		amp.now = func() time.Time { return clock }
		reg := testkit.Registry(t, amp)
		nsmetricstest.Series(t, reg) // the first choice, of nothing
		// round: namespace i looks up www.example.com weight(i) times (3
		// queries each in the zone), and 2,000 names of namespaces that do
		// not exist are asked.
		round := func(weight func(i int) int) {
			for i, ns := range names {
				for range weight(i) {
					query(amp, st, "www.example.com."+ns+".svc.cluster.local.", dns.RcodeNameError)
				}
			}
			for i := range 2000 {
				query(amp, st, fmt.Sprintf("x.ghost-%d.svc.cluster.local.", i), dns.RcodeNameError)
			}
		}
		// total is every query counted, with a series or not.
		total := func() uint64 {
			n := amp.Counts("other")[Queries]
			for _, ns := range names {
				n += amp.Counts(ns)[Queries]
			}
			return n
		}
		var prev map[string]map[string]float64
		seen := map[string]float64{} // the last value of every queries series seen
		scrape := func(step string) map[string]map[string]float64 {
			t.Helper()
			clock = clock.Add(interval)
			s := nsmetricstest.Series(t, reg)
			for _, f := range families {
				if n := len(s[f]); n > topN+1 {
					t.Errorf("%s: %s has %d series, want at most %d", step, f, n, topN+1)
				}
				for ns, v := range s[f] {
					if old, ok := prev[f][ns]; ok && v < old {
						t.Errorf("%s: %s{namespace=%q} went from %v to %v", step, f, ns, old, v)
					}
				}
			}
			// A series taken away ends at its value of the last scrape:
			// the last values of every series seen count every query.
			for ns, v := range s[queriesFamily] {
				seen[ns] = v
			}
			sum := 0.0
			for _, v := range seen {
				sum += v
			}
			if want := total(); sum != float64(want) {
				t.Errorf("%s: the queries series seen add up to %v, want %d", step, sum, want)
			}
			prev = s
			return s
		}
		// Round 1: team-00000..00029 busy (the busiest last).
		round(func(i int) int {
			if i < 30 {
				return i + 1
			}
			return 1
		})
		s := scrape("round 1")
		if n := len(s[queriesFamily]); n != topN+1 {
			t.Errorf("round 1: %d queries series, want %d", n, topN+1)
		}
		for i := 10; i < 30; i++ {
			if _, ok := s[queriesFamily][names[i]]; !ok {
				t.Errorf("round 1: %s (one of the %d busiest) has no series: %v", names[i], topN, s[queriesFamily])
			}
		}
		// Round 2: another 30 become much busier; every namespace asks.
		round(func(i int) int {
			if i >= 5000 && i < 5030 {
				return 40
			}
			return 1
		})
		scrape("round 2")
		s = scrape("round 2, again")
		busy := 0
		for i := 5000; i < 5030; i++ {
			if _, ok := s[queriesFamily][names[i]]; ok {
				busy++
			}
		}
		if busy != topN {
			t.Errorf("round 2: %d of the new busiest namespaces have series, want %d: %v", busy, topN, s[queriesFamily])
		}
		if got := testkit.Value(t, reg, "dnsconfigurer_dnsserver_namespaces_tracked"); got != namespaces {
			t.Errorf("namespaces tracked %v, want %d", got, namespaces)
		}
	})
}

// query counts a query for name answered rcode, as a handler does.
func query(a *Metrics, st Snapshots, name string, rcode int) {
	a.Record(name, st.Snapshot(), rcode, false, nil)
}

// collect runs a's Collect and drops the metrics.
func collect(a *Metrics) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		a.Collect(ch)
		close(ch)
	}()
	for range ch {
	}
}

// TestObserveAllocatesNothing: counting a query answered from the reply
// cache allocates nothing, nor does Record for a query of a namespace
// already seen.
func TestObserveAllocatesNothing(t *testing.T) {
	st := nsmetricstest.Store(t, "ns", "b")
	a, _ := New(20, "cluster.local", st)
	for _, name := range []string{"web.ns.svc.cluster.local.", "www.example.com.ns.svc.cluster.local.", "x.ghost.svc.cluster.local."} {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		ac := a.Classify(req, st.Snapshot(), dns.RcodeNameError, false, nil)
		if allocs := testing.AllocsPerRun(100, func() { a.add(ac) }); allocs != 0 {
			t.Errorf("%s: %v allocations per query", name, allocs)
		}
		var tl uint64
		if allocs := testing.AllocsPerRun(100, func() { tl = a.Record(name, st.Snapshot(), dns.RcodeNameError, false, nil) }); allocs != 0 {
			t.Errorf("%s: Record: %v allocations per query", name, allocs)
		}
		if allocs := testing.AllocsPerRun(100, func() { a.Observe(tl) }); allocs != 0 {
			t.Errorf("%s: Observe: %v allocations per hit", name, allocs)
		}
	}
}
