package nodelocal

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRelistJitter: once the first listing is done, a list and a watch
// that starts with the current objects (a watch-list stream) wait up to
// watchJitter first (here until their context ends); the first listing,
// a resumed watch and a stage without jitter do not wait.
func TestRelistJitter(t *testing.T) {
	client := fake.NewClientset(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "up-1", Namespace: "kube-system",
		Labels: map[string]string{discoveryv1.LabelServiceName: "up"}}, AddressType: discoveryv1.AddressTypeIPv4})
	streamed := true
	for _, tc := range []struct {
		name     string
		jitter   time.Duration
		relist   bool
		opts     metav1.ListOptions
		waits    bool // the list and the watch
		watchToo bool // the watch waits as the list does
	}{
		{"the first listing", time.Hour, false, metav1.ListOptions{SendInitialEvents: &streamed}, false, true},
		{"a relist", time.Hour, true, metav1.ListOptions{SendInitialEvents: &streamed}, true, true},
		{"a resumed watch", time.Hour, true, metav1.ListOptions{ResourceVersion: "7"}, true, false},
		{"no jitter", 0, true, metav1.ListOptions{SendInitialEvents: &streamed}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &zoneWatch{client: client, namespace: "kube-system", service: "up", jitter: tc.jitter, log: slog.New(slog.DiscardHandler)}
			lw := w.listWatch(func() bool { return tc.relist })
			// A context that has ended: a wait returns its error at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			list, err := lw.ListWithContextFunc(ctx, metav1.ListOptions{})
			if got := errors.Is(err, context.Canceled); got != tc.waits {
				t.Errorf("list: waited %v (err %v), want %v", got, err, tc.waits)
			}
			if err == nil {
				if sl := list.(*discoveryv1.EndpointSliceList); len(sl.Items) != 1 {
					t.Errorf("list: %d slices, want the upstream Service's 1", len(sl.Items))
				}
			}
			wi, err := lw.WatchFuncWithContext(ctx, tc.opts)
			if got, want := errors.Is(err, context.Canceled), tc.waits && tc.watchToo; got != want {
				t.Errorf("watch %+v: waited %v (err %v), want %v", tc.opts, got, err, want)
			}
			if wi != nil {
				wi.Stop()
			}
		})
	}
	w := &zoneWatch{jitter: 10 * time.Millisecond, log: slog.New(slog.DiscardHandler)}
	if err := w.relistWait(context.Background()); err != nil {
		t.Errorf("a wait of at most 10ms: %v", err)
	}
}
