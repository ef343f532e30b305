package prom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// build makes one metric of each kind, as a component's constructor does.
func build(s *Set) prometheus.Counter {
	c := s.Counter("calls_total", "Calls.")
	s.CounterVec("codes_total", "Codes.", "code").WithLabelValues("OK").Inc()
	s.Gauge("up", "Up.")
	s.GaugeFunc("bytes", "Bytes.", func() float64 { return 3 })
	s.Histogram("seconds", "Seconds.", AgentBuckets)
	s.HistogramVec("call_seconds", "Call seconds.", []float64{1}, "method")
	return c
}

func TestNewNamesAndRegisters(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(reg, "cri", build)
	if err != nil {
		t.Fatal(err)
	}
	c.Inc()
	want := `
# HELP dnsconfigurer_cri_calls_total Calls.
# TYPE dnsconfigurer_cri_calls_total counter
dnsconfigurer_cri_calls_total 1
# HELP dnsconfigurer_cri_bytes Bytes.
# TYPE dnsconfigurer_cri_bytes gauge
dnsconfigurer_cri_bytes 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "dnsconfigurer_cri_calls_total", "dnsconfigurer_cri_bytes"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg); n != 5 {
		t.Errorf("%d series, want 5 (calls, codes{OK}, up, bytes, seconds; the vector of histograms has none)", n)
	}
	if c, err := New(reg, "cri", build); err == nil || c != nil {
		t.Errorf("registering twice: %v, %v; want an error and no metrics", c, err)
	}
	if _, err := New(nil, "x", build); err != nil {
		t.Errorf("nil registry: %v", err)
	}
}
