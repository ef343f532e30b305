package nodelocal

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// zoneWatch learns the node's topology zone and follows the upstream
// Service's EndpointSlices into a clusterUpstreams.
type zoneWatch struct {
	client     kubernetes.Interface
	node       string
	namespace  string
	service    string
	ups        *clusterUpstreams
	follow     bool          // follow the EndpointSlices (preferZone); else the zone only
	jitter     time.Duration // the longest wait before a relist (watchJitter)
	log        *slog.Logger
	zone       atomic.Pointer[string] // nil until the Node was read
	nodeRetry  time.Duration          // first delay between Node reads (default 1s)
	slicesSeen chan struct{}          // closed after the first listing is applied (tests)
}

// topoClient is the topology option's client: the node's zone (once
// known) and name.
func (w *zoneWatch) topoClient() topology.Client {
	c := topology.Client{Node: w.node}
	if z := w.zone.Load(); z != nil {
		c.Zone = *z
	}
	return c
}

// run reads the Node's zone label, then follows the EndpointSlices until
// ctx is done. The order uses the zone from the moment it is known.
func (w *zoneWatch) run(ctx context.Context) error {
	if !w.follow {
		w.readZone(ctx, func() {})
		return nil
	}
	// Once the informer synced, its next listing is a relist. Its
	// reflector, which calls listWatch's functions, starts after inf is set.
	var inf cache.SharedIndexInformer
	relist := func() bool { return inf.HasSynced() }
	inf = cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(w.listWatch(relist), w.client),
		&discoveryv1.EndpointSlice{}, cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
	lister := discoverylisters.NewEndpointSliceLister(inf.GetIndexer())
	changed := make(chan struct{}, 1)
	kick := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	}); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { inf.RunWithContext(ctx) })
	go w.readZone(ctx, kick)
	synced := inf.HasSynced
	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		if !synced() {
			// The first listing's events arrive before it counts as
			// synced; its last event, or the next, kicks again.
			if !cache.WaitForCacheSync(ctx.Done(), synced) {
				return nil
			}
		}
		slices, err := lister.EndpointSlices(w.namespace).List(labels.Everything())
		if err != nil {
			w.log.Warn("list the cluster DNS endpoints", "err", err)
			continue
		}
		zone := ""
		if z := w.zone.Load(); z != nil {
			zone = *z
		}
		eps := endpointsOf(slices)
		w.ups.set(zone, eps)
		w.log.Debug("cluster DNS endpoints", "topologyZone", zone, "endpoints", len(eps), "order", w.ups.Upstreams())
		if first && w.slicesSeen != nil {
			close(w.slicesSeen)
		}
		first = false
	}
}

// listWatch lists and watches the EndpointSlices of the upstream Service.
// Once relist reports that the first listing is done, a list, or a
// watch that starts with the current objects (a watch-list stream), is a
// relist after the watch failed (an API server restart): it waits up to
// w.jitter at random first, so that the stages of every node do not list
// together. The answers go on from the last order meanwhile.
func (w *zoneWatch) listWatch(relist func() bool) *cache.ListWatch {
	selector := labels.Set{discoveryv1.LabelServiceName: w.service}.String()
	slices := w.client.DiscoveryV1().EndpointSlices(w.namespace)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			if relist() {
				if err := w.relistWait(ctx); err != nil {
					return nil, err
				}
			}
			return slices.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			if relist() && o.SendInitialEvents != nil && *o.SendInitialEvents {
				if err := w.relistWait(ctx); err != nil {
					return nil, err
				}
			}
			return slices.Watch(ctx, o)
		},
	}
}

// relistWait waits a random time in [0, w.jitter), or until ctx ends.
func (w *zoneWatch) relistWait(ctx context.Context) error {
	if w.jitter <= 0 {
		return nil
	}
	d := rand.N(w.jitter)
	w.log.Debug("listing the cluster DNS endpoints again after a random wait", "wait", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// readZone reads the Node's topology zone label until it succeeds or ctx
// is done, then kicks a new ordering.
func (w *zoneWatch) readZone(ctx context.Context, kick func()) {
	delay := w.nodeRetry
	if delay <= 0 {
		delay = time.Second
	}
	for {
		n, err := w.client.CoreV1().Nodes().Get(ctx, w.node, metav1.GetOptions{})
		if err == nil {
			z := n.Labels[topology.ZoneLabel]
			w.zone.Store(&z)
			w.log.Info("node topology zone", "node", w.node, "topologyZone", z)
			kick()
			return
		}
		w.log.Warn("read the node's topology zone (get nodes)", "node", w.node, "err", err, "retry", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Minute)
	}
}

// endpointsOf lists the slices' endpoints: each address at the slice's
// TCP port (53 without one), ready unless the condition says otherwise.
func endpointsOf(slices []*discoveryv1.EndpointSlice) []Endpoint {
	var eps []Endpoint
	for _, s := range slices {
		port := uint16(53)
		for _, p := range s.Ports {
			if p.Port != nil && (p.Protocol == nil || *p.Protocol == "TCP") {
				port = uint16(*p.Port)
				break
			}
		}
		for _, e := range s.Endpoints {
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			zone := ""
			if e.Zone != nil {
				zone = *e.Zone
			}
			for _, a := range e.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				eps = append(eps, Endpoint{Addr: netip.AddrPortFrom(ip.Unmap(), port), TopologyZone: zone, Ready: ready})
			}
		}
	}
	return eps
}
