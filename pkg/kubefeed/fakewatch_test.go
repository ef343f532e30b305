package kubefeed

import (
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// fakeClient is what watchOpened needs of a generated fake clientset.
type fakeClient interface {
	PrependWatchReactor(resource string, reaction k8stesting.WatchReactionFunc)
	Tracker() k8stesting.ObjectTracker
}

// watchOpened makes c's watches of resource open on its tracker, as the
// fakes' own reactor does, and returns a wait that returns once one is
// open. The fake keeps no history: a delete made between a feed's list
// and its watch never reaches the feed, so a test waits before it deletes.
func watchOpened(c fakeClient, resource string) func(t *testing.T) {
	opened := make(chan struct{})
	var once sync.Once
	c.PrependWatchReactor(resource, func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts []metav1.ListOptions
		if w, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = append(opts, w.ListOptions)
		}
		w, err := c.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts...)
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(opened) })
		return true, w, nil
	})
	return func(t *testing.T) {
		t.Helper()
		select {
		case <-opened:
		case <-time.After(10 * time.Second):
			t.Fatalf("no watch of %s opened in 10s", resource)
		}
	}
}
