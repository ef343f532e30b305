package testkit

import (
	"context"
	"time"
)

// Every calls f every d until ctx ends or f returns false: the pace of a
// load or a sampler, not a wait for a condition (WaitFor is that).
func Every(ctx context.Context, d time.Duration, f func() bool) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// A tick and the end may both be ready: the end wins.
		if ctx.Err() != nil || !f() {
			return
		}
	}
}
