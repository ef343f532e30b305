package deploy

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// coreDNSQuery is a query written for CoreDNS, verbatim from where it
// comes from (Grafana's variables left in; coreDNSVars fills them).
type coreDNSQuery struct {
	from, expr string
	// empty: the query must return nothing (an absent() alert whose
	// metric is there).
	empty bool
}

// dashboardQueries are the targets and template variables of
// kube-prometheus-stack's CoreDNS dashboard
// (prometheus-community/helm-charts,
// charts/kube-prometheus-stack/templates/grafana/dashboards-1.14/k8s-coredns.yaml,
// "CoreDNS", uid vkQ0UHxik), verbatim. Each panel falls back from the
// names of CoreDNS before 1.7 to the current ones with "or".
var dashboardQueries = []coreDNSQuery{
	{"panel Requests (total) A", "sum(rate(coredns_dns_request_count_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (proto) or\nsum(rate(coredns_dns_requests_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (proto)", false},
	{"panel Requests (by qtype) A", "sum(rate(coredns_dns_request_type_count_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (type) or \nsum(rate(coredns_dns_requests_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (type)", false},
	{"panel Requests (by zone) A", "sum(rate(coredns_dns_request_count_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (zone) or\nsum(rate(coredns_dns_requests_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (zone)", false},
	{"panel Requests (DO bit) A", "sum(rate(coredns_dns_request_do_count_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) or\nsum(rate(coredns_dns_do_requests_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m]))", false},
	{"panel Requests (DO bit) B", "sum(rate(coredns_dns_request_count_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) or\nsum(rate(coredns_dns_requests_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m]))", false},
	{"panel Requests (size, udp) A", "histogram_quantile(0.99, (sum(rate(coredns_dns_request_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_request_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (le,proto)))", false},
	{"panel Requests (size, udp) B", "histogram_quantile(0.90, (sum(rate(coredns_dns_request_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_request_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (le,proto)))", false},
	{"panel Requests (size, udp) C", "histogram_quantile(0.50, (sum(rate(coredns_dns_request_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_request_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (le,proto)))", false},
	{"panel Requests (size,tcp) A", "histogram_quantile(0.99, (sum(rate(coredns_dns_request_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_request_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (le,proto)))", false},
	{"panel Requests (size,tcp) B", "histogram_quantile(0.90, (sum(rate(coredns_dns_request_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_request_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (le,proto)))", false},
	{"panel Requests (size,tcp) C", "histogram_quantile(0.50, (sum(rate(coredns_dns_request_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_request_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (le,proto)))", false},
	{"panel Responses (by rcode) A", "sum(rate(coredns_dns_response_rcode_count_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (rcode) or\nsum(rate(coredns_dns_responses_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (rcode)", false},
	{"panel Responses (duration) A", "histogram_quantile(0.99, (sum(rate(coredns_dns_request_duration_seconds{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (job)) or (sum(rate(coredns_dns_request_duration_seconds_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (le, job)))", false},
	{"panel Responses (duration) B", "histogram_quantile(0.90, (sum(rate(coredns_dns_request_duration_seconds{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by ()) or (sum(rate(coredns_dns_request_duration_seconds_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (le)))", false},
	{"panel Responses (duration) C", "histogram_quantile(0.50, (sum(rate(coredns_dns_request_duration_seconds{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by ()) or (sum(rate(coredns_dns_request_duration_seconds_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (le)))", false},
	{"panel Responses (size, udp) A", "histogram_quantile(0.99, (sum(rate(coredns_dns_response_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_response_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (le,proto))) ", false},
	{"panel Responses (size, udp) B", "histogram_quantile(0.90, (sum(rate(coredns_dns_response_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_response_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (le,proto))) ", false},
	{"panel Responses (size, udp) C", "histogram_quantile(0.50, (sum(rate(coredns_dns_response_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_response_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"udp\"}[5m])) by (le,proto))) ", false},
	{"panel Responses (size, tcp) A", "histogram_quantile(0.99, (sum(rate(coredns_dns_response_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_response_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (le,proto))) ", false},
	{"panel Responses (size, tcp) B", "histogram_quantile(0.90, (sum(rate(coredns_dns_response_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_response_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (le,proto))) ", false},
	{"panel Responses (size, tcp) C", "histogram_quantile(0.50, (sum(rate(coredns_dns_response_size_bytes{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (proto)) or (sum(rate(coredns_dns_response_size_bytes_bucket{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\",proto=\"tcp\"}[5m])) by (le,proto))) ", false},
	{"panel Cache (size) A", "sum(coredns_cache_size{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}) by (type) or\nsum(coredns_cache_entries{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}) by (type)", false},
	{"panel Cache (hitrate) A", "sum(rate(coredns_cache_hits_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (type)", false},
	{"panel Cache (hitrate) B", "sum(rate(coredns_cache_misses_total{job=~\"$job\",cluster=~\"$cluster\",instance=~\"$instance\"}[5m])) by (type)", false},
	// The variables job and instance (label_values(QUERY, LABEL): QUERY
	// must return series with LABEL). The variable cluster,
	// label_values(coredns_dns_requests_total, cluster), is hidden unless
	// kube-prometheus-stack's multicluster option is on: its label comes
	// from Prometheus's external labels, not from any target.
	{"variable job", "label_values(coredns_dns_requests_total{cluster=~\"$cluster\"},job)", false},
	{"variable instance", "label_values(coredns_dns_requests_total{job=~\"$job\",cluster=~\"$cluster\"}, instance)", false},
}

// mixinAlerts are the alerts of the coredns-mixin (povilasv/coredns-mixin
// alerts/coredns.libsonnet and alerts/forward.libsonnet) as the mixin
// renders them with its default corednsSelector, job="kube-dns".
var mixinAlerts = []coreDNSQuery{
	{"alert CoreDNSDown", "absent(up{job=\"kube-dns\"} == 1)\n", true},
	{"alert CoreDNSLatencyHigh", "histogram_quantile(0.99, sum(rate(coredns_dns_request_duration_seconds_bucket{job=\"kube-dns\"}[5m])) without (instance,pod)) > 4\n", false},
	{"alert CoreDNSErrorsHigh (critical)", "sum without (pod, instance, server, zone, view, rcode, plugin) (rate(coredns_dns_responses_total{job=\"kube-dns\",rcode=\"SERVFAIL\"}[5m]))\n  /\nsum without (pod, instance, server, zone, view, rcode, plugin) (rate(coredns_dns_responses_total{job=\"kube-dns\"}[5m])) > 0.03\n", false},
	{"alert CoreDNSErrorsHigh (warning)", "sum without (pod, instance, server, zone, view, rcode, plugin) (rate(coredns_dns_responses_total{job=\"kube-dns\",rcode=\"SERVFAIL\"}[5m]))\n  /\nsum without (pod, instance, server, zone, view, rcode, plugin) (rate(coredns_dns_responses_total{job=\"kube-dns\"}[5m])) > 0.01\n", false},
	{"alert CoreDNSForwardLatencyHigh", "histogram_quantile(0.99, sum(rate(coredns_forward_request_duration_seconds_bucket{job=\"kube-dns\"}[5m])) without (pod, instance, rcode)) > 4\n", false},
	{"alert CoreDNSForwardErrorsHigh (critical)", "sum without (pod, instance, rcode) (rate(coredns_forward_responses_total{job=\"kube-dns\",rcode=\"SERVFAIL\"}[5m]))\n  /\nsum without (pod, instance, rcode) (rate(coredns_forward_responses_total{job=\"kube-dns\"}[5m])) > 0.03\n", false},
	{"alert CoreDNSForwardErrorsHigh (warning)", "sum without (pod, instance, rcode) (rate(coredns_forward_responses_total{job=\"kube-dns\",rcode=\"SERVFAIL\"}[5m]))\n  /\nsum without (pod, instance, rcode) (rate(coredns_forward_responses_total{job=\"kube-dns\"}[5m])) > 0.01\n", false},
	{"alert CoreDNSForwardHealthcheckFailureCount", "sum without (pod, instance) (rate(coredns_forward_healthcheck_failures_total{job=\"kube-dns\"}[5m])) > 0\n", false},
	{"alert CoreDNSForwardHealthcheckBrokenCount", "sum without (pod, instance) (rate(coredns_forward_healthcheck_broken_total{job=\"kube-dns\"}[5m])) > 0\n", false},
}

// coreDNSTarget is a scrape target as Prometheus labels it: the cluster
// DNS through a ServiceMonitor on kube-dns (the job the mixin and the
// dashboards select), the node-local stage as NodeLocal DNSCache's.
type coreDNSTarget struct {
	proc                         *serveProcess
	job, instance, pod, endpoint string
}

// TestCoreDNSDashboardsAndAlerts: with --coredns-metrics, every query of
// kube-prometheus-stack's CoreDNS dashboard and every coredns-mixin alert
// returns data against the /metrics of the cluster DNS and of the
// node-local stage, evaluated by Prometheus's own engine over the samples
// of several real scrapes (with the target labels and the `up` series as
// Prometheus writes them; a map serves them, since Prometheus's TSDB would
// bring its remote-write cloud SDKs into go.mod). An alert's threshold comparison is dropped (its left side must
// return data); an absent() alert must return nothing.
func TestCoreDNSDashboardsAndAlerts(t *testing.T) {
	cluster, nodeLocal := startComponents(t, "--coredns-metrics")
	targets := []coreDNSTarget{
		{cluster, "kube-dns", "10.244.0.10:9153", "coredns-7db6d8ff4d-x2k9p", "metrics"},
		{nodeLocal, "node-local-dns", "172.18.0.2:9253", "node-local-dns-4jz8q", "metrics"},
	}
	db := memStorage{}
	sendQueries(t, 0, cluster, nodeLocal)
	waitHealthFailures(t, cluster, nodeLocal)
	const scrapes, interval = 5, 15 * time.Second
	start := time.Now().Add(-scrapes * interval).Truncate(time.Second)
	for i := range scrapes {
		sendQueries(t, i+1, cluster, nodeLocal)
		ts := start.Add(time.Duration(i) * interval)
		for _, tg := range targets {
			if err := appendScrape(db, tg, ts); err != nil {
				t.Fatalf("%s: %v", tg.job, err)
			}
		}
	}
	at := start.Add((scrapes - 1) * interval)
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	proven := 0
	for _, tg := range targets {
		vars := strings.NewReplacer("$job", tg.job, "$instance", tg.instance, "$cluster", ".*")
		for _, q := range dashboardQueries {
			if err := checkCoreDNSQuery(engine, db, vars.Replace(q.expr), q.empty, at); err != nil {
				t.Errorf("%s, job %s: %v\n%s", q.from, tg.job, err, vars.Replace(q.expr))
			} else {
				proven++
			}
		}
		job := strings.NewReplacer(`job="kube-dns"`, `job="`+tg.job+`"`)
		for _, q := range mixinAlerts {
			if err := checkCoreDNSQuery(engine, db, job.Replace(q.expr), q.empty, at); err != nil {
				t.Errorf("%s, job %s: %v\n%s", q.from, tg.job, err, job.Replace(q.expr))
			} else {
				proven++
			}
		}
	}
	t.Logf("%d dashboard queries and %d mixin alert rules, each for the cluster DNS and for node-local: %d of %d evaluations as expected",
		len(dashboardQueries), len(mixinAlerts), proven, 2*(len(dashboardQueries)+len(mixinAlerts)))
}

// checkCoreDNSQuery evaluates query at ts: a Grafana label_values(q, l)
// must return series with l; an alert expression "x > n" is evaluated as
// x. With empty, the result must be empty, else not.
func checkCoreDNSQuery(engine *promql.Engine, db storage.Queryable, query string, empty bool, ts time.Time) error {
	label := ""
	if m := labelValuesRe.FindStringSubmatch(query); m != nil {
		query, label = m[1], m[2]
	}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	if b, ok := expr.(*parser.BinaryExpr); ok && b.Op.IsComparisonOperator() {
		if _, ok := b.RHS.(*parser.NumberLiteral); ok {
			expr = b.LHS // the alert's threshold dropped
		}
	}
	q, err := engine.NewInstantQuery(context.Background(), db, nil, expr.String(), ts)
	if err != nil {
		return err
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		return res.Err
	}
	vec, err := res.Vector()
	if err != nil {
		return err
	}
	var got []string
	for _, s := range vec {
		if label != "" && s.Metric.Get(label) == "" {
			return fmt.Errorf("%s: no label %q", s.Metric, label)
		}
		if math.IsNaN(s.F) {
			return fmt.Errorf("%s: NaN", s.Metric)
		}
		got = append(got, fmt.Sprintf("%s %g", s.Metric, s.F))
	}
	switch {
	case empty && len(vec) > 0:
		return fmt.Errorf("want no result, got %v", got)
	case !empty && len(vec) == 0:
		return fmt.Errorf("no result")
	}
	return nil
}

// appendScrape scrapes tg and appends its samples at ts, with the target
// labels and the series up, as Prometheus does.
func appendScrape(db memStorage, tg coreDNSTarget, ts time.Time) error {
	resp, err := http.Get("http://" + tg.proc.metrics + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return fmt.Errorf("parse /metrics: %w", err)
	}
	target := []string{"job", tg.job, "instance", tg.instance, "namespace", "kube-system", "pod", tg.pod, "endpoint", tg.endpoint}
	ms := ts.UnixMilli()
	add := func(name string, m *dto.Metric, v float64, extra ...string) error {
		b := labels.NewBuilder(labels.FromStrings(append([]string{model.MetricNameLabel, name}, target...)...))
		for _, lp := range m.GetLabel() {
			b.Set(lp.GetName(), lp.GetValue())
		}
		for i := 0; i+1 < len(extra); i += 2 {
			b.Set(extra[i], extra[i+1])
		}
		return db.add(b.Labels(), ms, v)
	}
	if err := db.add(labels.FromStrings(append([]string{model.MetricNameLabel, "up"}, target...)...), ms, 1); err != nil {
		return err
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var errs []error
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				errs = append(errs, add(name, m, m.GetCounter().GetValue()))
			case dto.MetricType_GAUGE:
				errs = append(errs, add(name, m, m.GetGauge().GetValue()))
			case dto.MetricType_UNTYPED:
				errs = append(errs, add(name, m, m.GetUntyped().GetValue()))
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				inf := false
				for _, b := range h.GetBucket() {
					inf = inf || math.IsInf(b.GetUpperBound(), 1)
					errs = append(errs, add(name+"_bucket", m, float64(b.GetCumulativeCount()), "le", formatLe(b.GetUpperBound())))
				}
				if !inf {
					errs = append(errs, add(name+"_bucket", m, float64(h.GetSampleCount()), "le", "+Inf"))
				}
				errs = append(errs, add(name+"_sum", m, h.GetSampleSum()), add(name+"_count", m, float64(h.GetSampleCount())))
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					errs = append(errs, add(name, m, q.GetValue(), "quantile", formatLe(q.GetQuantile())))
				}
				errs = append(errs, add(name+"_sum", m, s.GetSampleSum()), add(name+"_count", m, float64(s.GetSampleCount())))
			}
			for _, err := range errs {
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
		}
	}
	return nil
}

func formatLe(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// memStorage is a storage.Queryable of float samples by series.
type memStorage map[string]*memSeries

type memSeries struct {
	lset    labels.Labels
	samples []chunks.Sample
}

// add appends a sample; timestamps rise within a series.
func (m memStorage) add(lset labels.Labels, t int64, v float64) error {
	k := lset.String()
	s := m[k]
	if s == nil {
		s = &memSeries{lset: lset}
		m[k] = s
	}
	if n := len(s.samples); n > 0 && s.samples[n-1].T() >= t {
		return fmt.Errorf("%s: sample at %d after %d", k, t, s.samples[n-1].T())
	}
	s.samples = append(s.samples, fSample{t: t, f: v})
	return nil
}

// Querier implements storage.Queryable.
func (m memStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &storage.MockQuerier{SelectMockFunction: func(sortSeries bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
		var out []storage.Series
	series:
		for _, s := range m {
			for _, matcher := range ms {
				if !matcher.Matches(s.lset.Get(matcher.Name)) {
					continue series
				}
			}
			var in []chunks.Sample
			for _, x := range s.samples {
				if x.T() >= mint && x.T() <= maxt {
					in = append(in, x)
				}
			}
			out = append(out, storage.NewListSeries(s.lset, in))
		}
		if sortSeries {
			slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
		}
		return &sliceSeriesSet{series: out, i: -1}
	}}, nil
}

type sliceSeriesSet struct {
	series []storage.Series
	i      int
}

func (s *sliceSeriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *sliceSeriesSet) At() storage.Series                { return s.series[s.i] }
func (s *sliceSeriesSet) Err() error                        { return nil }
func (s *sliceSeriesSet) Warnings() annotations.Annotations { return nil }

// fSample is a float sample (chunks.Sample).
type fSample struct {
	t int64
	f float64
}

func (s fSample) T() int64                      { return s.t }
func (s fSample) ST() int64                     { return 0 }
func (s fSample) F() float64                    { return s.f }
func (s fSample) H() *histogram.Histogram       { return nil }
func (s fSample) FH() *histogram.FloatHistogram { return nil }
func (s fSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fSample) Copy() chunks.Sample           { return s }
