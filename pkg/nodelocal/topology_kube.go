package nodelocal

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
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
	jitter     time.Duration // the longest wait before a relist after a failed watch (watchJitter)
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
	f := informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithNamespace(w.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{discoveryv1.LabelServiceName: w.service}.String()
		}))
	inf := f.Discovery().V1().EndpointSlices()
	lister := inf.Lister()
	changed := make(chan struct{}, 1)
	kick := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if w.jitter > 0 {
		if err := inf.Informer().SetWatchErrorHandlerWithContext(w.watchFailed); err != nil {
			return err
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	go w.readZone(ctx, kick)
	synced := inf.Informer().HasSynced
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

// watchFailed is the informer's watch error handler: client-go's, then a
// wait of up to w.jitter at random before the reflector lists again, so
// that the stages of every node do not list together after an API server
// restart. The reflector calls it on its own goroutine; the answers go on
// from the last order meanwhile.
func (w *zoneWatch) watchFailed(ctx context.Context, r *cache.Reflector, err error) {
	cache.DefaultWatchErrorHandler(ctx, r, err)
	d := w.relistWait()
	w.log.Debug("watch failed: listing again after a random wait", "err", err, "wait", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// relistWait is a wait of watchFailed: uniform in [0, w.jitter).
func (w *zoneWatch) relistWait() time.Duration { return rand.N(w.jitter) }

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
