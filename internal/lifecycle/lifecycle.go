// Package lifecycle runs the long-running parts of a component and stops
// them in the reverse of their order.
//
// Every command and component runs its parts the same way: the record
// feed, the DNS listener, the metrics endpoint and the reloader are Tasks,
// and Run starts them together. Run stops them one at a time from the last:
// list what serves first and what feeds it last, so the feed stops before
// the DNS listener and the listener before /readyz. Bounded bounds how long
// a whole component may take to stop after SIGTERM.
package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Task is one long-running part of a component. It returns when ctx is
// done (nil) or when it fails.
type Task func(ctx context.Context) error

// Run runs every task until ctx is done or one fails, then stops them in
// the reverse of their order: a task's context is cancelled only once every
// task after it has returned. An error a task returns after its context
// ended is its shutdown, not a failure. Run returns the first failure.
func Run(ctx context.Context, tasks ...Task) error {
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once  sync.Once
		first error
	)
	cancels := make([]context.CancelFunc, len(tasks))
	done := make([]chan struct{}, len(tasks))
	for i, t := range tasks {
		tctx, tcancel := context.WithCancel(context.WithoutCancel(ctx))
		cancels[i], done[i] = tcancel, make(chan struct{})
		go func() {
			defer close(done[i])
			if err := t(tctx); err != nil && tctx.Err() == nil {
				once.Do(func() { first = err })
				cancel()
			}
		}()
	}
	<-stop.Done()
	for i := len(tasks) - 1; i >= 0; i-- {
		cancels[i]()
		<-done[i]
	}
	return first
}

// Bounded runs run and returns its error, but once ctx is done waits
// at most limit for it: a component that does not stop in time is left
// behind (the process exits) with an error saying so.
func Bounded(ctx context.Context, limit time.Duration, log *slog.Logger, run func() error) error {
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		log.Error("shutdown did not complete in time; exiting anyway", "limit", limit.String())
		return fmt.Errorf("shutdown did not complete within %s", limit)
	}
}
