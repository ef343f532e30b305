package testkit

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegistry(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	c.Add(3)
	if v := Value(t, Registry(t, c), "x_total"); v != 3 {
		t.Errorf("x_total = %v, want 3", v)
	}
	f := &fatalTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		Registry(f, c, c)
	}()
	if !strings.HasPrefix(f.msg, "register *prometheus.counter: ") {
		t.Errorf("failure message %q, want the second registration's", f.msg)
	}
}
