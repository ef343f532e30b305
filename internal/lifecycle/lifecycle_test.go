package lifecycle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		// fail is the index of the task that fails at once (-1: none; the
		// test cancels the context instead).
		fail int
		// early is the index of a task that returns nil at once (-1: none).
		early   int
		n       int
		wantErr error
		// wantStopped is the order the blocking tasks saw their context end.
		wantStopped []int
	}{
		{name: "cancel stops the last task first", fail: -1, early: -1, n: 3, wantStopped: []int{2, 1, 0}},
		{name: "a failure stops the others in reverse order", fail: 1, early: -1, n: 4, wantErr: errBoom, wantStopped: []int{3, 2, 0}},
		{name: "a task that ends early stops nothing", fail: -1, early: 0, n: 3, wantStopped: []int{2, 1}},
		{name: "no tasks", fail: -1, early: -1, n: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu      sync.Mutex
				stopped []int
				started sync.WaitGroup
			)
			tasks := make([]Task, tc.n)
			for i := range tasks {
				if i != tc.fail && i != tc.early {
					started.Add(1)
				}
				tasks[i] = func(ctx context.Context) error {
					switch i {
					case tc.fail:
						started.Wait()
						return errBoom
					case tc.early:
						return nil
					}
					started.Done()
					<-ctx.Done()
					mu.Lock()
					stopped = append(stopped, i)
					mu.Unlock()
					// An error after cancellation is the task's shutdown,
					// not a failure.
					return errors.New("shutdown error")
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- Run(ctx, tasks...) }()
			if tc.fail < 0 {
				started.Wait()
				cancel()
			}
			if err := <-done; !errors.Is(err, tc.wantErr) {
				t.Fatalf("Run = %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(stopped, tc.wantStopped) {
				t.Errorf("stopped %v, want %v", stopped, tc.wantStopped)
			}
		})
	}
}

// TestBounded: a stuck run is left behind once ctx is done and the
// limit has passed; one that stops returns its own result.
func TestBounded(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	stuck := make(chan struct{})
	defer close(stuck)
	got := make(chan error, 1)
	go func() { got <- Bounded(ctx, 50*time.Millisecond, log, func() error { <-stuck; return nil }) }()
	select {
	case err := <-got:
		t.Fatalf("returned %v before ctx was done", err)
	default:
	}
	cancel()
	if err := <-got; err == nil || !strings.Contains(err.Error(), "did not complete within 50ms") {
		t.Errorf("stuck component: %v", err)
	}
	// A component that stops returns its own result.
	if err := Bounded(context.Background(), time.Hour, log, func() error { return io.EOF }); err != io.EOF {
		t.Errorf("Bounded = %v, want io.EOF", err)
	}
}
