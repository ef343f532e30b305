package testkit

import (
	"context"
	"errors"
	"testing"
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
