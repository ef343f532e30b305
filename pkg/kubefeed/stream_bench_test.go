package kubefeed

import (
	"fmt"
	"iter"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// BenchmarkStreamedListHeld streams 150,000 Pods, named as in test/bench
// TestScale, into what client-go's reflector keeps until the list's end:
// its temporary store (cache.NewStore with the key function it uses) and,
// for "stream", the listing the stream hands over. It reports the live
// heap they hold per Pod (B-held/pod). "keys-in-temporary-store" is the
// way before d1bb613, a transform that stored the object and left its key
// (cache.ExplicitKey), for the comparison.
func BenchmarkStreamedListHeld(b *testing.B) {
	const n = 150000
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("scale-%d", i%300),
			Name: fmt.Sprintf("pod-%06d-%05d", i/30, i%30)}}
	}
	noop := kind{name: "pods", example: &corev1.Pod{}, set: func(any) {}, del: func(any) {},
		keys: func() iter.Seq[store.Key] { return func(func(store.Key) bool) {} }}
	for _, c := range []struct {
		name string
		fill func(b *testing.B) any // what stays live until the Replace
	}{
		{"stream", func(b *testing.B) any {
			ks := &keyedStore{kind: noop, notify: func() {}, synced: make(chan struct{}), placeholder: noop.example.DeepCopyObject()}
			fw := watch.NewFakeWithChanSize(64, false)
			w := ks.stream(fw)
			defer w.Stop()
			go func() {
				for _, p := range pods {
					fw.Add(p)
				}
				fw.Action(watch.Bookmark, endBookmark("1").Object)
			}()
			tmp := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
			for ev := range w.ResultChan() {
				if ev.Type == watch.Bookmark {
					break
				}
				if err := tmp.Add(ev.Object); err != nil {
					b.Fatal(err)
				}
			}
			ks.mu.Lock()
			defer ks.mu.Unlock()
			return []any{tmp, ks.listed}
		}},
		{"keys-in-temporary-store", func(b *testing.B) any {
			tmp := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.WithTransformer(func(obj any) (any, error) {
				p := obj.(*corev1.Pod)
				return cache.ExplicitKey(cache.NewObjectName(p.Namespace, p.Name).String()), nil
			}))
			for _, p := range pods {
				if err := tmp.Add(p); err != nil {
					b.Fatal(err)
				}
			}
			return tmp
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var held float64
			for b.Loop() {
				before := testkit.LiveHeap()
				kept := c.fill(b)
				held = float64(testkit.LiveHeap()) - float64(before)
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(held/n, "B-held/pod")
			b.ReportMetric(held/(1<<20), "MiB-held")
		})
	}
}
