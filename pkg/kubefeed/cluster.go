package kubefeed

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/internal/kubewire"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// Cluster feeds the store from client-go reflectors on Services,
// EndpointSlices (unless NoEndpoints), Namespaces and, when Pods is set,
// Pods and Nodes (a client's place by its source address: the pod's node
// and the node's topology zone label; a Node keeps nothing else). There is no informer cache: each event is converted to the store's
// slim record at once, and a relist asks the store which keys it holds,
// so the store's records are the only copy of the cluster. The store is
// published after the first full sync and then right after each change
// (changes that arrive while a publish runs go into the next one). An
// object that does not convert is removed from the store and reported
// through Skips.
type Cluster struct {
	Client      kubernetes.Interface
	Store       Publisher
	Logger      *slog.Logger
	Pods        bool
	NoEndpoints bool
	// EndpointPodNames keeps the endpoints' pod names (targetRef.name),
	// which only the option of that name reads.
	EndpointPodNames bool
	// Skips reports the objects that do not convert (default: logged
	// with Logger, counted on no registry, no Events). Share one across
	// the feeds of a server so that each problem is reported once.
	Skips *Skips
	// Relisting, when set, is told when a relist after the first sync
	// starts streaming (true: the first kind's) and when it is whole
	// (false: the last kind's), so that serve can bound the heap the
	// relist's garbage takes (gctarget.RelistBound).
	Relisting func(on bool)
}

// Run starts the reflectors, publishes after the first sync and keeps the
// store current until ctx is done. It returns ctx's error if ctx ends before
// the first sync, nil on a later cancel.
func (c *Cluster) Run(ctx context.Context) error {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	skips := c.Skips
	if skips == nil {
		skips = unregisteredSkips(log)
	}
	kinds, err := c.kinds(sink{ctx: ctx, store: c.Store, skips: skips})
	if err != nil {
		return err
	}
	return runKinds(ctx, c.Client, c.Store, log, "kubernetes records synced", c.Relisting, kinds)
}

// retryBackoff is how a reflector of the cluster DNS waits before it
// lists and watches again after a failure (an API server restart): from
// 0.5 s, doubling to 2 s, each wait up to twice as long at random (client-go's
// jitter 1.0). A cluster DNS has a few replicas, not a node's count, so it
// tries again within 4 s of the API server's return, where client-go's
// default (0.8 s doubling to 30 s) left a change made during an outage
// unanswered for up to a minute (test/bench TestScale). The node-local
// stages, one a node, keep client-go's default, and wait up to
// nodeLocal.watchJitter at random on top, so that they come back spread.
func retryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 3, Cap: 2 * time.Second}
}

// runKinds runs a reflector for each of kinds into st, publishes st after
// the first sync (logging synced) and then after each change, until ctx
// is done. It returns ctx's error if ctx ends before the first sync, nil
// on a later cancel.
func runKinds(ctx context.Context, client kubernetes.Interface, st Publisher, log *slog.Logger, synced string, relisting func(bool), kinds []kind) error {
	rl := &relists{tell: relisting}
	defer rl.stop()
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred below): the reflectors have stopped when Run returns
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var first []<-chan struct{}
	for _, k := range kinds {
		ks := &keyedStore{kind: k, notify: notify, synced: make(chan struct{}), relists: rl, placeholder: k.example.DeepCopyObject()}
		lw := listWatch(k.lw.ListWithContextFunc, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := k.lw.WatchFuncWithContext(ctx, o)
			if err != nil || o.SendInitialEvents == nil || !*o.SendInitialEvents {
				return w, err
			}
			return ks.stream(w), nil
		})
		r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), k.example, ks,
			cache.ReflectorOptions{Name: k.name, Backoff: retryBackoff()})
		first = append(first, ks.synced)
		wg.Go(func() { r.RunWithContext(ctx) })
	}
	// Wait on each kind's first list itself: cache.WaitForCacheSync polls
	// every 100 ms, which would add 50 ms to a start on average.
	for _, ch := range first {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for sync: %w", ctx.Err())
		}
	}
	// Drain the notifications of the initial lists: the publish covers them.
	select {
	case <-changed:
	default:
	}
	st.Publish()
	log.InfoContext(ctx, synced)
	publishChanges(ctx, st, changed)
	return nil
}

// publishChanges publishes the store when changed fires, until ctx is done.
// A publish costs what changed (see store.Store.Publish), so there is no
// window: the changes that arrive while one runs are covered by the next,
// which starts as soon as it ends (changed holds one pending signal).
func publishChanges(ctx context.Context, st Publisher, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			st.Publish()
		}
	}
}

// kind is one resource a reflector follows: how to list and watch it, and
// what an event does to the store.
type kind struct {
	name     string
	example  runtime.Object
	lw       *cache.ListWatch
	set, del func(obj any)
	keys     func() iter.Seq[store.Key] // what the store holds of the kind (the loop must not call the store)
	// relisted, when set, learns which keys a full list has.
	relisted func(listed func(store.Key) bool)
}

// objectKind is a kind of object the feed converts: its label (KindService,
// ...) and what an Event's reference to one says.
type objectKind struct{ label, kind, apiVersion string }

var (
	serviceKind       = objectKind{KindService, "Service", "v1"}
	endpointSliceKind = objectKind{KindEndpointSlice, "EndpointSlice", "discovery.k8s.io/v1"}
	podKind           = objectKind{KindPod, "Pod", "v1"}
	nodeKind          = objectKind{KindNode, "Node", "v1"}
)

// kinds lists the resources Run follows, each applying its events to the
// store through s. Their clients decode Pods and Nodes to what the
// converters read, and watch events in place (kubewire).
func (c *Cluster) kinds(s sink) ([]kind, error) {
	core, err := kubewire.CoreV1(c.Client)
	if err != nil {
		return nil, err
	}
	disc, err := kubewire.DiscoveryV1(c.Client)
	if err != nil {
		return nil, err
	}
	setService := setter(s, serviceKind, keepAll(ToService), s.store.SetService, s.store.DeleteService)
	ks := []kind{{
		name: "services", example: &corev1.Service{},
		set: setService, del: s.deleter(serviceKind, s.store.DeleteService),
		keys: s.keys(store.KindService), relisted: s.relisted(serviceKind),
		lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Services("").List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.Services("").Watch(ctx, o)
		}),
	}}
	if !c.NoEndpoints {
		set := setter(s, endpointSliceKind, keepAll(slimSlice(c.EndpointPodNames)), s.store.SetEndpointSlice, s.store.DeleteEndpointSlice)
		ks = append(ks, kind{
			name: "endpointslices", example: &discoveryv1.EndpointSlice{}, set: set,
			del: s.deleter(endpointSliceKind, s.store.DeleteEndpointSlice), keys: s.keys(store.KindEndpointSlice),
			relisted: s.relisted(endpointSliceKind),
			lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return disc.EndpointSlices("").List(ctx, o)
			}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return disc.EndpointSlices("").Watch(ctx, o)
			}),
		})
	}
	ks = append(ks, kind{
		name: "namespaces", example: &corev1.Namespace{}, set: s.setNamespace, del: s.deleteNamespace,
		keys: s.keys(store.KindNamespace),
		lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Namespaces().List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.Namespaces().Watch(ctx, o)
		}),
	})
	if c.Pods {
		set := setter(s, podKind, ToPod, s.store.SetPod, s.store.DeletePod)
		ks = append(ks, kind{
			name: "pods", example: &corev1.Pod{}, set: set, del: s.deleter(podKind, s.store.DeletePod),
			keys: s.keys(store.KindPod), relisted: s.relisted(podKind),
			lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Pods("").List(ctx, o)
			}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Pods("").Watch(ctx, o)
			}),
		})
		set = setter(s, nodeKind, keepAll(ToNode), s.store.SetNodeTopology, s.deleteNode)
		ks = append(ks, kind{
			name: "nodes", example: &corev1.Node{}, set: set, del: s.deleter(nodeKind, s.deleteNode),
			keys: s.keys(store.KindNode), relisted: s.relisted(nodeKind),
			lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Nodes().List(ctx, o)
			}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Nodes().Watch(ctx, o)
			}),
		})
	}
	return ks, nil
}

func listWatch(list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}
}

// keyedStore is a reflector's store that holds no objects: it applies each
// event through its kind's set and del, then notifies. A relist (Replace)
// deletes what the store holds and the list no longer has. A reflector
// calls it from one goroutine, and its streamed lists' watches from one
// more each (stream); synced may be waited on from any.
type keyedStore struct {
	kind   kind
	notify func()
	synced chan struct{} // closed by the first Replace
	// relists counts the kinds relisting; relisting is set from this
	// kind's first streamed object after its first sync to its Replace.
	relists *relists
	// placeholder is what the reflector gets for each object a stream
	// applied (stream): an empty object of the kind's type, which the
	// reflector expects.
	placeholder runtime.Object

	mu        sync.Mutex // the fields below
	relisting bool
	attempt   int      // the streamed lists started (stream)
	listed    *listing // the last streamed list's, once whole, for its Replace
}

// relists counts the kinds whose relist streams, and tells when the first
// starts and the last ends (Cluster.Relisting).
type relists struct {
	mu   sync.Mutex
	n    int
	tell func(on bool)
}

func (r *relists) add(d int) {
	if r.tell == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.n
	r.n += d
	if (was == 0) != (r.n == 0) {
		r.tell(r.n > 0)
	}
}

// stop ends the relists still streaming when the reflectors stop.
func (r *relists) stop() {
	if r.tell == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n > 0 {
		r.n = 0
		r.tell(false)
	}
}

func (k *keyedStore) Add(obj any) error    { return k.Update(obj) }
func (k *keyedStore) Update(obj any) error { return k.apply(obj, true) }
func (k *keyedStore) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	return k.apply(obj, false)
}

// Resync has nothing to resend: the store holds the records.
func (k *keyedStore) Resync() error { return nil }

func (k *keyedStore) isSynced() bool {
	select {
	case <-k.synced:
		return true
	default:
		return false
	}
}

func (k *keyedStore) apply(obj any, set bool) error {
	if _, err := meta.Accessor(obj); err != nil { // not an object: the key's check, without the key
		return fmt.Errorf("%s: %w", k.kind.name, err)
	}
	if set {
		k.kind.set(obj)
	} else {
		k.kind.del(obj)
	}
	k.notify()
	return nil
}

// Replace applies a full list: every object in it, then a delete for each
// object the store holds that the list no longer has; the skipped objects
// the list no longer has are forgotten. A streamed list was applied as it
// arrived: its list is placeholders, and its keys are the listing its
// stream handed over. A relist of 150,000 Pods makes no map of them
// (issue 71).
func (k *keyedStore) Replace(list []any, _ string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.listed
	k.listed = nil
	if l == nil {
		l = newListing()
	}
	var errs []error
	for _, obj := range list {
		if obj == any(k.placeholder) {
			continue
		}
		m, err := meta.Accessor(obj)
		if err == nil && m.GetName() == "" {
			err = errors.New("object has no name")
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k.kind.set(obj)
		l.add(m.GetNamespace(), m.GetName())
	}
	var gone []store.Key
	for key := range k.kind.keys() {
		if !l.has(key.Namespace, key.Name) {
			gone = append(gone, key)
		}
	}
	for _, key := range gone {
		k.kind.del(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	}
	if k.kind.relisted != nil {
		k.kind.relisted(func(key store.Key) bool { return l.has(key.Namespace, key.Name) })
	}
	if k.isSynced() {
		if k.relisting {
			k.relisting = false
			k.relists.add(-1)
		}
	} else {
		close(k.synced)
	}
	k.notify()
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", k.kind.name, errors.Join(errs...))
	}
	return nil
}

// stream wraps the watch of a streamed initial list (the reflector asks
// for one with sendInitialEvents): until the initial-events-end bookmark,
// each object event is applied to the store here and passed on as the
// kind's placeholder, and the bookmark hands the list's listing to the
// Replace it triggers. Later events pass through. A newer stream (the
// reflector's next try after a failed one) ends what an older one
// applies.
func (k *keyedStore) stream(w watch.Interface) watch.Interface {
	k.mu.Lock()
	k.attempt++
	attempt := k.attempt
	k.listed = nil
	k.mu.Unlock()
	l := newListing()
	ended := false
	return relay(w, func(ev watch.Event) watch.Event {
		if ended {
			return ev
		}
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
		case watch.Bookmark:
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				ended = true
				k.mu.Lock()
				if k.attempt == attempt {
					k.listed = l
				}
				k.mu.Unlock()
			}
			return ev
		default:
			return ev // an error: the reflector reports it and tries again
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return ev // the reflector reports it
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.attempt != attempt {
			return watch.Event{Type: watch.Added, Object: k.placeholder}
		}
		if !k.relisting && k.isSynced() {
			k.relisting = true
			k.relists.add(1)
		}
		if ev.Type == watch.Deleted {
			k.kind.del(ev.Object)
			l.drop(m.GetNamespace(), m.GetName())
		} else {
			k.kind.set(ev.Object)
			l.add(m.GetNamespace(), m.GetName())
		}
		return watch.Event{Type: watch.Added, Object: k.placeholder}
	})
}

// sink applies watch events to the store: objects are converted to slim
// records, and one that does not convert is removed and reported through
// skips. ctx is Run's, for the log records only.
type sink struct {
	ctx   context.Context
	store Publisher
	skips *Skips
}

// setter returns the handler that stores what conv keeps of a T and
// removes a T it does not keep (a pod that ToPod drops, say). A T that
// does not convert is removed and reported (once per problem) as an
// object of k.
func setter[T metav1.Object, R any](s sink, k objectKind, conv func(T) (R, bool, error), set func(R), del func(ns, name string)) func(obj any) {
	apply := func(ns, name string, rec R, keep bool, err error) {
		ns = defaultNamespace(ns)
		if err != nil {
			s.skips.object(s.ctx, k, err)
			del(ns, name)
			return
		}
		s.skips.served(k.label, ns, name)
		if !keep {
			del(ns, name)
			return
		}
		set(rec)
	}
	setFn := func(obj any) {
		if v, ok := obj.(T); ok { // a stored one is in the store already
			rec, keep, err := conv(v)
			apply(v.GetNamespace(), v.GetName(), rec, keep, err)
		}
	}
	return setFn
}

// slimSlice is ToEndpointSlice, without the endpoints' pod names unless
// podNames: at 150,000 endpoints they cost 5 MB (issue 71). A reload that
// turns endpointPodNames on watches again (watchOf).
func slimSlice(podNames bool) func(*discoveryv1.EndpointSlice) (store.EndpointSlice, error) {
	if podNames {
		return ToEndpointSlice
	}
	return func(s *discoveryv1.EndpointSlice) (store.EndpointSlice, error) {
		v, err := ToEndpointSlice(s)
		for i := range v.Endpoints {
			v.Endpoints[i].PodName = ""
		}
		return v, err
	}
}

// keepAll adapts a converter that keeps every object that converts.
func keepAll[T, R any](conv func(T) (R, error)) func(T) (R, bool, error) {
	return func(v T) (R, bool, error) {
		rec, err := conv(v)
		return rec, true, err
	}
}

// deleter returns the handler that removes an object of k by namespace
// and name, and forgets its problem.
func (s sink) deleter(k objectKind, del func(ns, name string)) func(obj any) {
	return func(obj any) {
		var ns, name string
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		ns, name = namespaceOf(m), m.GetName()
		del(ns, name)
		s.skips.served(k.label, ns, name)
	}
}

// relisted returns what forgets the problems of the objects of k that a
// full list no longer has.
func (s sink) relisted(k objectKind) func(func(store.Key) bool) {
	return func(listed func(store.Key) bool) { s.skips.relisted(k.label, listed) }
}

// keys returns what the store holds of kind k.
func (s sink) keys(k store.ObjectKind) func() iter.Seq[store.Key] {
	return func() iter.Seq[store.Key] { return s.store.Keys(k) }
}

func (s sink) setNamespace(obj any) {
	if m, ok := obj.(metav1.Object); ok {
		s.store.SetNamespace(storeNamespace(m.GetName()))
	}
}

func (s sink) deleteNamespace(obj any) {
	if m, ok := obj.(metav1.Object); ok {
		s.store.DeleteNamespace(m.GetName())
	}
}

func storeNamespace(name string) store.Namespace { return store.Namespace{Name: name} }

// deleteNode removes a Node; the setter's namespace ("default" for a
// cluster-scoped object) does not name it.
func (s sink) deleteNode(_, name string) { s.store.DeleteNodeTopology(name) }
