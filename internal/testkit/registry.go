package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Registry is a new pedantic registry (it checks each metric against its
// description) holding cs, for Gather and Value: a test reads the metrics
// of the collectors it built without a registry of its own. It fails t
// when one of cs does not register.
func Registry(t testing.TB, cs ...prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatalf("register %T: %v", c, err)
		}
	}
	return reg
}
