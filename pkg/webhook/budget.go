package webhook

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
)

// byteBudget bounds the request body bytes held at once: a weighted
// semaphore whose waiters are served in arrival order, so a large share is
// not starved by a stream of small ones. Bodies take their bytes as they
// arrive (bodyReader), never by their declared length.
//
// A body waits for more while holding what it has, so waiters could hold
// the whole budget and wait for each other forever. They may hold at most
// half of it: a waiter that would pass that is refused (errWaitersFull).
// When every holder waits, half the budget is then free, and the first
// waiter, which asks for no more than it holds, fits.
type byteBudget struct {
	size int64

	mu      sync.Mutex
	used    int64
	waiters list.List // of *budgetWaiter
	// waitHeld is the bytes the waiters hold.
	waitHeld int64
}

type budgetWaiter struct {
	n, held int64
	ready   chan struct{} // closed when the bytes are granted
}

// errWaitersFull refuses a wait that would let waiters hold over half the
// budget.
var errWaitersFull = errors.New("waiting bodies hold half the budget")

func newByteBudget(size int64) *byteBudget { return &byteBudget{size: size} }

// tryAcquire takes n bytes if they are free and nobody waits before it.
// A nil budget has no limit.
func (b *byteBudget) tryAcquire(n int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters.Len() == 0 && b.used+n <= b.size {
		b.used += n
		return true
	}
	return false
}

// acquire takes n bytes for a caller that holds held bytes already,
// waiting in line until they are free or ctx is done (ctx.Err()). It
// refuses to wait, with errWaitersFull, when the waiters would hold more
// than half the budget. n must fit in the budget; a caller that asks for no
// more than it holds (as a doubling buffer does) is sure to get its turn.
func (b *byteBudget) acquire(ctx context.Context, n, held int64) error {
	if b == nil {
		return nil
	}
	if n > b.size {
		return fmt.Errorf("%d bytes do not fit in a budget of %d", n, b.size)
	}
	if b.tryAcquire(n) {
		return nil
	}
	b.mu.Lock()
	if held > 0 && b.waitHeld+held > b.size/2 {
		b.mu.Unlock()
		return errWaitersFull
	}
	w := &budgetWaiter{n: n, held: held, ready: make(chan struct{})}
	b.waitHeld += held
	e := b.waiters.PushBack(w)
	b.grantLocked() // the bytes may have come free since tryAcquire
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: hand the bytes on
		b.used -= n
	default:
		b.waiters.Remove(e)
		b.waitHeld -= held
	}
	b.grantLocked() // the waiters behind this one may fit now
	return ctx.Err()
}

// release gives back n bytes that acquire or tryAcquire took.
func (b *byteBudget) release(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

func (b *byteBudget) grantLocked() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*budgetWaiter)
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waitHeld -= w.held
		b.waiters.Remove(e)
		close(w.ready)
	}
}

// inUse reports the bytes taken, for the metric and tests.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// waiterCount reports the waiters in line, for tests.
func (b *byteBudget) waiterCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}
