package testkit

import (
	"fmt"
	"sync"
	"testing"
)

func TestParallel(t *testing.T) {
	// All n run at once: each waits until every one has started.
	const n = 8
	var started sync.WaitGroup
	started.Add(n)
	f := &errorTB{TB: t}
	Parallel(f, n, func(i int) error {
		started.Done()
		started.Wait()
		if i%3 == 0 {
			return fmt.Errorf("call %d", i)
		}
		return nil
	})
	if want := []string{"call 0", "call 3", "call 6"}; fmt.Sprint(f.errs) != fmt.Sprint(want) {
		t.Errorf("errors %q, want %q", f.errs, want)
	}
}
