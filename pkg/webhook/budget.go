package webhook

import (
	"container/list"
	"context"
	"sync"
)

// byteBudget bounds the request body bytes being read and decoded at once:
// a weighted semaphore whose waiters are served in arrival order, so a
// large body is not starved by a stream of small ones.
type byteBudget struct {
	size int64

	mu      sync.Mutex
	used    int64
	waiters list.List // of *budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes are granted
}

func newByteBudget(size int64) *byteBudget { return &byteBudget{size: size} }

// weight is what a request of n bytes takes from the budget: a body larger
// than the whole budget takes all of it, so it runs alone rather than never.
func (b *byteBudget) weight(n int64) int64 { return min(max(n, 1), b.size) }

// acquire takes n bytes (weight) from the budget, waiting in line until they
// are free or ctx is done (ctx.Err()). A nil budget has no limit.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	if b == nil {
		return nil
	}
	n = b.weight(n)
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
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
	}
	b.grantLocked() // the waiters behind this one may fit now
	return ctx.Err()
}

// release returns what acquire(n) took.
func (b *byteBudget) release(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used -= b.weight(n)
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
