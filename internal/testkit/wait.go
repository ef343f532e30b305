package testkit

import (
	"fmt"
	"testing"
	"time"
)

// WaitFor polls cond until it returns nil and fails t with cond's last
// error when timeout passes first. It polls at once, then every 1 ms,
// backing off to every 50 ms. cond runs on t's goroutine, so it may call
// t.Fatal itself (for a state that can never come right).
func WaitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	every := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %v", timeout, err)
		}
		timer := time.NewTimer(every)
		select {
		case <-timer.C:
		case <-t.Context().Done():
			timer.Stop()
			t.Fatalf("test ended while waiting: %v", err)
		}
		every = min(2*every, 50*time.Millisecond)
	}
}

// WaitEqual is WaitFor for one value: it waits for get to return want, and
// the failure names what with the last value got.
func WaitEqual[T comparable](t testing.TB, timeout time.Duration, what string, get func() T, want T) {
	t.Helper()
	WaitFor(t, timeout, func() error {
		if got := get(); got != want {
			return fmt.Errorf("%s = %v, want %v", what, got, want)
		}
		return nil
	})
}
