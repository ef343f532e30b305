package safefile

import "context"

// Await runs f, which may block in a system call (a hung network file
// system, a stuck FUSE mount), on its own goroutine and waits for it to
// return (true) or for ctx to be done (false). After false, f may still be
// running: the caller must stop and leave to f whatever f uses.
func Await(ctx context.Context, f func()) bool {
	if ctx.Err() != nil {
		return false
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
