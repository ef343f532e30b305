package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
)

// Cluster feeds the store from client-go reflectors on Services,
// EndpointSlices (unless NoEndpoints), Namespaces and, when Pods is set,
// Pods. There is no informer cache: each event is converted to the store's
// slim record at once, and a relist asks the store which keys it holds,
// so the store's records are the only copy of the cluster. The store is
// published after the first full sync and then right after each change
// (changes that arrive while a publish runs go into the next one).
type Cluster struct {
	Client      kubernetes.Interface
	Store       Publisher
	Logger      *slog.Logger
	Pods        bool
	NoEndpoints bool
}

// Run starts the reflectors, publishes after the first sync and keeps the
// store current until ctx is done. It returns ctx's error if ctx ends before
// the first sync, nil on a later cancel.
func (c *Cluster) Run(ctx context.Context) error {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
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
	var synced []cache.InformerSynced
	for _, k := range c.kinds(sink{ctx: ctx, log: log, store: c.Store}) {
		ks := &keyedStore{kind: k, notify: notify, synced: make(chan struct{})}
		r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(k.lw, c.Client), k.example, ks,
			cache.ReflectorOptions{Name: k.name})
		synced = append(synced, ks.hasSynced)
		wg.Go(func() { r.RunWithContext(ctx) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("wait for sync: %w", ctx.Err())
	}
	// Drain the notifications of the initial lists: the publish covers them.
	select {
	case <-changed:
	default:
	}
	c.Store.Publish()
	log.InfoContext(ctx, "kubernetes records synced")
	c.publishChanges(ctx, changed)
	return nil
}

// publishChanges publishes the store when changed fires, until ctx is done.
// A publish costs what changed (see store.Store.Publish), so there is no
// window: the changes that arrive while one runs are covered by the next,
// which starts as soon as it ends (changed holds one pending signal).
func (c *Cluster) publishChanges(ctx context.Context, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			c.Store.Publish()
		}
	}
}

// kind is one resource a reflector follows: how to list and watch it, and
// what an event does to the store.
type kind struct {
	name      string
	example   runtime.Object
	lw        *cache.ListWatch
	transform cache.TransformFunc // what a streamed initial list keeps
	set, del  func(obj any)
	keys      func() []store.Key // what the store holds of the kind
}

// kinds lists the resources Run follows, each applying its events to the
// store through s.
func (c *Cluster) kinds(s sink) []kind {
	core, disc := c.Client.CoreV1(), c.Client.DiscoveryV1()
	ks := []kind{{
		name: "services", example: &corev1.Service{}, transform: stripService,
		set: setter(s, "service", keepAll(ToService), s.store.SetService, s.store.DeleteService), del: deleter(s.store.DeleteService),
		keys: s.keys(store.KindService),
		lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Services("").List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.Services("").Watch(ctx, o)
		}),
	}}
	if !c.NoEndpoints {
		ks = append(ks, kind{
			name: "endpointslices", example: &discoveryv1.EndpointSlice{}, transform: stripEndpointSlice,
			set: setter(s, "endpointslice", keepAll(ToEndpointSlice), s.store.SetEndpointSlice, s.store.DeleteEndpointSlice),
			del: deleter(s.store.DeleteEndpointSlice), keys: s.keys(store.KindEndpointSlice),
			lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return disc.EndpointSlices("").List(ctx, o)
			}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return disc.EndpointSlices("").Watch(ctx, o)
			}),
		})
	}
	ks = append(ks, kind{
		name: "namespaces", example: &corev1.Namespace{}, transform: stripNamespace, set: s.setNamespace, del: s.deleteNamespace,
		keys: s.keys(store.KindNamespace),
		lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Namespaces().List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.Namespaces().Watch(ctx, o)
		}),
	})
	if c.Pods {
		ks = append(ks, kind{
			name: "pods", example: &corev1.Pod{}, transform: stripPod,
			set: setter(s, "pod", ToPod, s.store.SetPod, s.store.DeletePod), del: deleter(s.store.DeletePod),
			keys: s.keys(store.KindPod),
			lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Pods("").List(ctx, o)
			}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Pods("").Watch(ctx, o)
			}),
		})
	}
	return ks
}

func listWatch(list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}
}

// keyedStore is a reflector's store that holds no objects: it applies each
// event through its kind's set and del, then notifies. A relist (Replace)
// deletes what the store holds and the list no longer has. A reflector
// calls it from one goroutine; hasSynced may be called from any.
type keyedStore struct {
	kind   kind
	notify func()
	synced chan struct{} // closed by the first Replace
}

var _ cache.TransformingStore = (*keyedStore)(nil)

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

// Transformer strips the objects a streamed initial list holds until its
// Replace, so that list's high-water mark is stripped objects.
func (k *keyedStore) Transformer() cache.TransformFunc { return k.kind.transform }

func (k *keyedStore) apply(obj any, set bool) error {
	if _, err := cache.MetaNamespaceKeyFunc(obj); err != nil {
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
// object the store holds that the list no longer has.
func (k *keyedStore) Replace(list []any, _ string) error {
	listed := make(map[store.Key]struct{}, len(list))
	var errs []error
	for _, obj := range list {
		m, err := meta.Accessor(obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k.kind.set(obj)
		listed[store.Key{Namespace: m.GetNamespace(), Name: m.GetName()}] = struct{}{}
	}
	for _, key := range k.kind.keys() {
		if _, ok := listed[key]; !ok {
			k.kind.del(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
		}
	}
	select {
	case <-k.synced:
	default:
		close(k.synced)
	}
	k.notify()
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", k.kind.name, errors.Join(errs...))
	}
	return nil
}

func (k *keyedStore) hasSynced() bool {
	select {
	case <-k.synced:
		return true
	default:
		return false
	}
}

// sink applies watch events to the store: objects are converted to slim
// records, and one that does not convert is logged and removed. ctx is
// Run's, for the log records only.
type sink struct {
	ctx   context.Context
	log   *slog.Logger
	store Publisher
}

// setter returns the handler that stores what conv keeps of a T and
// removes a T it does not keep (a pod that ToPod drops, say); what names
// the kind in the log.
func setter[T metav1.Object, R any](s sink, what string, conv func(T) (R, bool, error), set func(R), del func(ns, name string)) func(obj any) {
	return func(obj any) {
		v, ok := obj.(T)
		if !ok {
			return
		}
		rec, keep, err := conv(v)
		if err != nil {
			s.log.WarnContext(s.ctx, "skipping "+what, "err", err)
		}
		if err != nil || !keep {
			del(namespaceOf(v), v.GetName())
			return
		}
		set(rec)
	}
}

// keepAll adapts a converter that keeps every object that converts.
func keepAll[T, R any](conv func(T) (R, error)) func(T) (R, bool, error) {
	return func(v T) (R, bool, error) {
		rec, err := conv(v)
		return rec, true, err
	}
}

// deleter returns the handler that removes an object by namespace and name.
func deleter(del func(ns, name string)) func(obj any) {
	return func(obj any) {
		if m, ok := obj.(metav1.Object); ok {
			del(namespaceOf(m), m.GetName())
		}
	}
}

// keys returns what the store holds of kind k.
func (s sink) keys(k store.ObjectKind) func() []store.Key {
	return func() []store.Key { return s.store.Keys(k) }
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

func slimMeta(m metav1.ObjectMeta, keepLabel string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
	if v, ok := m.Labels[keepLabel]; ok && keepLabel != "" {
		out.Labels = map[string]string{keepLabel: v}
	}
	return out
}

// The transforms keep only what DNS reads, so a streamed initial list does
// not hold full API objects (managed fields, annotations, pod specs...)
// until it is applied.
var (
	stripService       = strip(slimService)
	stripEndpointSlice = strip(slimEndpointSlice)
	stripPod           = strip(slimPod)
	stripNamespace     = strip(func(n *corev1.Namespace) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: slimMeta(n.ObjectMeta, "")}
	})
)

// strip is the transform that keeps what slim keeps of a *T; anything else
// (a tombstone) passes unchanged.
func strip[T any](slim func(*T) *T) func(any) (any, error) {
	return func(obj any) (any, error) {
		if t, ok := obj.(*T); ok {
			return slim(t), nil
		}
		return obj, nil
	}
}

func slimService(s *corev1.Service) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: slimMeta(s.ObjectMeta, ""),
		Spec: corev1.ServiceSpec{
			Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs,
			ExternalName: s.Spec.ExternalName, Ports: s.Spec.Ports,
			PublishNotReadyAddresses: s.Spec.PublishNotReadyAddresses,
		},
	}
}

func slimEndpointSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{
		ObjectMeta:  slimMeta(s.ObjectMeta, serviceNameLabel),
		AddressType: s.AddressType,
		Ports:       s.Ports,
		Endpoints:   make([]discoveryv1.Endpoint, len(s.Endpoints)),
	}
	for i, e := range s.Endpoints {
		out.Endpoints[i] = discoveryv1.Endpoint{Addresses: e.Addresses, Hostname: e.Hostname,
			Conditions: discoveryv1.EndpointConditions{Ready: e.Conditions.Ready}}
		if e.TargetRef != nil {
			out.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: e.TargetRef.Kind, Name: e.TargetRef.Name}
		}
	}
	return out
}

func slimPod(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: slimMeta(p.ObjectMeta, ""),
		Status:     corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs},
	}
}
