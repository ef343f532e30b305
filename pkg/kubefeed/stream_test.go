package kubefeed

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// endBookmark is the bookmark that ends a streamed initial list.
func endBookmark(rv string) watch.Event {
	return watch.Event{Type: watch.Bookmark, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv,
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}}
}

// streamed runs evs and the end bookmark through ks's stream, as the API
// server sends a streamed initial list, and returns what the reflector
// would put in its temporary store, for Replace.
func streamed(t *testing.T, ks *keyedStore, evs []watch.Event) []any {
	t.Helper()
	fw := watch.NewFakeWithChanSize(len(evs)+1, false)
	w := ks.stream(fw)
	defer w.Stop()
	for _, ev := range append(evs, endBookmark("9")) {
		fw.Action(ev.Type, ev.Object)
	}
	var list []any
	for ev := range w.ResultChan() {
		if ev.Type == watch.Bookmark {
			return list
		}
		list = append(list, ev.Object)
	}
	t.Fatal("the stream ended before its bookmark")
	return nil
}

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// heldStore is a kind whose store is a set of keys, logging each set and
// delete.
func heldStore(held map[store.Key]bool, log *[]string) kind {
	key := func(obj any) store.Key {
		m := obj.(metav1.Object)
		return store.Key{Namespace: m.GetNamespace(), Name: m.GetName()}
	}
	return kind{name: "pods", example: &corev1.Pod{},
		set: func(obj any) { held[key(obj)] = true; *log = append(*log, "set "+key(obj).Namespace+"/"+key(obj).Name) },
		del: func(obj any) {
			delete(held, key(obj))
			*log = append(*log, "del "+key(obj).Namespace+"/"+key(obj).Name)
		},
		keys: func() iter.Seq[store.Key] { return maps.Keys(held) }}
}

// TestStream: a streamed relist applies each object as it arrives and
// passes a placeholder on; an object deleted in the stream is gone, one
// deleted and added again is kept; the Replace after the end bookmark
// deletes what the store held and the list did not have, and tells the
// relist's start and end. Events after the bookmark pass through.
func TestStream(t *testing.T) {
	var log []string
	held := map[store.Key]bool{{Namespace: "a", Name: "old"}: true, {Namespace: "a", Name: "x"}: true}
	var told []bool
	synced := make(chan struct{})
	close(synced) // a relist
	ks := &keyedStore{kind: heldStore(held, &log), notify: func() {}, synced: synced,
		relists: &relists{tell: func(on bool) { told = append(told, on) }}, placeholder: &corev1.Pod{}}
	fw := watch.NewFakeWithChanSize(16, false)
	w := ks.stream(fw)
	defer w.Stop()
	for _, ev := range []watch.Event{
		{Type: watch.Added, Object: pod("a", "x")},
		{Type: watch.Added, Object: pod("b", "y")},
		{Type: watch.Added, Object: pod("c", "z")},
		{Type: watch.Deleted, Object: pod("b", "y")},
		{Type: watch.Deleted, Object: pod("c", "z")},
		{Type: watch.Added, Object: pod("c", "z")},
		{Type: watch.Modified, Object: pod("a", "x")},
		{Type: watch.Bookmark, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "5"}}}, // not the end
		endBookmark("7"),
		{Type: watch.Added, Object: pod("d", "after")},
	} {
		fw.Action(ev.Type, ev.Object)
	}
	var list []any
	var got []string
	for ev := range w.ResultChan() {
		if ev.Type == watch.Bookmark {
			got = append(got, "bookmark "+ev.Object.(metav1.Object).GetResourceVersion())
			if ev.Object.(metav1.Object).GetResourceVersion() == "7" {
				break
			}
			continue
		}
		if ev.Type != watch.Added || ev.Object != ks.placeholder {
			t.Fatalf("the stream passed on %s %T, want the placeholder added", ev.Type, ev.Object)
		}
		list = append(list, ev.Object)
	}
	if want := []string{"bookmark 5", "bookmark 7"}; !slices.Equal(got, want) {
		t.Errorf("bookmarks %v, want %v", got, want)
	}
	if len(list) != 7 {
		t.Errorf("%d placeholders, want one for each of the 7 object events", len(list))
	}
	if want := []string{"set a/x", "set b/y", "set c/z", "del b/y", "del c/z", "set c/z", "set a/x"}; !slices.Equal(log, want) {
		t.Errorf("the stream applied %v, want %v", log, want)
	}
	if want := []bool{true}; !slices.Equal(told, want) {
		t.Errorf("told %v while streaming, want %v", told, want)
	}
	log = nil
	if err := ks.Replace(list, "7"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"del a/old"}; !slices.Equal(log, want) {
		t.Errorf("Replace applied %v, want %v", log, want)
	}
	if want := map[store.Key]bool{{Namespace: "a", Name: "x"}: true, {Namespace: "c", Name: "z"}: true}; !maps.Equal(held, want) {
		t.Errorf("store holds %v, want %v", held, want)
	}
	if want := []bool{true, false}; !slices.Equal(told, want) {
		t.Errorf("told %v, want %v", told, want)
	}
	ev := <-w.ResultChan()
	if ev.Type != watch.Added || ev.Object.(metav1.Object).GetName() != "after" {
		t.Errorf("after the bookmark: %s %v, want the object itself", ev.Type, ev.Object)
	}
	if want := []string{"del a/old"}; !slices.Equal(log, want) {
		t.Errorf("the stream applied %v after its end; the reflector applies those", log)
	}
}

// TestStreamRetried: when the reflector tries a stream again, what the
// failed one had listed does not count, and its events still queued are
// not applied: the Replace after the second deletes an object only the
// first had.
func TestStreamRetried(t *testing.T) {
	var log []string
	held := map[store.Key]bool{}
	ks := &keyedStore{kind: heldStore(held, &log), notify: func() {}, synced: make(chan struct{}), placeholder: &corev1.Pod{}}
	first := watch.NewFakeWithChanSize(4, false)
	w1 := ks.stream(first)
	first.Add(pod("a", "gone"))
	if ev := <-w1.ResultChan(); ev.Object != ks.placeholder {
		t.Fatalf("first stream passed on %v", ev.Object)
	}
	first.Add(pod("a", "late")) // queued when the stream fails
	w1.Stop()
	list := streamed(t, ks, []watch.Event{{Type: watch.Added, Object: pod("a", "kept")}})
	log = nil
	if err := ks.Replace(list, "9"); err != nil {
		t.Fatal(err)
	}
	if want := map[store.Key]bool{{Namespace: "a", Name: "kept"}: true}; !maps.Equal(held, want) {
		t.Errorf("store holds %v, want %v (log %v)", held, want, log)
	}
	if !testkit.Closed(ks.synced) {
		t.Error("not synced after the Replace")
	}
}

// TestRelayStop: a relayed watch's goroutine ends on Stop with an event
// waiting that no one reads, and ends its channel when the watch it relays
// ends.
func TestRelayStop(t *testing.T) {
	fw := watch.NewFakeWithChanSize(1, false)
	w := relay(fw, func(ev watch.Event) watch.Event { return ev })
	fw.Add(pod("a", "x"))
	w.Stop()
	w.Stop()                   // twice is fine
	for range w.ResultChan() { // closed, at most the one event first
	}
	if !fw.IsStopped() {
		t.Error("the relayed watch was not stopped")
	}
	fw2 := watch.NewFake()
	w2 := relay(fw2, func(ev watch.Event) watch.Event { return ev })
	fw2.Stop()
	if _, ok := <-w2.ResultChan(); ok {
		t.Error("an event after the relayed watch ended")
	}
}

// TestListing: the listing has what was added and not dropped after, for
// thousands of keys, namespaced or not.
func TestListing(t *testing.T) {
	l := newListing()
	for i := range 5000 {
		l.add(fmt.Sprint("ns", i%7), fmt.Sprint("obj-", i))
	}
	l.add("", "node-1")
	l.drop("ns1", "obj-1")
	l.drop("ns2", "obj-2")
	l.add("ns2", "obj-2") // added again after its delete
	for i := range 5000 {
		want := i != 1
		if got := l.has(fmt.Sprint("ns", i%7), fmt.Sprint("obj-", i)); got != want {
			t.Errorf("has(obj-%d) = %v, want %v", i, got, want)
		}
		if l.has(fmt.Sprint("ns", (i+1)%7), fmt.Sprint("obj-", i)) {
			t.Errorf("has obj-%d in the wrong namespace", i)
		}
	}
	if !l.has("", "node-1") || l.has("", "node-2") || l.has("node-1", "") {
		t.Error("cluster-scoped keys")
	}
	l.add("new", "late") // after a lookup sorted the hashes
	if !l.has("new", "late") {
		t.Error("a key added after a lookup is not listed")
	}
}
