package testkit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// StopTimeout bounds how long Stop waits for a run to return.
const StopTimeout = 15 * time.Second

// Running is a run started by Go.
type Running struct {
	t      testing.TB
	what   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	stop   sync.Once
}

// Go calls run on a goroutine of its own, with a context that Stop
// cancels. Stop runs when t ends, if the test has not called it.
// what names run in failures ("Run", "Serve").
func Go(t testing.TB, what string, run func(context.Context) error) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{t: t, what: what, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx)
	}()
	t.Cleanup(r.Stop)
	return r
}

// Done is closed when run has returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Err is what run returned; call it after Done is closed.
func (r *Running) Err() error { return r.err }

// Stop cancels run's context and waits for it to return. It fails the
// test when run returns an error or does not return within StopTimeout.
func (r *Running) Stop() {
	r.t.Helper()
	r.stop.Do(func() {
		r.cancel()
		select {
		case <-r.done:
			if r.err != nil {
				r.t.Errorf("%s = %v after cancellation, want nil", r.what, r.err)
			}
		case <-time.After(StopTimeout):
			r.t.Fatalf("%s did not return within %v of cancellation", r.what, StopTimeout)
		}
	})
}

// Start is Go for a run that returns nothing, such as an informer's Run.
func Start(t testing.TB, run func(context.Context)) *Running {
	t.Helper()
	return Go(t, "Run", func(ctx context.Context) error { run(ctx); return nil })
}

// RunSynced starts run, such as an informer's Run, and waits up to 10 s
// for synced to hold, such as its HasSynced.
func RunSynced(t testing.TB, run func(context.Context), synced func() bool) {
	t.Helper()
	Start(t, run)
	WaitFor(t, 10*time.Second, func() error {
		if !synced() {
			return errors.New("not synced")
		}
		return nil
	})
}

// WithFlag runs f as the subtest name with args, on, and as the subtest
// "default" with none, off: a flag's test beside the default's.
func WithFlag(t *testing.T, name string, args []string, f func(t *testing.T, args []string, on bool)) {
	t.Helper()
	t.Run(name, func(t *testing.T) { f(t, args, true) })
	t.Run("default", func(t *testing.T) { f(t, nil, false) })
}
