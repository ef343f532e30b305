package testkit

import (
	"context"
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	// f returning false ends it.
	n := 0
	Every(context.Background(), time.Millisecond, func() bool { n++; return n < 3 })
	if n != 3 {
		t.Errorf("f ran %d times, want 3", n)
	}
	// The context ending ends it, without another call.
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	Every(ctx, time.Millisecond, func() bool { calls++; cancel(); return true })
	if calls != 1 {
		t.Errorf("f ran %d times after cancel, want 1", calls)
	}
}
