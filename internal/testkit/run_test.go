package testkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestGo(t *testing.T) {
	r := Go(t, "Run", func(ctx context.Context) error { <-ctx.Done(); return nil })
	select {
	case <-r.Done():
		t.Fatal("Done before Stop")
	default:
	}
	r.Stop()
	<-r.Done()
	r.Stop() // a second Stop, and the cleanup's, do nothing

	rec := &errorTB{TB: t}
	failed := &Running{t: rec, what: "Serve", cancel: func() {}, done: make(chan struct{}), err: errors.New("broke")}
	close(failed.done)
	failed.Stop()
	if len(rec.errs) != 1 || rec.errs[0] != "Serve = broke after cancellation, want nil" {
		t.Errorf("Stop of a run that returned an error: %q", rec.errs)
	}
}

func TestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c_total"})
	reg.MustRegister(c)
	c.Add(2)
	if v := Value(t, reg, "c_total"); v != 2 {
		t.Errorf("Value = %v, want 2", v)
	}
	f := &fatalTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		Value(f, reg, "d_total")
	}()
	if f.msg != "no series d_total" {
		t.Errorf("failure %q", f.msg)
	}
}

func TestWithFlag(t *testing.T) {
	var got []string
	WithFlag(t, "flag", []string{"--flag"}, func(t *testing.T, args []string, on bool) {
		got = append(got, fmt.Sprintf("%s %q %v", t.Name(), args, on))
	})
	if want := []string{`TestWithFlag/flag ["--flag"] true`, `TestWithFlag/default [] false`}; !slices.Equal(got, want) {
		t.Errorf("runs %q, want %q", got, want)
	}
}
