package hosts

import "github.com/prometheus/client_golang/prometheus"

var (
	entriesDesc = prometheus.NewDesc("dnsconfigurer_hosts_entries",
		"(address, name) entries served, from the hosts file and the overrides.", nil, nil)
	reloadsDesc = prometheus.NewDesc("dnsconfigurer_hosts_reloads_total",
		"Loads of a changed hosts file that replaced the table in service.", nil, nil)
	reloadErrorsDesc = prometheus.NewDesc("dnsconfigurer_hosts_reload_errors_total",
		"Problems reading the hosts file (the last good table stays in service), counted once until the problem changes or ends, by reason: missing, permission, not_regular, too_large, line_too_long, too_many_entries, read.",
		[]string{"reason"}, nil)
	warningsDesc = prometheus.NewDesc("dnsconfigurer_hosts_warnings",
		"Problems (bad lines or names, skipped) in the hosts file in service.", nil, nil)
	healthyDesc = prometheus.NewDesc("dnsconfigurer_hosts_file_healthy",
		"1 when the last read of the hosts file was good, 0 while it has a problem.", nil, nil)
	lastSuccessDesc = prometheus.NewDesc("dnsconfigurer_hosts_last_reload_success_timestamp_seconds",
		"Unix time of the last good read of the hosts file (0: never).", nil, nil)
)

// reasons are the label values of dnsconfigurer_hosts_reload_errors_total,
// all exported from the start.
var reasons = []string{"missing", "permission", "not_regular", "too_large", "line_too_long", "too_many_entries", "read"}

// Source is a prometheus.Collector (register it on the registry of the
// other metrics):
//
//   - dnsconfigurer_hosts_entries
//   - dnsconfigurer_hosts_reloads_total
//   - dnsconfigurer_hosts_reload_errors_total{reason}
//   - dnsconfigurer_hosts_warnings
//   - dnsconfigurer_hosts_file_healthy
//   - dnsconfigurer_hosts_last_reload_success_timestamp_seconds
var _ prometheus.Collector = (*Source)(nil)

// Describe implements prometheus.Collector.
func (s *Source) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{entriesDesc, reloadsDesc, reloadErrorsDesc, warningsDesc, healthyDesc, lastSuccessDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *Source) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	st := s.status
	reloads := s.reloads
	errs := make([]uint64, len(reasons))
	for i, r := range reasons {
		errs[i] = s.errCount[r]
	}
	problems := s.file.problems
	s.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(entriesDesc, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(reloads))
	for i, r := range reasons {
		ch <- prometheus.MustNewConstMetric(reloadErrorsDesc, prometheus.CounterValue, float64(errs[i]), r)
	}
	gauge(warningsDesc, float64(problems))
	healthy := 1.0
	if st.Err != nil {
		healthy = 0
	}
	gauge(healthyDesc, healthy)
	last := 0.0
	if !st.Loaded.IsZero() {
		last = float64(st.Loaded.UnixNano()) / 1e9
	}
	gauge(lastSuccessDesc, last)
}
