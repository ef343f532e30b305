package clusterdns

import (
	"context"
	"runtime/debug"
	"time"
)

// releaseStartup gives back to the OS what start-up left resident: the
// garbage of loading the records and the pages of the binary that serving
// never touches again (releaseStartupPages).
func releaseStartup() {
	debug.FreeOSMemory()
	releaseStartupPages()
}

// releaseAfterSync gives back the pages start-up touched once more: the
// feed's first steps (the informers' initial list, the watcher) run after
// the listeners, so it waits for the first sync and a second more. Then it
// calls after, when set, and returns the freed heap to the OS.
func releaseAfterSync(synced func() bool, after func()) func(context.Context) error {
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
			releaseStartupPages()
		}
		return nil
	}
}
