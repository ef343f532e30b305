package testkit

import (
	"sync"
	"testing"
)

// Parallel calls f(0) … f(n-1) at once, each on its own goroutine, waits
// for them all and fails t with every error one returned.
func Parallel(t testing.TB, n int, f func(i int) error) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("%v", err)
		}
	}
}
