package clusterdns

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names keep the dnsserver subsystem they had before the cluster
// zone left pkg/dnsserver: dashboards and alerts read them.
const (
	metricNamespace = "dnsconfigurer"
	metricSubsystem = "dnsserver"
)

// RegisterRecordMetrics registers the gauges of the served snapshot on reg,
// read from records at scrape time:
//
//   - dnsconfigurer_dnsserver_records{kind} (services, endpoint_slices,
//     endpoints, pods, namespaces, names in the served snapshot)
//   - dnsconfigurer_dnsserver_synced (1 after the first full sync)
//
// The queries are counted by the dnsserver.Server (its request metrics).
func RegisterRecordMetrics(reg prometheus.Registerer, records Records) error {
	if err := reg.Register(&storeCollector{records: records}); err != nil {
		return fmt.Errorf("register dnsserver metrics: %w", err)
	}
	return nil
}

var (
	recordsDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_records",
		"Objects and names in the served snapshot, by kind.", []string{"kind"}, nil)
	syncedDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_synced",
		"1 once the records have had their first full sync.", nil, nil)
)

// storeCollector reports the served snapshot's sizes at scrape time.
type storeCollector struct{ records Records }

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- recordsDesc
	ch <- syncedDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.records.Snapshot()
	if snap == nil {
		ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, 1)
	for kind, v := range map[string]int{
		"services":        snap.Counts.Services,
		"endpoint_slices": snap.Counts.EndpointSlices,
		"endpoints":       snap.Counts.Endpoints,
		"pods":            snap.Counts.Pods,
		"namespaces":      snap.Counts.Namespaces,
		"names":           snap.Counts.Names,
	} {
		ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.GaugeValue, float64(v), kind)
	}
}
