// Package memrelease gives memory back to the OS after a server starts.
//
// The binary holds every subcommand, so start-up leaves garbage and pages
// of code resident that serving never touches again. It has no DNS rules.
package memrelease

import (
	"context"
	"runtime/debug"
	"time"
)

// Startup returns the freed heap and the executable's start-up pages
// (Pages) to the OS: after the start, and after a relist settled
// (internal/gctarget).
func Startup() {
	debug.FreeOSMemory()
	Pages()
}

// AfterSync returns a task that releases the pages start-up touched once
// more. A feed's first list runs after the listeners start, so it waits
// for synced and one second more. Then it calls after, when set, and
// returns the freed heap.
func AfterSync(synced func() bool, after func()) func(context.Context) error {
	return func(ctx context.Context) error {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for !synced() {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			if after != nil {
				after()
				debug.FreeOSMemory()
			}
			Pages()
		}
		return nil
	}
}
