package nsmetrics

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

const (
	// interval is how often the namespaces with series are chosen again
	// (at a scrape, when this long has passed since the last choice).
	interval = time.Minute
	// A namespace without a series takes the place of the one with the
	// lowest score when its score is more than swapFactor times that score
	// and at least swapGain above it. The score is the queries since the
	// last choice plus half the previous score: about twice the queries
	// per minute of a steady namespace.
	swapFactor = 2
	swapGain   = 60
)

// Counters of a namespace, in the order of the metric families.
const (
	Queries = iota
	Lookups
	Misses
	Hits
	External
	Kinds
)

// Metrics counts the queries of each namespace's pods and exports them
// as a prometheus.Collector (see the package doc).
type Metrics struct {
	topN int
	now  func() time.Time

	zone      string   // the cluster zone, lowercase, no trailing dot
	zoneTails []string // ".<zone label 1>", ".<label 1>.<label 2>", …: a remainder ending so is a cluster name
	records   Snapshots

	other counters // namespaces the store does not know, and deleted ones

	idxMu sync.RWMutex
	idx   map[string]*counters // the store's namespaces seen in queries
	// byID are the counters by their id ("other" is 0), for Observe. It
	// grows under idxMu; readers see a prefix.
	byID atomic.Pointer[[]*counters]

	mu       sync.Mutex // the choice of the series, and collection
	last     time.Time  // the last choice; zero before the first
	selected int
	frozen   [Kinds]uint64 // "other"'s counts from namespaces that got a series or were deleted
	changes  uint64

	descs    [Kinds]*prometheus.Desc
	tracked  *prometheus.Desc
	churnDsc *prometheus.Desc
}

// Snapshots gives the current snapshot of the record store (nil before
// the first sync).
type Snapshots interface {
	Snapshot() *store.Snapshot
}

// counters are the counters of one namespace (or of "other").
type counters struct {
	n    [Kinds]atomic.Uint64
	dead atomic.Bool // the namespace was deleted: counts go to "other"
	id   uint32      // its place in Metrics.byID

	// Under Metrics.mu.
	name     string
	selected bool
	mark     [Kinds]uint64 // n when the series was last given or taken
	exported [Kinds]uint64 // the series' value then
	scraped  [Kinds]uint64 // the series' value at the last collection
	score    float64
	lastQ    uint64 // queries at the last choice
}

// New returns the metrics of the cluster zone (any case, with or without
// the trailing dot) over records, with series for the topN busiest
// namespaces (1 to v1alpha1.MaxNamespaceMetrics). Register it on a
// prometheus.Registerer; it serves one handler.
func New(topN int, zone string, records Snapshots) (*Metrics, error) {
	if topN < 1 || topN > v1alpha1.MaxNamespaceMetrics {
		return nil, fmt.Errorf("namespace metrics: %d namespaces: want 1 to %d", topN, v1alpha1.MaxNamespaceMetrics)
	}
	a := &Metrics{topN: topN, now: time.Now, idx: map[string]*counters{}, records: records}
	a.other.name = "other"
	a.byID.Store(&[]*counters{&a.other})
	a.zone = strings.TrimSuffix(strings.ToLower(zone), ".")
	labels := strings.Split(a.zone, ".")
	for i := range labels {
		a.zoneTails = append(a.zoneTails, "."+strings.Join(labels[:i+1], "."))
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("dnsconfigurer_dnsserver_"+name, help, labels, nil)
	}
	a.descs = [Kinds]*prometheus.Desc{
		Queries: d("namespace_queries_total", "Queries of the namespace's pods in the cluster zone: ClusterFirst search steps "+
			"(predicted from the first) and autopath queries, for the top namespaces by volume and \"other\".", "namespace"),
		Lookups: d("namespace_lookups_total", "Lookups: walks of the ClusterFirst search list in the cluster zone, "+
			"and autopath queries.", "namespace"),
		Misses: d("namespace_misses_total", "Search steps in the cluster zone answered NXDOMAIN.", "namespace"),
		Hits:   d("namespace_hits_total", "Lookups that found the name in the cluster zone (or through autopath).", "namespace"),
		External: d("namespace_external_lookups_total", "Lookups through the ClusterFirst search list of names that "+
			"are not cluster names (www.example.com).", "namespace"),
	}
	a.tracked = d("namespaces_tracked", "Namespaces of the store with counters of the namespace query metrics.")
	a.churnDsc = d("namespace_series_changes_total", "Namespaces that got or lost a series of their own in the namespace query metrics.")
	return a, nil
}

// apTail is the autopath suffix with its leading dot, without the trailing
// one.
var apTail = "." + strings.TrimSuffix(autopath.Suffix, ".")

// Count is what one query adds to the counters of a namespace. A handler
// keeps it with a cached reply and observes it on each hit.
type Count struct {
	c *counters // nil: the query is not counted
	d [Kinds]uint8
}

// Counted reports whether the query counts in a namespace.
func (c *Count) Counted() bool { return c.c != nil }

// Classify works out what a query adds, from its name, its reply's rcode
// and snap (nil before the first sync). bySource marks a first step that
// autopath by source answered: the server walked the search list itself.
// dep (nil: none) gets the lowercase names the result depends on (a
// namespace is known when <ns>.svc.<zone> exists).
func (a *Metrics) Classify(req *dns.Msg, snap *store.Snapshot, rcode int, bySource bool, dep func(string)) (ac Count) {
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery || req.Response {
		return ac
	}
	return a.ClassifyName(req.Question[0].Name, snap, rcode, bySource, dep)
}

// ClassifyName is Classify for a plain query for qname (as asked). It
// keeps no part of qname.
func (a *Metrics) ClassifyName(qname string, snap *store.Snapshot, rcode int, bySource bool, dep func(string)) (ac Count) {
	name := strings.TrimSuffix(qname, ".")
	var hit uint8
	if rcode == dns.RcodeSuccess {
		hit = 1
	}
	if hasSuffixFold(name, apTail) {
		p, ok := policy.ParseAutopath(dns.Fqdn(qname), a.zone)
		if !ok {
			return ac
		}
		// One query per lookup: the server walks the search list.
		ac.c = a.countersOf(p.Namespace, snap, dep)
		ac.d = [Kinds]uint8{Queries: 1, Lookups: 1, Hits: hit}
		return ac
	}
	// <x>.<ns>.svc.<zone>
	tail := len(".svc.") + len(a.zone)
	if len(name) <= tail+1 || !hasSuffixFold(name, a.zone) || !strings.EqualFold(name[len(name)-tail:len(name)-len(a.zone)], ".svc.") {
		return ac
	}
	rest := name[:len(name)-tail] // <x>.<ns>
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 || i == len(rest)-1 {
		return ac
	}
	x, ns := rest[:i], rest[i+1:]
	if ac.c = a.countersOf(ns, snap, dep); ac.c == &a.other {
		// No pod asks in a namespace the store does not know: a later
		// step of another walk, or a made-up name. One query.
		var miss uint8
		if rcode == dns.RcodeNameError {
			miss = 1
		}
		ac.d = [Kinds]uint8{Queries: 1, Misses: miss, Hits: hit}
		return ac
	}
	var ext uint8
	if !bySource && a.external(x, snap, dep) {
		ext = 1
	}
	switch {
	case bySource || rcode != dns.RcodeNameError:
		ac.d = [Kinds]uint8{Queries: 1, Lookups: 1, Hits: hit, External: ext}
	case a.exists(snap, x, ".svc.", dep):
		ac.d = [Kinds]uint8{Queries: 2, Lookups: 1, Misses: 1, Hits: 1, External: ext}
	case a.exists(snap, x, ".", dep):
		ac.d = [Kinds]uint8{Queries: 3, Lookups: 1, Misses: 2, Hits: 1, External: ext}
	default:
		ac.d = [Kinds]uint8{Queries: 3, Lookups: 1, Misses: 3, External: ext}
	}
	return ac
}

// exists reports whether the name <x><sep><zone> is in the snapshot (a
// later search step that would not be NXDOMAIN).
func (a *Metrics) exists(snap *store.Snapshot, x, sep string, dep func(string)) bool {
	if snap == nil {
		return false
	}
	var buf [256]byte
	b := lowerInto(buf[:0], x)
	b = append(append(append(b, sep...), a.zone...), '.')
	if dep != nil {
		dep(string(b))
	}
	_, ok := snap.LookupBytes(b)
	return ok
}

// external reports whether the remainder p is not a cluster name: it has
// more than one label, and its last labels are neither a namespace the
// store knows, nor "svc" or "pod", nor the start of the zone ("cluster",
// "cluster.local").
func (a *Metrics) external(p string, snap *store.Snapshot, dep func(string)) bool {
	i := strings.LastIndexByte(p, '.')
	if i < 0 {
		return false // a short name: a Service, by intent
	}
	last := p[i+1:]
	if strings.EqualFold(last, "svc") || strings.EqualFold(last, "pod") {
		return false
	}
	for _, t := range a.zoneTails {
		if hasSuffixFold(p, t) {
			return false
		}
	}
	if snap == nil || len(last) > 63 {
		return true
	}
	var buf [63]byte
	b := lowerInto(buf[:0], last)
	a.nsDep(b, dep)
	return !snap.HasNamespace(string(b))
}

// countersOf returns the counters of namespace ns (any case): "other" when
// the store does not know it, made on first use when it does.
func (a *Metrics) countersOf(ns string, snap *store.Snapshot, dep func(string)) *counters {
	if ns == "" || len(ns) > 63 {
		return &a.other
	}
	var buf [63]byte
	b := lowerInto(buf[:0], ns)
	a.nsDep(b, dep)
	a.idxMu.RLock()
	c := a.idx[string(b)]
	a.idxMu.RUnlock()
	if c != nil {
		return c
	}
	if snap == nil || !snap.HasNamespace(string(b)) {
		return &a.other
	}
	a.idxMu.Lock()
	defer a.idxMu.Unlock()
	if c = a.idx[string(b)]; c == nil {
		c = &counters{name: string(b)}
		a.idx[c.name] = c
		a.number(c)
	}
	return c
}

// nsDep passes dep the name whose existence tells whether the lowercase
// namespace ns is known: <ns>.svc.<zone>.
func (a *Metrics) nsDep(ns []byte, dep func(string)) {
	if dep != nil {
		dep(string(ns) + ".svc." + a.zone + ".")
	}
}

// Record is ClassifyName, then add: what a plain query for qname (as
// asked) adds, added. It returns it as a tally, for a cached reply to add
// again on each hit with Observe: a number, so that neither call
// allocates and the caller names no type of this package; 0 when the
// query counts nowhere. It keeps no part of qname.
func (a *Metrics) Record(qname string, snap *store.Snapshot, rcode int, bySource bool, dep func(string)) uint64 {
	ac := a.ClassifyName(qname, snap, rcode, bySource, dep)
	a.add(ac)
	if ac.c == nil {
		return 0
	}
	t := uint64(1)<<63 | uint64(ac.c.id)<<tallyBits
	for i, v := range ac.d {
		t |= uint64(v&0xf) << (4 * i)
	}
	return t
}

// tallyBits are the bits of a tally that hold a Count's d, 4 a counter.
const tallyBits = 4 * Kinds

// Observe adds again the tally t that Record returned ("other"'s counters
// once the namespace is deleted). It allocates nothing.
func (a *Metrics) Observe(t uint64) {
	if t == 0 {
		return
	}
	var ac Count
	ac.c = (*a.byID.Load())[uint32(t>>tallyBits)]
	for i := range ac.d {
		ac.d[i] = uint8(t>>(4*i)) & 0xf
	}
	a.add(ac)
}

// number gives c, a counters new in idx, its id. Under idxMu.
func (a *Metrics) number(c *counters) {
	old := *a.byID.Load()
	c.id = uint32(len(old))
	ids := append(old, c)
	a.byID.Store(&ids)
}

// add adds ac to its namespace's counters ("other"'s once the namespace
// is deleted). It allocates nothing.
func (a *Metrics) add(ac Count) {
	c := ac.c
	if c == nil {
		return
	}
	if c.dead.Load() {
		c = &a.other
	}
	for i, v := range ac.d {
		if v != 0 {
			c.n[i].Add(uint64(v))
		}
	}
}

// Describe implements prometheus.Collector.
func (a *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range a.descs {
		ch <- d
	}
	ch <- a.tracked
	ch <- a.churnDsc
}

// Collect implements prometheus.Collector: it chooses the namespaces with
// series when due, then reports them and "other".
func (a *Metrics) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now := a.now(); a.last.IsZero() || now.Sub(a.last) >= interval {
		a.choose()
		a.last = now
	}
	other := a.frozen
	for i := range other {
		other[i] += a.other.n[i].Load()
	}
	a.idxMu.RLock()
	tracked := len(a.idx)
	for _, c := range a.idx {
		for i := range Kinds {
			v := c.n[i].Load() - c.mark[i]
			if !c.selected {
				other[i] += v
				continue
			}
			c.scraped[i] = c.exported[i] + v
			ch <- prometheus.MustNewConstMetric(a.descs[i], prometheus.CounterValue, float64(c.scraped[i]), c.name)
		}
	}
	a.idxMu.RUnlock()
	for i, v := range other {
		ch <- prometheus.MustNewConstMetric(a.descs[i], prometheus.CounterValue, float64(v), "other")
	}
	ch <- prometheus.MustNewConstMetric(a.tracked, prometheus.GaugeValue, float64(tracked))
	ch <- prometheus.MustNewConstMetric(a.churnDsc, prometheus.CounterValue, float64(a.changes))
}

// choose drops the counters of namespaces the store no longer knows and
// chooses the namespaces with series (a.mu held).
func (a *Metrics) choose() {
	var snap *store.Snapshot
	if a.records != nil {
		snap = a.records.Snapshot()
	}
	a.idxMu.Lock()
	list := make([]*counters, 0, len(a.idx))
	for name, c := range a.idx {
		if snap != nil && !snap.HasNamespace(name) {
			delete(a.idx, name)
			c.dead.Store(true)
			if c.selected {
				// Its series ends with the namespace.
				a.take(c)
			}
			for i := range Kinds {
				a.frozen[i] += c.n[i].Load() - c.mark[i]
			}
			continue
		}
		q := c.n[Queries].Load()
		c.score = c.score/2 + float64(q-c.lastQ)
		c.lastQ = q
		list = append(list, c)
	}
	a.idxMu.Unlock()

	slices.SortFunc(list, func(x, y *counters) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		return strings.Compare(x.name, y.name)
	})
	var in, out []*counters // with a series, lowest score first; without, highest first
	for _, c := range list {
		if !c.selected {
			out = append(out, c)
		}
	}
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].selected {
			in = append(in, list[i])
		}
	}
	// A namespace named "other" stays in "other".
	out = slices.DeleteFunc(out, func(c *counters) bool { return c.name == "other" })
	for len(out) > 0 && out[0].score > 0 && a.selected < a.topN {
		a.give(out[0])
		out = out[1:]
	}
	for len(out) > 0 && len(in) > 0 && out[0].score > swapFactor*in[0].score && out[0].score-in[0].score >= swapGain {
		a.take(in[0])
		a.give(out[0])
		in, out = in[1:], out[1:]
	}
}

// give gives c a series: it continues from its last value, and what c
// counted without one stays in "other".
func (a *Metrics) give(c *counters) {
	for i := range Kinds {
		v := c.n[i].Load()
		a.frozen[i] += v - c.mark[i]
		c.mark[i] = v
		c.scraped[i] = c.exported[i]
	}
	c.selected = true
	a.selected++
	a.changes++
}

// take takes c's series away: it ends at its value of the last
// collection, and what c counted since, and counts later, goes to "other".
func (a *Metrics) take(c *counters) {
	for i := range Kinds {
		v := c.n[i].Load()
		unseen := v - c.mark[i] - (c.scraped[i] - c.exported[i])
		a.frozen[i] += unseen
		c.exported[i] = c.scraped[i]
		c.mark[i] = v
	}
	c.selected = false
	a.selected--
	a.changes++
}

// hasSuffixFold reports whether s ends with suffix, ignoring case.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// lowerInto appends s in ASCII lowercase to dst.
func lowerInto(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// Counts returns the counters of namespace ns as they are, with a series
// or not. "other" holds the namespaces the store does not know.
func (a *Metrics) Counts(ns string) [Kinds]uint64 {
	c := &a.other
	if ns != "other" {
		a.idxMu.RLock()
		c = a.idx[ns]
		a.idxMu.RUnlock()
	}
	var out [Kinds]uint64
	if c != nil {
		for i := range out {
			out[i] = c.n[i].Load()
		}
	}
	return out
}
