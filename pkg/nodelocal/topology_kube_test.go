package nodelocal

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// TestWatchFailedJitter: after a failed watch the stage waits a random
// time within watchJitter before the reflector lists again, spread over
// the whole bound, and no longer than its context.
func TestWatchFailedJitter(t *testing.T) {
	r := cache.NewReflector(&cache.ListWatch{}, &discoveryv1.EndpointSlice{}, cache.NewStore(cache.MetaNamespaceKeyFunc), 0)
	w := &zoneWatch{jitter: time.Hour, log: slog.New(slog.DiscardHandler)}
	lo, hi := w.jitter, time.Duration(0)
	for range 1000 {
		d := w.relistWait()
		if d < 0 || d >= w.jitter {
			t.Fatalf("wait %v, want within [0, %v)", d, w.jitter)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo > w.jitter/10 || hi < w.jitter*9/10 {
		t.Errorf("1000 waits within [%v, %v]: not spread over [0, %v)", lo, hi, w.jitter)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.watchFailed(ctx, r, errors.New("watch of endpointslices: connection refused"))
	}()
	cancel()
	testkit.WaitEqual(t, 10*time.Second, "watchFailed returned after its context ended", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}, true)
}
