package memrelease

import (
	"context"
	"runtime"
	"testing"
)

func TestPages(t *testing.T) {
	got := Pages()
	if runtime.GOOS == "linux" && got <= 0 {
		t.Errorf("Pages() = %d, want the executable's read-only mappings advised", got)
	}
	// The dropped code faults back in: the test keeps running.
	Startup()
}

func TestAfterSync(t *testing.T) {
	tests := []struct {
		name                      string
		synced, cancel, wantAfter bool
	}{
		{name: "stopped before sync", synced: false, cancel: true, wantAfter: false},
		{name: "synced", synced: true, wantAfter: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			called := false
			err := AfterSync(func() bool { return tc.synced }, func() { called = true })(ctx)
			if err != nil {
				t.Fatalf("AfterSync: %v", err)
			}
			if called != tc.wantAfter {
				t.Errorf("after called = %v, want %v", called, tc.wantAfter)
			}
		})
	}
}
