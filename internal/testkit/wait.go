package testkit

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// WaitFor polls cond until it returns nil and fails t with cond's last
// error when timeout passes first. It polls at once, then every 1 ms,
// backing off to every 50 ms. cond runs on t's goroutine, so it may call
// t.Fatal itself (for a state that can never come right).
func WaitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	wait(t, timeout, 0, cond)
}

// WaitEvery is WaitFor polling every interval, for a test that times how
// long cond took to hold.
func WaitEvery(t testing.TB, timeout, every time.Duration, cond func() error) {
	t.Helper()
	wait(t, timeout, every, cond)
}

// wait polls every fixed interval, or backing off from 1 ms to 50 ms when
// fixed is 0.
func wait(t testing.TB, timeout, fixed time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	every := time.Millisecond
	if fixed > 0 {
		every = fixed
	}
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %v", timeout, err)
		}
		<-time.After(every)
		if fixed == 0 {
			every = min(2*every, 50*time.Millisecond)
		}
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

// Holds polls cond for d, as WaitFor does, and fails t at its first error:
// for a test that something does not happen.
func Holds(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	every := time.Millisecond
	for {
		if err := cond(); err != nil {
			t.Fatalf("within %v: %v", d, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		<-time.After(min(every, left))
		every = min(2*every, 50*time.Millisecond)
	}
}

// Poll calls cond every interval, the first time one interval from now,
// until it returns true or timeout passes, and reports whether it did: for
// a wait that may end unmet without failing, such as counters settling.
func Poll(timeout, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		<-time.After(every)
		if cond() {
			return true
		}
	}
	return false
}

// WantSubstrings fails t for each of subs that s (named what) lacks.
func WantSubstrings(t testing.TB, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}

// WantErr checks err against want. With want "", err must be nil (t fails
// at once otherwise) and WantErr is true: the test goes on. Otherwise err
// must contain want (t fails at once otherwise) and WantErr is false.
func WantErr(t testing.TB, err error, want string) bool {
	t.Helper()
	return wantErr(t, err, want, strings.Contains, "containing")
}

// WantErrPrefix is WantErr for an error that must start with want.
func WantErrPrefix(t testing.TB, err error, want string) bool {
	t.Helper()
	return wantErr(t, err, want, strings.HasPrefix, "starting with")
}

func wantErr(t testing.TB, err error, want string, match func(s, sub string) bool, how string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return true
	}
	if err == nil || !match(err.Error(), want) {
		t.Fatalf("error %v, want one %s %q", err, how, want)
	}
	return false
}

// Closed reports whether done is closed, without waiting.
func Closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
