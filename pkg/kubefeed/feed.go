package kubefeed

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// StoreOptions are the record options of cfg (the store's, changed by a
// reload).
func StoreOptions(cfg *v1alpha1.ServerConfiguration) (store.Options, error) {
	podMode, err := store.ParsePodMode(cfg.Pods)
	if err != nil {
		return store.Options{}, v1alpha1.ConfigErrorf("pods: %v", err)
	}
	return store.Options{
		Zone: cfg.ClusterDomain, TTL: cfg.RecordTTL(), Pods: podMode, Namespaces: cfg.Namespaces,
		IgnoreEmptyService: cfg.IgnoreEmptyService, EndpointPodNames: cfg.EndpointPodNames, NoEndpoints: cfg.NoEndpoints,
	}, nil
}

// Feed fills the store: from the manifests of objects (loaded now, then
// watched), or from the cluster's API server, whose informers watch pods
// only with pods: verified and endpoints only without noEndpoints. A
// reload that changes either starts the informers again (rewatch).
type Feed struct {
	// FirstPublish, when set, runs each start's first publish (serve's
	// Deps.FirstPublish).
	FirstPublish func(publish func())
	// Relisting, when set, is each cluster feed's Cluster.Relisting.
	Relisting func(on bool)

	st        *store.Store
	log       *slog.Logger
	manifests *Manifests           // or
	client    kubernetes.Interface // the API server's, or
	none      bool                 // noClusterZone: no source
	skips     *Skips               // shared by each cluster feed started

	watching feedWatch      // the reloader's: what the feed watches
	rewatch  chan feedWatch // to run: watch this instead

	mu     sync.Mutex
	synced bool // the running feed has published its records
}

// feedWatch is what the cluster feed watches besides Services and
// Namespaces, and whether it keeps the endpoints' pod names.
type feedWatch struct{ pods, endpoints, podNames bool }

func watchOf(cfg *v1alpha1.ServerConfiguration) feedWatch {
	return feedWatch{pods: cfg.Pods == v1alpha1.PodsVerified, endpoints: !cfg.NoEndpoints, podNames: cfg.EndpointPodNames}
}

// NewFeed is the feed of cfg's record source: its manifests, else client.
// skips reports the objects it cannot serve.
func NewFeed(cfg *v1alpha1.ServerConfiguration, st *store.Store, client kubernetes.Interface, skips *Skips, log *slog.Logger) (*Feed, error) {
	r := &Feed{st: st, log: log, skips: skips, watching: watchOf(cfg), rewatch: make(chan feedWatch, 1)}
	if cfg.NoClusterZone {
		// No source: one empty snapshot, published at once.
		r.synced, r.none = true, true
		st.Publish()
		return r, nil
	}
	if cfg.Objects != "" {
		// Objects that do not load are skipped and reported; only a path
		// that cannot be read refuses to start.
		r.manifests = &Manifests{Path: cfg.Objects, Store: st, Logger: log, Skips: skips}
		if err := r.manifests.Load(); err != nil {
			return nil, v1alpha1.ConfigErrorf("objects: %v", err)
		}
		r.synced = true
		return r, nil
	}
	if client == nil {
		return nil, v1alpha1.ConfigErrorf("no records to serve: neither objects nor an API server client")
	}
	r.client = client
	return r, nil
}

// Run feeds the store until ctx is done. The cluster feed is started again
// from an empty store when rewatch says so; the snapshot published before
// keeps answering until the new informers have synced and published.
func (r *Feed) Run(ctx context.Context) error {
	if r.none {
		<-ctx.Done()
		return nil
	}
	if r.manifests != nil {
		if err := r.manifests.Run(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("record feed stopped: %w", err)
		}
		return nil
	}
	w := r.watching
	for {
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		c := &Cluster{Client: r.client, Store: syncedStore{r.st, r}, Logger: r.log, Pods: w.pods, NoEndpoints: !w.endpoints,
			EndpointPodNames: w.podNames, Skips: r.skips, Relisting: r.Relisting}
		go func() { done <- c.Run(fctx) }()
		select {
		case err := <-done:
			cancel()
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("record feed stopped: %w", err)
			}
			return nil
		case <-ctx.Done():
			cancel()
			<-done
			return nil
		case w = <-r.rewatch:
			cancel()
			<-done
			r.mu.Lock()
			r.synced = false
			r.st.Replace(store.Objects{})
			r.mu.Unlock()
			r.log.Info("watching the API server again", "pods", w.pods, "endpoints", w.endpoints, "endpointPodNames", w.podNames)
		}
	}
}

// Apply makes the store's records follow cfg's options (a reload): the
// cluster feed starts again when what it must watch changed, and publishes
// once synced; otherwise the records are published again now (once the
// feed has published them: before, there is nothing to serve yet).
func (r *Feed) Apply(cfg *v1alpha1.ServerConfiguration) error {
	opts, err := StoreOptions(cfg)
	if err != nil {
		return err
	}
	if err := r.st.SetOptions(opts); err != nil {
		return err
	}
	if w := watchOf(cfg); r.client != nil && w != r.watching {
		r.watching = w
		select {
		case <-r.rewatch: // a change not taken up yet: this one replaces it
		default:
		}
		r.rewatch <- w
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.synced {
		r.st.Publish()
	}
	return nil
}

// syncedStore is the store as the cluster feed's Publisher: its publish
// marks the records as there.
type syncedStore struct {
	*store.Store
	feed *Feed
}

func (s syncedStore) Publish() *store.Snapshot {
	s.feed.mu.Lock()
	first := !s.feed.synced
	s.feed.mu.Unlock()
	var snap *store.Snapshot
	if first && s.feed.FirstPublish != nil {
		s.feed.FirstPublish(func() { snap = s.Store.Publish() })
	} else {
		snap = s.Store.Publish()
	}
	s.feed.mu.Lock()
	s.feed.synced = true
	s.feed.mu.Unlock()
	return snap
}
