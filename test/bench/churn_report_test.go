package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// queryStats summarises a query load.
type queryStats struct {
	sent, answered, wrong, lost int // answered: NOERROR; wrong: another rcode
	p50, p99                    time.Duration
	// collections are the server's garbage collections that ended
	// while the load ran: while one marks, a server of one CPU answers
	// late.
	collections int
}

func queryStatsOf(r floodResult) queryStats {
	st := queryStats{sent: r.sent, lost: len(r.lost)}
	lat := make([]time.Duration, 0, len(r.replies))
	for _, rep := range r.replies {
		lat = append(lat, rep.lat)
		if rep.rcode == dns.RcodeSuccess {
			st.answered++
		} else {
			st.wrong++
		}
	}
	slices.Sort(lat)
	st.p50, st.p99 = percentile(lat, 0.5), percentile(lat, 0.99)
	return st
}

// churnReport is one TestChurn run.
type churnReport struct {
	set      churnSettings
	populate populateStats
	phases   []phaseRun  // one per rate
	servers  []serverRun // dnsconfigurer, then CoreDNS
	control  *serverRun  // the query load on a server with no watch (startControl); nil without the load
	loadAvg  string
}

// phaseRun is what one churn rate wrote.
type phaseRun struct {
	rate         int
	writes       int           // without the query load
	dropped      int           // ticks dropped: the API server fell behind
	took         time.Duration // their span
	loadedWrites int           // while the query load ran
	writeErrs    []error       // both
}

// reached says how many changes of each kind were written, at what rate,
// from one server's polls (both servers poll every change).
func (ph phaseRun) reached(polls []pollResult) string {
	var svc, ep int
	for _, p := range polls {
		if p.kind == kindService {
			svc++
		} else {
			ep++
		}
	}
	s := fmt.Sprintf("%s new Services at %.1f/s, %s moved endpoints at %.1f/s",
		count(svc), perSecond(svc, ph.took), count(ep), perSecond(ep, ph.took))
	if ph.dropped > 0 {
		s += fmt.Sprintf("; %s ticks dropped, the API server behind", count(ph.dropped))
	}
	return s
}

// serverRun is one server's figures.
type serverRun struct {
	name      string
	starts    []time.Duration // process start → every Service answered, each start
	sync      usage           // once both servers answered every Service
	rest      time.Duration   // CPU per second at rest, after the sync
	end       usage           // after the last churn phase
	baseQuery queryStats      // the query load without churn
	phases    []serverPhase   // as churnReport.phases
}

// meanDuration is the mean of ds (0 for none).
func meanDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// serverPhase is one server's side of a churn rate.
type serverPhase struct {
	polls  []pollResult  // the changes written without the query load
	cpu    time.Duration // the server's CPU time while they were written and answered
	gc     gcFigures     // its collector's work meanwhile (the difference of two readings)
	query  queryStats    // the query load under the same churn
	loaded []pollResult  // the changes written while it ran
}

// latencies are the sorted write→answer times of the answered changes of
// kind ("" for all).
func latencies(polls []pollResult, kind string) []time.Duration {
	var out []time.Duration
	for _, p := range polls {
		if p.ok && (kind == "" || p.kind == kind) {
			out = append(out, p.lat)
		}
	}
	slices.Sort(out)
	return out
}

// bootstrapRounds is how many resamples pairedP99 draws.
const bootstrapRounds = 2000

// pairedP99 compares the write→answer p99 of two servers that were polled
// for the same changes at the same time (a[i] and b[i] are change i). It
// returns the 95 % interval of a's p99 ÷ b's by a paired bootstrap: each
// resample draws changes, each with both its latencies, so what the two
// servers shared (the API server's delay, a busy CPU) stays paired. first
// is the share of the changes a answered before b; n the changes both
// answered. A p99 of a few hundred changes moves with its few slowest,
// and the interval says how far.
func pairedP99(a, b []pollResult) (lo, hi, first float64, n int) {
	var la, lb []time.Duration
	for i := range min(len(a), len(b)) {
		if a[i].ok && b[i].ok {
			la, lb = append(la, a[i].lat), append(lb, b[i].lat)
			if a[i].lat < b[i].lat {
				first++
			}
		}
	}
	n = len(la)
	if n == 0 {
		return 0, 0, 0, 0
	}
	first /= float64(n)
	// A fixed seed: the same polls give the same interval.
	rng := rand.New(rand.NewPCG(28, 99))
	ratios := make([]float64, bootstrapRounds)
	ra, rb := make([]time.Duration, n), make([]time.Duration, n)
	for r := range ratios {
		for i := range n {
			j := rng.IntN(n)
			ra[i], rb[i] = la[j], lb[j]
		}
		slices.Sort(ra)
		slices.Sort(rb)
		ratios[r] = percentile(ra, 0.99).Seconds() / max(percentile(rb, 0.99).Seconds(), 1e-9)
	}
	slices.Sort(ratios)
	return ratios[bootstrapRounds/40], ratios[bootstrapRounds-1-bootstrapRounds/40], first, n
}

// intervalCell is pairedP99's result for the table.
func intervalCell(a, b []pollResult) string {
	lo, hi, first, n := pairedP99(a, b)
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%s–%s; first in %.0f %% of %d", ratio(lo, 1), ratio(hi, 1), 100*first, n)
}

// missed are the changes not answered within the bound.
func missed(polls []pollResult) []pollResult {
	var out []pollResult
	for _, p := range polls {
		if !p.ok {
			out = append(out, p)
		}
	}
	return out
}

func pollsPerChange(polls []pollResult) float64 {
	if len(polls) == 0 {
		return 0
	}
	n := 0
	for _, p := range polls {
		n += p.polls
	}
	return float64(n) / float64(len(polls))
}

// cpuPer100 is the CPU time per 100 changes, in seconds.
func cpuPer100(cpu time.Duration, changes int) float64 {
	if changes == 0 {
		return 0
	}
	return cpu.Seconds() * 100 / float64(changes)
}

// table renders the report as the markdown table, CoreDNS and
// dnsconfigurer side by side with their ratio.
func (r *churnReport) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s ClusterIP + %s headless Services (%d endpoints each) in %d namespaces; churn %s changes/s for %v each, half new Services, half moved endpoints",
		count(r.set.services), count(r.set.headless), endpointsPerSlice, r.populate.namespaces, joinInts(r.set.rates, ", "), r.set.churnFor)
	if r.set.queryQPS > 0 {
		fmt.Fprintf(&b, "; query load %s qps of existing names for %v per server", count(r.set.queryQPS), r.set.queryFor)
	}
	if r.set.queryChild {
		fmt.Fprintf(&b, "; the query load in a process of its own at nice %d", r.set.queryNice)
	}
	if r.set.controlNice > 0 {
		fmt.Fprintf(&b, "; the API server and etcd at nice %d during the churn", r.set.controlNice)
	}
	if r.set.pinned {
		fmt.Fprintf(&b, "; the server taking the query load and the load's process on CPU %d, every other process on the other CPUs", r.set.pinCPU)
	}
	fmt.Fprintf(&b, "; load average %s\n%s\n\n", r.loadAvg, r.populate)
	size := shortCount(r.set.services) + " + " + count(r.set.headless)
	b.WriteString("| size | measure | CoreDNS 1.15 | dnsconfigurer | dnsconfigurer ÷ CoreDNS |\n|---|---|---:|---:|---:|\n")
	dc, cd := r.server("dnsconfigurer"), r.server("coredns")
	row := func(measure, coredns, dnsconfigurer, ratio string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", size, measure, coredns, dnsconfigurer, ratio)
	}
	startRow := func(measure string, of func([]time.Duration) time.Duration) {
		row(measure, seconds(of(cd.starts)), seconds(of(dc.starts)), ratio(of(dc.starts).Seconds(), of(cd.starts).Seconds()))
	}
	n := len(dc.starts)
	startRow(fmt.Sprintf("start → every Service answered, mean of %d", n), meanDuration)
	if n > 1 {
		startRow(fmt.Sprintf("start → every Service answered, fastest of %d", n), slices.Min[[]time.Duration])
	}
	memRow := func(measure string, of func(serverRun) int64) {
		row(measure, mibs(of(cd)), mibs(of(dc)), ratio(float64(of(dc)), float64(of(cd))))
	}
	memRow("RssAnon after sync", func(s serverRun) int64 { return s.sync.anonKiB })
	row(fmt.Sprintf("CPU at rest, per second over %v", restWindow), micros(cd.rest), micros(dc.rest), ratio(dc.rest.Seconds(), cd.rest.Seconds()))
	q := "query p99 at " + count(r.set.queryQPS) + " qps"
	if r.set.queryQPS > 0 {
		row(q+", no churn", queryCell(cd.baseQuery), queryCell(dc.baseQuery), ratio(dc.baseQuery.p99.Seconds(), cd.baseQuery.p99.Seconds()))
	}
	for i, ph := range r.phases {
		at := fmt.Sprintf(", churn %d/s", ph.rate)
		dp, cp := dc.phases[i], cd.phases[i]
		row(fmt.Sprintf("write→answer p50 / p99%s (%s)", at, ph.reached(dp.polls)),
			pair(cp.polls, ""), pair(dp.polls, ""), pairRatio(dp.polls, cp.polls, ""))
		row("write→answer p99 ÷ CoreDNS's, 95 % interval of a paired bootstrap; dnsconfigurer answered first"+at, "", "", intervalCell(dp.polls, cp.polls))
		row("write→answer p99, new Service / moved endpoint"+at, kindP99(cp.polls), kindP99(dp.polls), "")
		row("CPU per 100 changes"+at, fmt.Sprintf("%.3f s", cpuPer100(cp.cpu, ph.writes)), fmt.Sprintf("%.3f s", cpuPer100(dp.cpu, ph.writes)),
			ratio(cpuPer100(dp.cpu, ph.writes), cpuPer100(cp.cpu, ph.writes)))
		row("heap allocated per change; garbage collections"+at, gcCell(cp.gc, ph.writes), gcCell(dp.gc, ph.writes),
			ratio(dp.gc.perChange(ph.writes), cp.gc.perChange(ph.writes)))
		missedRow := "changes missed; polls per change"
		if r.set.queryQPS > 0 {
			row(q+at, queryCell(cp.query), queryCell(dp.query), ratio(dp.query.p99.Seconds(), cp.query.p99.Seconds()))
			row(fmt.Sprintf("write→answer p50 / p99 under that query load%s (%d changes)", at, ph.loadedWrites),
				pair(cp.loaded, ""), pair(dp.loaded, ""), pairRatio(dp.loaded, cp.loaded, ""))
			missedRow = "changes missed (without / under the query load); polls per change"
		}
		row(missedRow+at, missCell(cp, r.set.queryQPS > 0), missCell(dp, r.set.queryQPS > 0), "")
	}
	memRow("RssAnon after churn", func(s serverRun) int64 { return s.end.anonKiB })
	memRow("VmHWM at the end", func(s serverRun) int64 { return s.end.hwmKiB })
	r.churnCost(&b, dc, cd)
	return b.String()
}

// churnCost is a second table: each server's query p99 under churn over
// its p99 without, the control's beside them, with the collections that
// ended while each load ran. The control does no work for a change, so
// its ratio is what the churn costs through the shared CPU alone.
func (r *churnReport) churnCost(b *strings.Builder, dc, cd serverRun) {
	ctl := r.control // set only with the query load
	if ctl == nil {
		return
	}
	fmt.Fprintf(b, "\n| query p99 at %s qps (÷ no churn) | CoreDNS 1.15 | dnsconfigurer | control: dnsconfigurer from a file, no watch |\n|---|---:|---:|---:|\n", count(r.set.queryQPS))
	all := []serverRun{cd, dc, *ctl}
	cells := make([]string, len(all))
	for i, s := range all {
		cells[i] = queryCell(s.baseQuery) + collections(s.baseQuery)
	}
	fmt.Fprintf(b, "| no churn | %s |\n", strings.Join(cells, " | "))
	for i, ph := range r.phases {
		for j, s := range all {
			cells[j] = "–"
			if i < len(s.phases) {
				q := s.phases[i].query
				cells[j] = queryCell(q) + " (" + ratio(q.p99.Seconds(), s.baseQuery.p99.Seconds()) + ")" + collections(q)
			}
		}
		fmt.Fprintf(b, "| churn %d/s | %s |\n", ph.rate, strings.Join(cells, " | "))
	}
}

func (r *churnReport) server(name string) serverRun {
	for _, s := range r.servers {
		if s.name == name {
			return s
		}
	}
	return serverRun{name: name, phases: make([]serverPhase, len(r.phases))}
}

// violations are what must hold for the figures to count: every write
// made, every change answered by both servers, no wrong rcode for an
// existing name.
func (r *churnReport) violations() []string {
	var v []string
	for i, ph := range r.phases {
		if len(ph.writeErrs) > 0 {
			v = append(v, fmt.Sprintf("churn %d/s: %d writes failed, first: %v", ph.rate, len(ph.writeErrs), ph.writeErrs[0]))
		}
		for _, s := range r.servers {
			sp := s.phases[i]
			for _, set := range []struct {
				what  string
				polls []pollResult
			}{{"", sp.polls}, {" under the query load", sp.loaded}} {
				if m := missed(set.polls); len(m) > 0 {
					v = append(v, fmt.Sprintf("%s, churn %d/s%s: %d of %d changes not answered within %v, first a %s: %s",
						s.name, ph.rate, set.what, len(m), len(set.polls), changeBound, m[0].kind, m[0].last))
				}
			}
			if sp.query.wrong > 0 {
				v = append(v, fmt.Sprintf("%s, churn %d/s: %d of %d queries for existing names answered with an error rcode", s.name, ph.rate, sp.query.wrong, sp.query.sent))
			}
		}
	}
	all := r.servers
	if r.control != nil {
		all = append(slices.Clone(all), *r.control)
		for i, ph := range r.control.phases {
			if ph.query.wrong > 0 && i < len(r.phases) {
				v = append(v, fmt.Sprintf("control, churn %d/s: %d of %d queries for existing names answered with an error rcode", r.phases[i].rate, ph.query.wrong, ph.query.sent))
			}
		}
	}
	for _, s := range all {
		if s.baseQuery.wrong > 0 {
			v = append(v, fmt.Sprintf("%s, no churn: %d of %d queries for existing names answered with an error rcode", s.name, s.baseQuery.wrong, s.baseQuery.sent))
		}
	}
	return v
}

// latency formats a duration for the table.
func latency(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

func micros(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func mibs(kib int64) string { return fmt.Sprintf("%.1f MiB", mib(kib)) }

// pair is "p50 / p99" of the answered changes of kind.
func pair(polls []pollResult, kind string) string {
	lat := latencies(polls, kind)
	if len(lat) == 0 {
		return "–"
	}
	return latency(percentile(lat, 0.5)) + " / " + latency(percentile(lat, 0.99))
}

func pairRatio(a, b []pollResult, kind string) string {
	la, lb := latencies(a, kind), latencies(b, kind)
	if len(la) == 0 || len(lb) == 0 {
		return "–"
	}
	return ratio(percentile(la, 0.5).Seconds(), percentile(lb, 0.5).Seconds()) + " / " +
		ratio(percentile(la, 0.99).Seconds(), percentile(lb, 0.99).Seconds())
}

// ratio is a ÷ b: two decimals below 10, none above; "–" without b.
func ratio(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	if r := a / b; r < 10 {
		return fmt.Sprintf("%.2f×", r)
	} else {
		return fmt.Sprintf("%.0f×", r)
	}
}

// missCell is "missed; polls per change", missed without and under the
// query load when it ran.
func missCell(p serverPhase, loaded bool) string {
	all := p.polls
	s := strconv.Itoa(len(missed(p.polls)))
	if loaded {
		all = append(slices.Clone(p.polls), p.loaded...)
		s += " / " + strconv.Itoa(len(missed(p.loaded)))
	}
	return fmt.Sprintf("%s; %.1f", s, pollsPerChange(all))
}

// kindP99 is the p99 of new Services / moved endpoints.
func kindP99(polls []pollResult) string {
	var s []string
	for _, kind := range []string{kindService, kindEndpoint} {
		if lat := latencies(polls, kind); len(lat) > 0 {
			s = append(s, latency(percentile(lat, 0.99)))
		} else {
			s = append(s, "–")
		}
	}
	return strings.Join(s, " / ")
}

func queryCell(q queryStats) string {
	s := latency(q.p99)
	if q.lost > 0 || q.wrong > 0 {
		s += fmt.Sprintf(" (%s lost, %s wrong of %s)", count(q.lost), count(q.wrong), count(q.sent))
	}
	return s
}

// gcCell is a server's heap allocated per change and its collections
// over a churn phase of writes changes.
func gcCell(g gcFigures, writes int) string {
	return fmt.Sprintf("%.1f KiB; %d", g.perChange(writes)/1024, g.collections)
}

// collections notes the collections that ended during a query load.
func collections(q queryStats) string {
	if q.collections == 1 {
		return ", 1 collection"
	}
	return fmt.Sprintf(", %d collections", q.collections)
}

// count writes n with thousands separators.
func count(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// shortCount writes whole thousands as "10k".
func shortCount(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return count(n)
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, sep)
}
