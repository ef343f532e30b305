package feed

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/store"
)

// Cluster feeds the store from client-go informers on Services,
// EndpointSlices (unless NoEndpoints), Namespaces and, when Pods is set,
// Pods. The informers keep stripped objects (only the fields DNS needs) and
// the store gets slim records; the store is published after the first full
// sync and then right after each change (changes that arrive while a
// publish runs go into the next one).
type Cluster struct {
	Client      kubernetes.Interface
	Store       Publisher
	Logger      *slog.Logger
	Pods        bool
	NoEndpoints bool
	// Resync is the informers' resync period (default 0: none).
	Resync time.Duration
}

// Run starts the informers, publishes after the first sync and keeps the
// store current until ctx is done. It returns ctx's error if ctx ends before
// the first sync, nil on a later cancel.
func (c *Cluster) Run(ctx context.Context) error {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	changed := make(chan struct{}, 1)
	factory := informers.NewSharedInformerFactory(c.Client, c.Resync)
	defer factory.Shutdown()
	synced, err := c.addInformers(factory, sink{ctx: ctx, log: log, store: c.Store}, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}

	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("wait for informer sync: %w", ctx.Err())
	}
	// Drain the notifications of the initial list: the publish covers them.
	select {
	case <-changed:
	default:
	}
	c.Store.Publish()
	log.InfoContext(ctx, "kubernetes records synced")
	c.publishChanges(ctx, changed)
	return nil
}

// addInformers registers the informers Run needs on factory, each with its
// transform and with event handlers that apply the change to the store
// through s and then call notify. It returns their HasSynced functions.
func (c *Cluster) addInformers(factory informers.SharedInformerFactory, s sink, notify func()) ([]cache.InformerSynced, error) {
	r := registrar{notify: notify}
	if err := r.add(factory.Core().V1().Services().Informer(), stripService, s.setService, s.deleteService); err != nil {
		return nil, fmt.Errorf("services informer: %w", err)
	}
	if !c.NoEndpoints {
		if err := r.add(factory.Discovery().V1().EndpointSlices().Informer(), stripEndpointSlice, s.setEndpointSlice, s.deleteEndpointSlice); err != nil {
			return nil, fmt.Errorf("endpointslices informer: %w", err)
		}
	}
	if err := r.add(factory.Core().V1().Namespaces().Informer(), stripNamespace, s.setNamespace, s.deleteNamespace); err != nil {
		return nil, fmt.Errorf("namespaces informer: %w", err)
	}
	if c.Pods {
		if err := r.add(factory.Core().V1().Pods().Informer(), stripPod, s.setPod, s.deletePod); err != nil {
			return nil, fmt.Errorf("pods informer: %w", err)
		}
	}
	return r.synced, nil
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

// registrar sets up informers and collects their HasSynced functions.
type registrar struct {
	notify func()
	synced []cache.InformerSynced
}

// add sets transform on inf and registers handlers that call set for adds
// and updates and del for deletes (unwrapping DeletedFinalStateUnknown),
// then notify.
func (r *registrar) add(inf cache.SharedIndexInformer, transform cache.TransformFunc, set, del func(obj any)) error {
	if err := inf.SetTransform(transform); err != nil {
		return fmt.Errorf("set transform: %w", err)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj); r.notify() },
		UpdateFunc: func(_, obj any) { set(obj); r.notify() },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			del(obj)
			r.notify()
		},
	})
	if err != nil {
		return fmt.Errorf("add event handler: %w", err)
	}
	r.synced = append(r.synced, reg.HasSynced)
	return nil
}

// sink applies informer events to the store: objects are converted to slim
// records, and one that does not convert is logged and removed. ctx is
// Run's, for the log records only.
type sink struct {
	ctx   context.Context
	log   *slog.Logger
	store Publisher
}

func (s sink) setService(obj any) {
	v, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	rec, err := ToService(v)
	if err != nil {
		s.log.WarnContext(s.ctx, "skipping service", "err", err)
		s.store.DeleteService(namespaceOf(v.ObjectMeta), v.Name)
		return
	}
	s.store.SetService(rec)
}

func (s sink) deleteService(obj any) {
	if m, ok := obj.(metav1.Object); ok {
		s.store.DeleteService(nsOf(m), m.GetName())
	}
}

func (s sink) setEndpointSlice(obj any) {
	v, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	rec, err := ToEndpointSlice(v)
	if err != nil {
		s.log.WarnContext(s.ctx, "skipping endpointslice", "err", err)
		s.store.DeleteEndpointSlice(namespaceOf(v.ObjectMeta), v.Name)
		return
	}
	s.store.SetEndpointSlice(rec)
}

func (s sink) deleteEndpointSlice(obj any) {
	if m, ok := obj.(metav1.Object); ok {
		s.store.DeleteEndpointSlice(nsOf(m), m.GetName())
	}
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

// setPod stores a pod that ToPod keeps and removes any other.
func (s sink) setPod(obj any) {
	v, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	rec, keep, err := ToPod(v)
	if err != nil {
		s.log.WarnContext(s.ctx, "skipping pod", "err", err)
	}
	if err != nil || !keep {
		s.store.DeletePod(namespaceOf(v.ObjectMeta), v.Name)
		return
	}
	s.store.SetPod(rec)
}

func (s sink) deletePod(obj any) {
	if m, ok := obj.(metav1.Object); ok {
		s.store.DeletePod(nsOf(m), m.GetName())
	}
}

func storeNamespace(name string) store.Namespace { return store.Namespace{Name: name} }

func nsOf(m metav1.Object) string {
	if m.GetNamespace() == "" {
		return metav1.NamespaceDefault
	}
	return m.GetNamespace()
}

func slimMeta(m metav1.ObjectMeta, keepLabel string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
	if v, ok := m.Labels[keepLabel]; ok && keepLabel != "" {
		out.Labels = map[string]string{keepLabel: v}
	}
	return out
}

// The transforms keep only what DNS reads, so the informer caches do not
// hold full API objects (managed fields, annotations, pod specs...).

func stripService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	return &corev1.Service{
		ObjectMeta: slimMeta(s.ObjectMeta, ""),
		Spec: corev1.ServiceSpec{
			Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs,
			ExternalName: s.Spec.ExternalName, Ports: s.Spec.Ports,
			PublishNotReadyAddresses: s.Spec.PublishNotReadyAddresses,
		},
	}, nil
}

func stripEndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
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
	return out, nil
}

func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: slimMeta(p.ObjectMeta, ""),
		Status:     corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs},
	}, nil
}

func stripNamespace(obj any) (any, error) {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: slimMeta(n.ObjectMeta, "")}, nil
}
