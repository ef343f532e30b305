package testkit

import (
	"bytes"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for concurrent use, such as a process's
// stderr read while it runs.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// WaitMatch waits for re to match what was written and returns the
// match and its groups. It fails t after timeout, or at once when exited
// (the writing process's end; nil for none) is closed first.
func (b *Buffer) WaitMatch(t testing.TB, timeout time.Duration, re *regexp.Regexp, exited <-chan struct{}) []string {
	t.Helper()
	var m []string
	WaitFor(t, timeout, func() error {
		if m = re.FindStringSubmatch(b.String()); m != nil {
			return nil
		}
		select {
		case <-exited:
			t.Fatalf("exited before its output matched %q:\n%s", re, b.String())
		default:
		}
		return fmt.Errorf("no %q in the output:\n%s", re, b.String())
	})
	return m
}
