package prom

import "github.com/prometheus/client_golang/prometheus"

// Namespace is the first part of every metric name.
const Namespace = "dnsconfigurer"

// AgentBuckets are the latency buckets (10µs to 5s) of the time a node
// agent spends on one pod's DNS.
var AgentBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .01, .1, 1, 5}

// Set builds the metrics of one subsystem for New, and holds them in the
// order they were built.
type Set struct {
	sub string
	cs  []prometheus.Collector
}

// New builds the metrics T of subsystem sub with build, then registers
// every metric build made on reg (nil: none): each component's metrics
// constructor.
func New[T any](reg prometheus.Registerer, sub string, build func(*Set) T) (T, error) {
	s := &Set{sub: sub}
	m := build(s)
	if err := s.register(reg); err != nil {
		var none T
		return none, err
	}
	return m, nil
}

func add[C prometheus.Collector](s *Set, c C) C {
	s.cs = append(s.cs, c)
	return c
}

// Counter builds a counter.
func (s *Set) Counter(name, help string) prometheus.Counter {
	return add(s, prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: s.sub, Name: name, Help: help}))
}

// CounterVec builds a counter with labels.
func (s *Set) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return add(s, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: s.sub, Name: name, Help: help}, labels))
}

// Gauge builds a gauge.
func (s *Set) Gauge(name, help string) prometheus.Gauge {
	return add(s, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: s.sub, Name: name, Help: help}))
}

// GaugeFunc builds a gauge that reads f when scraped.
func (s *Set) GaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return add(s, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: s.sub, Name: name, Help: help}, f))
}

// Histogram builds a histogram.
func (s *Set) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return add(s, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: s.sub, Name: name, Help: help, Buckets: buckets}))
}

// HistogramVec builds a histogram with labels.
func (s *Set) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return add(s, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: s.sub, Name: name, Help: help, Buckets: buckets}, labels))
}

// register registers every metric built so far on reg; a nil reg
// registers none.
func (s *Set) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range s.cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
