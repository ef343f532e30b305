package dnsserver_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves goroutines behind (servers not
// shut down, forwarder exchanges still running).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gather flattens a registry into "name{label="v",...}" → value; a
// histogram is its name_count{...} and name_sum{...}, and name_count summed
// over its series.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			key := mf.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				// By series, and the count summed over the family.
				h := m.GetHistogram()
				out[strings.Replace(key, mf.GetName(), mf.GetName()+"_count", 1)] = float64(h.GetSampleCount())
				out[strings.Replace(key, mf.GetName(), mf.GetName()+"_sum", 1)] = h.GetSampleSum()
				if len(labels) > 0 {
					out[mf.GetName()+"_count"] += float64(h.GetSampleCount())
				}
			}
		}
	}
	return out
}
