package clusterdns

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
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
)

// Bounds and defaults of the namespace query metrics (Amplification).
const (
	// DefaultTopNamespaces is how many namespaces get series of their own
	// by default (v1alpha1's namespaceMetrics).
	DefaultTopNamespaces = v1alpha1.DefaultNamespaceMetrics
	// MaxTopNamespaces bounds the namespaces with series of their own.
	MaxTopNamespaces = v1alpha1.MaxNamespaceMetrics

	// ampInterval is how often the namespaces with series of their own
	// are chosen again (at a scrape, when this long has passed since the
	// last choice).
	ampInterval = time.Minute
	// A namespace without a series takes the place of the one with the
	// lowest score when its score is more than ampSwapFactor times that
	// score and at least ampSwapGain above it (the score is the queries
	// since the last choice plus half the previous score: about twice the
	// queries per minute of a steady namespace).
	ampSwapFactor = 2
	ampSwapGain   = 60
)

// Counters of a namespace, in the order of the metric families.
const (
	ampQueries = iota
	ampLookups
	ampMisses
	ampHits
	ampExternal
	numAmp
)

// Amplification counts, per namespace of the pods asking, the queries of
// ClusterFirst search walks in the cluster zone and of autopath, and
// exports them for the topN namespaces by volume plus "other" (the
// definitions and the PromQL are in docs/amplification.md):
//
//   - dnsconfigurer_dnsserver_namespace_queries_total{namespace}
//   - dnsconfigurer_dnsserver_namespace_lookups_total{namespace}
//   - dnsconfigurer_dnsserver_namespace_misses_total{namespace}
//   - dnsconfigurer_dnsserver_namespace_hits_total{namespace}
//   - dnsconfigurer_dnsserver_namespace_external_lookups_total{namespace}
//   - dnsconfigurer_dnsserver_namespaces_tracked (gauge)
//   - dnsconfigurer_dnsserver_namespace_series_changes_total
//
// Only a walk's first step carries the pod's namespace:
// "<x>.<ns>.svc.<zone>" (kubelet's ClusterFirst search list starts with
// "<ns>.svc.<zone>"), and "<x>.search.<ns>.<zone>.ap.k8s.io" under
// autopath. A first step answered other than NXDOMAIN is a lookup of one
// query. A first step answered NXDOMAIN is counted with the rest of the
// walk in the zone, predicted from the snapshot: "<x>.svc.<zone>" then
// "<x>.<zone>", up to the first that exists (two or three queries, one
// lookup), so that a walk whose later steps reach other replicas of the
// server (each step is a new socket, which kube-proxy balances anew) is
// counted whole, once. Later steps are not counted when they arrive; the
// walk's steps outside the zone (host search domains, the name itself)
// are not counted. A name of a namespace the store does not know counts
// one query in "other" (the second step of a walk for www.example.com,
// "www.example.com.svc.<zone>", is such a name: "com").
//
// Bounds: counters exist only for namespaces the store knows, and are
// dropped when the namespace goes; the series are at most topN+1 per
// family. What a query adds is computed once per reply cached (with the
// reply, for its snapshot): counting a query answered from the cache is a
// few atomic adds, with no allocation.
//
// Series are monotonic: a namespace that gets a series starts it where its
// last one stopped (0 the first time) and counts from then on; what it
// counted without one is in "other", and a series taken away ends at its
// value of the last collection, what it counted since going to "other".
// The namespaces with series are chosen at the first collection and again
// at a collection at least a minute after the last choice: free places go
// to the namespaces with the highest scores, and a namespace without a
// series takes the place of the lowest scoring one only when its score is
// more than twice that and at least 60 above it, so noise does not swap
// them.
type Amplification struct {
	topN int
	now  func() time.Time

	// Set once by WithAmplification.
	zone      string   // the cluster zone, lowercase, no trailing dot
	zoneTails []string // ".<zone label 1>", ".<label 1>.<label 2>", …: a remainder ending so is a cluster name
	records   Records

	other nsCounters // namespaces the store does not know, and deleted ones

	idxMu sync.RWMutex
	idx   map[string]*nsCounters // the store's namespaces seen in queries

	mu       sync.Mutex // the choice of the series, and collection
	last     time.Time  // the last choice; zero before the first
	selected int
	frozen   [numAmp]uint64 // "other"'s counts from namespaces that got a series or were deleted
	changes  uint64

	descs    [numAmp]*prometheus.Desc
	tracked  *prometheus.Desc
	churnDsc *prometheus.Desc
}

// nsCounters are the counters of one namespace (or of "other").
type nsCounters struct {
	n    [numAmp]atomic.Uint64
	dead atomic.Bool // the namespace was deleted: counts go to "other"

	// Under Amplification.mu.
	name     string
	selected bool
	mark     [numAmp]uint64 // n when the series was last given or taken
	exported [numAmp]uint64 // the series' value then
	scraped  [numAmp]uint64 // the series' value at the last collection
	score    float64
	lastQ    uint64 // queries at the last choice
}

// NewAmplification returns the namespace query metrics with series of
// their own for topN namespaces (1 to MaxTopNamespaces). Register it on a
// prometheus.Registerer and give it to one Handler (WithAmplification).
func NewAmplification(topN int) (*Amplification, error) {
	if topN < 1 || topN > MaxTopNamespaces {
		return nil, fmt.Errorf("namespace metrics: %d namespaces: want 1 to %d", topN, MaxTopNamespaces)
	}
	a := &Amplification{topN: topN, now: time.Now, idx: map[string]*nsCounters{}}
	a.other.name = "other"
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_"+name, help, labels, nil)
	}
	a.descs = [numAmp]*prometheus.Desc{
		ampQueries: d("namespace_queries_total", "Queries of the namespace's pods in the cluster zone: ClusterFirst search steps "+
			"(predicted from the first) and autopath queries, for the top namespaces by volume and \"other\".", "namespace"),
		ampLookups: d("namespace_lookups_total", "Lookups: walks of the ClusterFirst search list in the cluster zone, "+
			"and autopath queries.", "namespace"),
		ampMisses: d("namespace_misses_total", "Search steps in the cluster zone answered NXDOMAIN.", "namespace"),
		ampHits:   d("namespace_hits_total", "Lookups that found the name in the cluster zone (or through autopath).", "namespace"),
		ampExternal: d("namespace_external_lookups_total", "Lookups through the ClusterFirst search list of names that "+
			"are not cluster names (www.example.com).", "namespace"),
	}
	a.tracked = d("namespaces_tracked", "Namespaces of the store with counters of the namespace query metrics.")
	a.churnDsc = d("namespace_series_changes_total", "Namespaces that got or lost a series of their own in the namespace query metrics.")
	return a, nil
}

// WithAmplification counts the handler's queries per namespace in a (see
// Amplification). a serves one handler.
func WithAmplification(a *Amplification) Option {
	return func(h *Handler) {
		a.bind(h.zoneName, h.records)
		h.amp = a
	}
}

// bind sets the cluster zone (any case, with or without the trailing dot)
// and the records whose namespaces are counted.
func (a *Amplification) bind(zone string, records Records) {
	a.zone = strings.TrimSuffix(strings.ToLower(zone), ".")
	a.records = records
	a.zoneTails = nil
	labels := strings.Split(a.zone, ".")
	for i := range labels {
		a.zoneTails = append(a.zoneTails, "."+strings.Join(labels[:i+1], "."))
	}
}

// apTail is the autopath suffix with its leading dot, without the trailing
// one.
var apTail = "." + strings.TrimSuffix(autopath.Suffix, ".")

// ampCount is what one query adds to the counters of a namespace; c is nil
// for a query that is not counted.
type ampCount struct {
	c *nsCounters
	d [numAmp]uint8
}

// classify works out what a query adds, from its name, the rcode of its
// reply and snap (the current snapshot, nil before the first sync).
// bySource is a first step that autopath by source answered: the server
// walked the search list itself. dep (nil: none) gets the lowercase names
// whose existence the result depends on (a namespace is known when
// <ns>.svc.<zone> exists).
func (a *Amplification) classify(req *dns.Msg, snap *store.Snapshot, rcode int, bySource bool, dep func(string)) (ac ampCount) {
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery || req.Response {
		return ac
	}
	return a.classifyName(req.Question[0].Name, snap, rcode, bySource, dep)
}

// classifyName is classify for a plain query for qname (as asked).
func (a *Amplification) classifyName(qname string, snap *store.Snapshot, rcode int, bySource bool, dep func(string)) (ac ampCount) {
	name := strings.TrimSuffix(qname, ".")
	var hit uint8
	if rcode == dns.RcodeSuccess {
		hit = 1
	}
	if hasSuffixFoldASCII(name, apTail) {
		p, ok := autopath.Parse(dns.Fqdn(qname), a.zone)
		if !ok {
			return ac
		}
		// One query per lookup: the server walks the search list.
		ac.c = a.counters(p.Namespace, snap, dep)
		ac.d = [numAmp]uint8{ampQueries: 1, ampLookups: 1, ampHits: hit}
		return ac
	}
	// <x>.<ns>.svc.<zone>
	tail := len(".svc.") + len(a.zone)
	if len(name) <= tail+1 || !hasSuffixFoldASCII(name, a.zone) || !asciiEqualFold(name[len(name)-tail:len(name)-len(a.zone)], ".svc.") {
		return ac
	}
	rest := name[:len(name)-tail] // <x>.<ns>
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 || i == len(rest)-1 {
		return ac
	}
	x, ns := rest[:i], rest[i+1:]
	if ac.c = a.counters(ns, snap, dep); ac.c == &a.other {
		// No pod asks in a namespace the store does not know: a later
		// step of another walk, or a made-up name. One query.
		var miss uint8
		if rcode == dns.RcodeNameError {
			miss = 1
		}
		ac.d = [numAmp]uint8{ampQueries: 1, ampMisses: miss, ampHits: hit}
		return ac
	}
	var ext uint8
	if !bySource && a.external(x, snap, dep) {
		ext = 1
	}
	switch {
	case bySource || rcode != dns.RcodeNameError:
		ac.d = [numAmp]uint8{ampQueries: 1, ampLookups: 1, ampHits: hit, ampExternal: ext}
	case a.exists(snap, x, ".svc.", dep):
		ac.d = [numAmp]uint8{ampQueries: 2, ampLookups: 1, ampMisses: 1, ampHits: 1, ampExternal: ext}
	case a.exists(snap, x, ".", dep):
		ac.d = [numAmp]uint8{ampQueries: 3, ampLookups: 1, ampMisses: 2, ampHits: 1, ampExternal: ext}
	default:
		ac.d = [numAmp]uint8{ampQueries: 3, ampLookups: 1, ampMisses: 3, ampExternal: ext}
	}
	return ac
}

// exists reports whether the name <x><sep><zone> is in the snapshot (a
// later search step that would not be NXDOMAIN).
func (a *Amplification) exists(snap *store.Snapshot, x, sep string, dep func(string)) bool {
	if snap == nil {
		return false
	}
	var buf [256]byte
	b := lowerInto(buf[:0], x)
	b = append(append(append(b, sep...), a.zone...), '.')
	if dep != nil {
		dep(string(b))
	}
	_, ok := snap.Lookup(borrowString(b))
	return ok
}

// external reports whether the remainder p is not a cluster name: it has
// more than one label, and its last labels are neither a namespace the
// store knows, nor "svc" or "pod", nor the start of the zone ("cluster",
// "cluster.local").
func (a *Amplification) external(p string, snap *store.Snapshot, dep func(string)) bool {
	i := strings.LastIndexByte(p, '.')
	if i < 0 {
		return false // a short name: a Service, by intent
	}
	last := p[i+1:]
	if asciiEqualFold(last, "svc") || asciiEqualFold(last, "pod") {
		return false
	}
	for _, t := range a.zoneTails {
		if hasSuffixFoldASCII(p, t) {
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

// counters returns the counters of namespace ns (any case): "other" when
// the store does not know it, made on first use when it does.
func (a *Amplification) counters(ns string, snap *store.Snapshot, dep func(string)) *nsCounters {
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
		c = &nsCounters{name: string(b)}
		a.idx[c.name] = c
	}
	return c
}

// nsDep passes dep the name whose existence tells whether the lowercase
// namespace ns is known: <ns>.svc.<zone>.
func (a *Amplification) nsDep(ns []byte, dep func(string)) {
	if dep != nil {
		dep(string(ns) + ".svc." + a.zone + ".")
	}
}

// observe adds ac to its namespace's counters ("other"'s once the
// namespace is deleted).
func (a *Amplification) observe(ac *ampCount) {
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
func (a *Amplification) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range a.descs {
		ch <- d
	}
	ch <- a.tracked
	ch <- a.churnDsc
}

// Collect implements prometheus.Collector: it chooses the namespaces with
// series when due, then reports them and "other".
func (a *Amplification) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now := a.now(); a.last.IsZero() || now.Sub(a.last) >= ampInterval {
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
		for i := range numAmp {
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
func (a *Amplification) choose() {
	var snap *store.Snapshot
	if a.records != nil {
		snap = a.records.Snapshot()
	}
	a.idxMu.Lock()
	list := make([]*nsCounters, 0, len(a.idx))
	for name, c := range a.idx {
		if snap != nil && !snap.HasNamespace(name) {
			delete(a.idx, name)
			c.dead.Store(true)
			if c.selected {
				// Its series ends with the namespace.
				a.take(c)
			}
			for i := range numAmp {
				a.frozen[i] += c.n[i].Load() - c.mark[i]
			}
			continue
		}
		q := c.n[ampQueries].Load()
		c.score = c.score/2 + float64(q-c.lastQ)
		c.lastQ = q
		list = append(list, c)
	}
	a.idxMu.Unlock()

	slices.SortFunc(list, func(x, y *nsCounters) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		return strings.Compare(x.name, y.name)
	})
	var in, out []*nsCounters // with a series, lowest score first; without, highest first
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
	out = slices.DeleteFunc(out, func(c *nsCounters) bool { return c.name == "other" })
	for len(out) > 0 && out[0].score > 0 && a.selected < a.topN {
		a.give(out[0])
		out = out[1:]
	}
	for len(out) > 0 && len(in) > 0 && out[0].score > ampSwapFactor*in[0].score && out[0].score-in[0].score >= ampSwapGain {
		a.take(in[0])
		a.give(out[0])
		in, out = in[1:], out[1:]
	}
}

// give gives c a series: it continues from its last value, and what c
// counted without one stays in "other".
func (a *Amplification) give(c *nsCounters) {
	for i := range numAmp {
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
func (a *Amplification) take(c *nsCounters) {
	for i := range numAmp {
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

// hasSuffixFoldASCII reports whether s ends with suffix, ignoring ASCII
// case.
func hasSuffixFoldASCII(s, suffix string) bool {
	return len(s) >= len(suffix) && asciiEqualFold(s[len(s)-len(suffix):], suffix)
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
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
