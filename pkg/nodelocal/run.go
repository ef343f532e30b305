package nodelocal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/lifecycle"
	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodenet"
)

// Deps are what the stage takes from its command besides its
// configuration.
type Deps struct {
	// Logger (default: discard).
	Logger *slog.Logger
	// Registry is the process's. The stage registers its metrics on it
	// and serves it on /metrics (default: a new registry).
	Registry *prometheus.Registry
	// LoadConfig reads nodeLocal.clusterConfig, the cluster DNS's
	// ServerConfiguration (required when it is set).
	LoadConfig LoadFunc
	// WatchOptions tune the watch of nodeLocal.clusterConfig (tests).
	WatchOptions []filewatch.Option
	// Kube is the API server client (nil: none). With it and
	// nodeLocal.nodeName the stage reads the node's topology zone and,
	// with nodeLocal.preferZone, asks that zone's cluster DNS pods first.
	Kube kubernetes.Interface
}

// Stage is the node-local stage, `serve --mode node-local`: a caching
// forwarder that sends cluster names to the cluster DNS over TCP and other
// names to the node's nameservers, and adds the autopath option. In
// transparent mode it sets up its addresses and notrack table on the node.
type Stage struct {
	cfg  *v1alpha1.ServerConfiguration
	log  *slog.Logger
	reg  *prometheus.Registry
	deps Deps
}

// NewStage returns the stage of cfg, a defaulted and validated
// configuration of mode node-local.
func NewStage(cfg *v1alpha1.ServerConfiguration, deps Deps) (*Stage, error) {
	if cfg.Mode != v1alpha1.ModeNodeLocal {
		return nil, fmt.Errorf("nodelocal: mode %q, want %q", cfg.Mode, v1alpha1.ModeNodeLocal)
	}
	if cfg.NodeLocal.ClusterConfig != "" && deps.LoadConfig == nil {
		return nil, fmt.Errorf("nodelocal: nodeLocal.clusterConfig %q set without a loader", cfg.NodeLocal.ClusterConfig)
	}
	s := &Stage{cfg: cfg, log: deps.Logger, reg: deps.Registry, deps: deps}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.log = s.log.With("mode", "node-local")
	return s, nil
}

// Run serves until ctx is done or a part fails. Errors of the
// configuration are marked v1alpha1.ErrConfig. Call it once.
func (s *Stage) Run(ctx context.Context) error {
	cfg, log, reg := s.cfg, s.log, s.reg
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var closers []func()
	defer func() {
		cancel()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	// The setup comes first: it removes a notrack table a killed instance
	// left, so the Service IP is the cluster DNS's while this one starts,
	// or fails to.
	setup, err := nodeSetup(cfg, log, reg, &closers)
	if err != nil {
		return err
	}
	if setup != nil {
		if err := setup.Prepare(ctx); err != nil {
			return err
		}
		closers = append(closers, func() { _ = setup.Release() }) // when start-up fails
	}
	var ups []string
	for _, a := range cfg.NodeLocal.ClusterUpstreamAddrs() {
		ups = append(ups, a.String())
	}
	topo := newTopologySetup(cfg, s.deps.Kube, ups, log)
	up, searches, err := upstreams(ctx, cfg, topo, log, reg, &closers)
	if err != nil {
		return err
	}
	var tasks []lifecycle.Task
	if topo.watch != nil {
		tasks = append(tasks, topo.watch.run)
	}
	if path := cfg.NodeLocal.ClusterConfig; path != "" {
		f := &follower{path: path, load: s.deps.LoadConfig, domain: cfg.ClusterDomain, r: up, log: log.With("clusterConfig", path),
			m: up.m, opts: s.deps.WatchOptions}
		if err := f.reload(); err != nil {
			return v1alpha1.ConfigErrorf("%v", err)
		}
		tasks = append(tasks, f.run)
	}
	nl := cfg.NodeLocal
	h, err := New(up, Config{ClusterDomain: cfg.ClusterDomain, OptionCode: uint16(cfg.AutopathOptionCode),
		Cache: dnscache.ConfigOf(cfg.Cache), Timeout: nl.ClusterTimeout.Duration(), HostSearches: searches,
		UDPAnswerLimit: cfg.UDPAnswerLimit, Logger: log, Registerer: reg})
	if err != nil {
		return v1alpha1.ConfigErrorf("cache: %v", err)
	}
	closers = append(closers, h.Close)
	// A new instance beside an old one (a surge pod) gets its share of the
	// queries as soon as it binds: it binds once the cluster DNS answers.
	waitCluster(ctx, up.cluster, cfg.ClusterDomain, clusterWait, log)
	srvLog := log.With("cluster-upstream", nl.ClusterUpstream, "zone", cfg.ClusterDomain)
	srv := dnsserver.NewServer(cfg, srvLog)
	srv.SetHandler(dnsserver.QueryLogged(cfg, h, srvLog))
	if err := reg.Register(srv); err != nil {
		return err
	}
	// The node-local stage has no records to sync: ready once it serves,
	// until its lameduck. It reads its file once: coreDNSMetrics is fixed.
	metrics := prom.NewCoreDNSNames(reg, cfg.CoreDNSServer(), cfg.CoreDNSMetrics)
	ops, err := health.Bind(cfg.MetricsListen, cfg.ReusePort, health.Handler(metrics, readiness(srv, setup)...), log)
	if err != nil {
		return fmt.Errorf("metricsListen: %w", err)
	}
	if ops != nil {
		tasks = append(tasks, ops.Run)
	}
	// Stopped in reverse: the notrack table goes first (the Service IP falls
	// back to the cluster DNS), then the server's lameduck, then the
	// addresses.
	return lifecycle.Run(ctx, append(tasks, releaseTask(setup, log), srv.Run, keepTask(setup, srv, log))...)
}

// readiness is the stage's /readyz: it serves DNS and is not in its
// lameduck. A surge pod's probes reach whichever instance the kernel picks
// for the shared port, the old one too: while a newer instance runs on the
// node, the newest one's state answers, so the DaemonSet stops the old pod
// only once the new one serves. Without the node set-up there is no lease
// to tell instances apart.
func readiness(srv *dnsserver.Server, setup *nodenet.Manager) []health.Check {
	serving := func() bool {
		select {
		case <-srv.Serving():
			return true
		default:
			return false
		}
	}
	own := []health.Check{health.Condition(serving, "not serving DNS yet"), health.Condition(srv.Ready, "lameduck")}
	if setup == nil {
		return own
	}
	return []health.Check{func() error {
		switch newer, serves := setup.Superseded(); {
		case newer && serves:
			return nil
		case newer:
			return errors.New("a newer instance runs on this node: it takes over once it serves")
		}
		for _, c := range own {
			if err := c(); err != nil {
				return err
			}
		}
		return nil
	}}
}

// upstreams is the router of the stage's forwarders (cluster names to the
// cluster DNS over TCP; others there too, or with external "direct" to the
// watched resolv.conf's nameservers) and the node's search domains.
func upstreams(ctx context.Context, cfg *v1alpha1.ServerConfiguration, topo *topologySetup, log *slog.Logger, reg *prometheus.Registry, closers *[]func()) (*router, func() []string, error) {
	nl := cfg.NodeLocal
	ups := topo.ups.static
	policy := ""
	newForwarder := func(zone string, src forward.UpstreamSource, tcp bool, timeout time.Duration, relay ...uint16) (*forward.Forwarder, error) {
		// Only the cluster DNS answers pipelined queries concurrently.
		pipeline := zone == "cluster" && nl.ClusterPipelineOn()
		fwd, err := forward.Start(ctx, forward.Config{Upstreams: src, Self: cfg.ListenAddrs(), ForceTCP: tcp, Pipeline: pipeline, Timeout: timeout, Policy: policy,
			MaxConcurrent: cfg.MaxConcurrent, ShedRcode: cfg.ShedRcodeValue(), RelayOptions: relay,
			Zone: zone, Logger: log.With("forward", zone)}, reg)
		if err == nil {
			*closers = append(*closers, func() { _ = fwd.Close() })
		}
		return fwd, err
	}
	// Only the cluster DNS gets the autopath and topology options (it reads
	// the search list and the client's topology from them); no other
	// client option leaves the node. Its timeout is longer than the
	// cluster DNS's own forward timeout: a name it cannot resolve is its
	// SERVFAIL, not a timeout here. Following the endpoints, it tries them
	// in topology order: the node's zone first.
	var src forward.UpstreamSource = forward.StaticUpstreams(ups)
	if topo.watch != nil && topo.watch.follow {
		src, policy = topo.ups, forward.PolicySequential
	}
	cluster, err := newForwarder("cluster", src, true, nl.ClusterTimeout.Duration(), uint16(cfg.AutopathOptionCode), uint16(cfg.TopologyOptionCode))
	policy = ""
	if err != nil {
		return nil, nil, v1alpha1.ConfigErrorf("nodeLocal.clusterUpstream: %v", err)
	}
	if len(cluster.Upstreams()) == 0 {
		return nil, nil, v1alpha1.ConfigErrorf("nodeLocal.clusterUpstream %v: every address is one the stage listens on (give the cluster DNS pods' own Service, not the Service IP the stage takes over)", ups)
	}
	if err := v1alpha1.ValidateClusterDomain(cfg.ClusterDomain); err != nil {
		return nil, nil, v1alpha1.ConfigErrorf("clusterDomain: %v", err)
	}
	m, err := newRouteMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	tm, err := newTopologyMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	topo.ups.local = tm.local
	r := &router{cluster: &topologyCluster{fwd: cluster, ups: topo.ups, code: uint16(cfg.TopologyOptionCode), client: topo.client, m: tm}, m: m}
	r.routes.Store(NewRoutes(cfg.ClusterDomain, nil, nil, nil))
	searches := func() []string { return nil }
	if path := nl.ResolvConfPath(); path != "" {
		w, err := hostresolv.Watch(ctx, path, hostresolv.WithLogger(log), hostresolv.WithRegistry(reg), hostresolv.ForUpstreams())
		if err != nil {
			return nil, nil, v1alpha1.ConfigErrorf("nodeLocal.resolvConf: %v", err)
		}
		*closers = append(*closers, func() { <-w.Done() })
		searches = func() []string { return w.Current().Config.Searches }
		if nl.ExternalMode() == v1alpha1.ExternalDirect {
			host, err := newForwarder(".", forward.UpstreamFunc(func() []string { return w.Current().Raw.Nameservers }), false, 0)
			if err != nil {
				return nil, nil, v1alpha1.ConfigErrorf("nodeLocal.resolvConf: %v", err)
			}
			r.external = host
		}
	}
	return r, searches, nil
}

// nodeSetup is the transparent mode's setup of addresses and notrack
// table on the node, or nil when the config asks for neither.
func nodeSetup(cfg *v1alpha1.ServerConfiguration, log *slog.Logger, reg *prometheus.Registry, closers *[]func()) (*nodenet.Manager, error) {
	nl := cfg.NodeLocal
	if !nl.SetupInterface && !nl.SetupNotrack {
		return nil, nil
	}
	c := nodenet.Config{IPs: nl.LocalAddrs(), SetupInterface: nl.SetupInterface, Interface: nl.InterfaceName,
		SetupNotrack: nl.SetupNotrack, SkipTeardown: nl.SkipTeardown, LockFile: nl.LockFile, Logger: log}
	if nl.SetupInterface {
		links, err := nodenet.NewNetlinkLinks(-1)
		if err != nil {
			return nil, err
		}
		*closers = append(*closers, links.Close)
		c.Links = links
	}
	if nl.SetupNotrack {
		c.Notrack = nodenet.NewNftNotrack(-1)
	}
	m, err := nodenet.New(c)
	if err != nil {
		return nil, v1alpha1.ConfigErrorf("nodeLocal: %v", err)
	}
	return m, reg.Register(m)
}

// keepTask installs the notrack table once srv serves, keeps the setup in
// place, and removes the table first when stopped. Its lease entry says it
// serves meanwhile.
func keepTask(setup *nodenet.Manager, srv *dnsserver.Server, log *slog.Logger) lifecycle.Task {
	return func(ctx context.Context) error {
		if setup == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-srv.Serving():
		}
		setup.Serving(true)
		_ = setup.Keep(ctx)
		setup.Serving(false)
		if err := setup.RemoveNotrack(); err != nil {
			log.Error("remove the notrack table", "err", err)
		}
		return nil
	}
}

// releaseTask removes the addresses once the server has stopped.
func releaseTask(setup *nodenet.Manager, log *slog.Logger) lifecycle.Task {
	return func(ctx context.Context) error {
		if setup == nil {
			return nil
		}
		<-ctx.Done()
		if err := setup.Release(); err != nil {
			log.Error("remove the node-local addresses", "err", err)
		}
		return nil
	}
}

// clusterWait bounds how long a starting stage waits for the cluster DNS
// to answer before it serves anyway.
const clusterWait = 10 * time.Second

// waitCluster asks the cluster DNS for the zone's SOA until it answers
// (any rcode but SERVFAIL), at most for wait. A rolled-out stage and its
// cluster DNS start together: its upstream Service may have no endpoint
// for a moment, and queries this instance took meanwhile would fail.
func waitCluster(ctx context.Context, cluster Exchanger, zone string, wait time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	q := new(dns.Msg).SetQuestion(dns.Fqdn(zone), dns.TypeSOA)
	delay := 50 * time.Millisecond
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		r, err := cluster.Exchange(actx, q.Copy())
		acancel()
		if err == nil && r.Rcode != dns.RcodeServerFailure {
			return
		}
		select {
		case <-ctx.Done():
			log.Warn("the cluster DNS does not answer yet: serving anyway", "waited", wait, "err", err)
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}
