package clusterdns

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/lifecycle"
	"github.com/dnsconfigurer/dnsconfigurer/internal/memrelease"
	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// Deps are what the cluster DNS server takes from its command besides its
// configuration.
type Deps struct {
	// Logger (default: discard).
	Logger *slog.Logger
	// Registry is the process's. The server registers its metrics on it
	// and serves it on /metrics with the answer stack's own (default: a new
	// registry).
	Registry *prometheus.Registry
	// Client is the API server's: the record source when the
	// configuration names no objects.
	Client kubernetes.Interface
	// MCS reads the ServiceImports of the API server, for the clusterset
	// zone (clustersetZone); nil: the zone is not served.
	MCS mcsclient.Interface
	// Reload watches the config file (nil: no reload).
	Reload *Reload
	// AfterSync, when set, is called once, a second after the records
	// first synced (serve lowers its GC target there); the server then
	// gives the heap the collector freed back to the OS.
	AfterSync func()
	// FirstPublish, when set, runs each first publish of the API server's
	// records, which builds the whole index at once (serve raises its GC
	// target around it).
	FirstPublish func(publish func())
	// Relisting, when set, is told when the API server's records are
	// listed again after their first sync (kubefeed.Cluster.Relisting;
	// serve bounds its memory while they stream: gctarget.RelistBound).
	Relisting func(on bool)
}

// Reload is the config file a running server watches, and how it is
// read.
type Reload struct {
	// Path is the file. A change of its content triggers Load.
	Path string
	// Load returns the configuration to apply: the file with the
	// command's flags over it, defaulted and validated. On an error the
	// running configuration stays.
	Load func() (*v1alpha1.ServerConfiguration, error)
	// SetLogLevel applies the logLevel of a reloaded configuration (nil:
	// the level is not reloaded).
	SetLogLevel func(level string) error
	// Interval is how often the file is read (default
	// DefaultReloadInterval).
	Interval time.Duration
}

// Server is the cluster DNS server, `serve --mode cluster`: the record
// store and its feed, the answer stack, the DNS listener, the metrics
// endpoint and the config reloader.
type Server struct {
	cfg  *v1alpha1.ServerConfiguration
	deps Deps
	log  *slog.Logger
	reg  *prometheus.Registry
	st   *store.Store
	cs   *store.Store // the clusterset zone's; nil when it is off
	// clusterID is this cluster's ID in its clusterset, once the
	// clusterset feed read it.
	clusterID atomic.Pointer[string]
}

// stores are the server's record stores.
func (s *Server) stores() stores {
	return stores{cluster: s.st, clusterset: s.cs, localCluster: func() string {
		if id := s.clusterID.Load(); id != nil {
			return *id
		}
		return ""
	}}
}

// New returns the server of cfg, a defaulted and validated configuration
// of mode cluster. Errors of cfg are marked v1alpha1.ErrConfig.
func New(cfg *v1alpha1.ServerConfiguration, deps Deps) (*Server, error) {
	if cfg.Mode != v1alpha1.ModeCluster {
		return nil, fmt.Errorf("clusterdns: mode %q, want %q", cfg.Mode, v1alpha1.ModeCluster)
	}
	s := &Server{cfg: cfg, deps: deps, log: deps.Logger, reg: deps.Registry}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	opts, err := kubefeed.StoreOptions(cfg)
	if err != nil {
		return nil, err
	}
	if s.st, err = store.New(opts); err != nil {
		return nil, v1alpha1.ConfigErrorf("clusterDomain %q: %v", cfg.ClusterDomain, err)
	}
	if err := RegisterRecordMetrics(s.reg, s.st); err != nil {
		return nil, err
	}
	if z := cfg.ClustersetZoneName(); z != "" && cfg.Objects == "" {
		// The records an MCS implementation imports: no pods.
		if s.cs, err = store.New(store.Options{Zone: z, TTL: opts.TTL, Namespaces: opts.Namespaces}); err != nil {
			return nil, v1alpha1.ConfigErrorf("clustersetZone %q: %v", cfg.ClustersetZone, err)
		}
	}
	return s, nil
}

// Run serves until ctx is done or a part fails. It builds the answer
// stack, loads the records and binds the listeners, then runs the feed,
// the reloader, the DNS listener and /metrics; the listener's lameduck
// runs while the feed and /readyz still do. Call it once.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stack, err := buildStack(ctx, s.cfg, s.stores(), s.log, nil)
	if err != nil {
		return err
	}
	defer func() { stack.stop() }()
	var events kubefeed.EventRecorder
	if s.cfg.Objects == "" && s.deps.Client != nil {
		rec, stop := kubefeed.NewEventRecorder(s.deps.Client)
		defer stop()
		events = rec
	}
	skips, err := kubefeed.NewSkips(s.reg, s.log, events)
	if err != nil {
		return err
	}
	records, err := kubefeed.NewFeed(s.cfg, s.st, s.deps.Client, skips, s.log)
	if err != nil {
		return err
	}
	records.FirstPublish, records.Relisting = s.deps.FirstPublish, s.deps.Relisting
	// With manifests the records are loaded: compile them now, then give
	// the loading garbage and the start-up pages back to the OS.
	stack.handler.Warm()
	memrelease.Startup()
	log := s.log.With("zone", s.st.Zone())
	srv := dnsserver.NewServer(s.cfg, log)
	srv.SetHandler(dnsserver.QueryLogged(s.cfg, stack.handler, log))
	gather := &stackGatherer{main: s.reg}
	gather.cur.Store(stack)
	if err := s.reg.Register(srv); err != nil {
		return err
	}
	synced := func() bool { return s.st.Snapshot() != nil }
	metrics := prom.NewCoreDNSNames(gather, s.cfg.CoreDNSServer(), s.cfg.CoreDNSMetrics)
	ops, err := health.Bind(s.cfg.MetricsListen, s.cfg.ReusePort, health.Handler(metrics,
		health.Condition(synced, "not synced"), health.Condition(srv.Ready, "lameduck")), s.log)
	if err != nil {
		return fmt.Errorf("metricsListen: %w", err)
	}
	var tasks []lifecycle.Task
	if ops != nil {
		tasks = append(tasks, ops.Run)
	}
	tasks = append(tasks, records.Run)
	if s.cs != nil && s.deps.Client != nil && s.deps.MCS != nil {
		cs := &kubefeed.Clusterset{Client: s.deps.Client, MCS: s.deps.MCS, Store: s.cs, Logger: s.log.With("zone", s.cs.Zone()), Skips: skips,
			LocalCluster: func(id string) { s.clusterID.Store(&id) }}
		tasks = append(tasks, cs.Run)
	}
	if src := s.deps.Reload; src != nil {
		r := &reloader{src: *src, running: s.cfg, st: s.stores(), records: records, srv: srv, gather: gather, coredns: metrics,
			log: s.log, level: src.SetLogLevel, stack: &stack}
		r.last, _ = r.fingerprint() // before anyone is answered: an edit after it is applied
		if err := s.reg.Register(r); err != nil {
			return err
		}
		tasks = append(tasks, r.run)
	}
	// Stopped in reverse: the listener's lameduck runs while the feed and
	// /readyz still do.
	return lifecycle.Run(ctx, append(tasks, srv.Run, memrelease.AfterSync(synced, s.deps.AfterSync))...)
}
