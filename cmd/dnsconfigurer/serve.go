package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/feed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
)

func init() {
	register("serve", command{summary: "run the cluster DNS server (Kubernetes DNS spec 1.1.0)", run: runServe})
}

// listFlag is a repeatable flag that also takes comma-separated values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

type serveFlags struct {
	listen             listFlag
	clusterDomain      string
	objects            string
	kubeconfig         string
	pods               string
	ttl                uint
	upstream           listFlag
	upstreamResolvConf string
	metricsListen      string
	namespaces         listFlag
	ignoreEmptyService bool
	endpointPodNames   bool
	noEndpoints        bool
	log                logFlags

	mode            string
	autopath        bool
	autopathSource  bool
	autopathCode    uint
	topNamespaces   int
	clusterUpstream listFlag
	resolvConf      string
	maxTTL          time.Duration
	maxNegativeTTL  time.Duration
	cacheSize       byteSize
	zoneCacheSize   byteSize
	serveStale      time.Duration
	prefetch        int

	loadbalance    bool
	reverseZones   listFlag
	lameduck       time.Duration
	logQueries     bool
	maxUDPInFlight int
	maxTCPConns    int

	config        string
	forward       routeFlag
	maxConcurrent int
	hosts         string
	reusePort     bool

	localIPs       listFlag
	setupInterface bool
	interfaceName  string
	setupNotrack   bool
	skipTeardown   bool
	lockFile       string
	// set are the flags given on the command line: they override --config.
	set map[string]bool
}

func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dnsconfigurer serve --listen ADDR [--listen ADDR...] [--cluster-domain cluster.local]\n"+
			"    [--objects PATH | --kubeconfig PATH] [--pods verified|insecure|disabled] [--ttl N]\n"+
			"    [--upstream ADDR[,ADDR...] | --upstream-resolv-conf PATH] [--forward ZONE=ADDR[,ADDR...]]...\n"+
			"    [--metrics-listen ADDR] [--log-format text|json] [--log-level debug|info|warn|error]\n"+
			"    [--config FILE (ServerConfiguration, reloaded on change)]\n\nflags:")
		fs.PrintDefaults()
	}
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	return f, nil
}

// register defines serve's flags on fs.
func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.listen, "listen", "`ADDR` (ip:port) to serve DNS on, UDP and TCP; repeatable")
	fs.StringVar(&f.clusterDomain, "cluster-domain", v1alpha1.DefaultServerClusterDomain, "the cluster `zone`")
	fs.StringVar(&f.objects, "objects", "", "serve the Services, EndpointSlices, Pods and Namespaces of this manifest file or directory (watched)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "watch the cluster of this kubeconfig (default with neither: $KUBECONFIG, else the in-cluster config)")
	fs.StringVar(&f.pods, "pods", "disabled", "pod records <a-b-c-d>.<ns>.pod.<zone>: verified, insecure or disabled")
	fs.UintVar(&f.ttl, "ttl", 5, "TTL of the records and of negative answers, 0-3600")
	fs.Var(&f.upstream, "upstream", "forward names outside the cluster zone to these `ADDR`s (ip or ip:port); repeatable or comma-separated")
	fs.StringVar(&f.upstreamResolvConf, "upstream-resolv-conf", "", "forward to the nameservers of this resolv.conf (watched; the last good file is kept)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this `ADDR`")
	fs.Var(&f.namespaces, "namespaces", "only serve these namespaces (comma-separated or repeated)")
	fs.BoolVar(&f.ignoreEmptyService, "ignore-empty-service", false, "answer NXDOMAIN for Services without a ready endpoint")
	fs.BoolVar(&f.endpointPodNames, "endpoint-pod-names", false, "name endpoints without a hostname after their pod instead of their dashed IP")
	fs.BoolVar(&f.noEndpoints, "no-endpoints", false, "serve no endpoint records (headless Services and endpoint names are NXDOMAIN)")
	f.log.register(fs, logText)
	fs.StringVar(&f.mode, "mode", "cluster", "cluster (the cluster DNS) or node-local (a caching forwarder to --cluster-upstream that adds the autopath option)")
	fs.BoolVar(&f.autopath, "autopath", true, "cluster mode: answer <name>.search.<ns>.<zone>.ap.k8s.io by server-side search expansion")
	fs.BoolVar(&f.autopathSource, "autopath-by-source", false, "cluster mode: also expand plain queries from known pod IPs with that pod's namespace search list (implies --pods verified)")
	fs.UintVar(&f.autopathCode, "autopath-option-code", autopath.DefaultOptionCode, "EDNS0 local option code carrying the autopath search list")
	fs.IntVar(&f.topNamespaces, "namespace-metrics", clusterdns.DefaultTopNamespaces, "cluster mode: the busiest `N` namespaces (0-1000) get series of their own in the search-list amplification metrics dnsconfigurer_dnsserver_namespace_*{namespace}, the others are \"other\" (docs/amplification.md); 0: off")
	fs.Var(&f.clusterUpstream, "cluster-upstream", "node-local mode: the cluster DNS `ADDR`s (ip or ip:port), asked over TCP for cluster names: a Service of the cluster DNS pods of its own, not the Service IP node-local takes over")
	fs.StringVar(&f.resolvConf, "resolv-conf", "/etc/resolv.conf", "node-local mode: the node's resolv.conf (watched; auto: systemd-resolved's when it runs): its nameservers answer names outside the cluster, its search domains end autopath search lists; \"\" for none (every name to --cluster-upstream)")
	fs.DurationVar(&f.maxTTL, "max-ttl", 30*time.Second, "longest time a positive forwarded answer is cached")
	fs.DurationVar(&f.maxNegativeTTL, "max-negative-ttl", 5*time.Second, "longest time a forwarded NXDOMAIN/NODATA is cached")
	f.cacheSize = dnscache.DefaultSuccessBytes + dnscache.DefaultDenialBytes
	fs.Var(&f.cacheSize, "cache-size", "`BYTES` of forwarded answers cached, counted with their overhead (e.g. 32Mi; 4/5 for answers, 1/5 for denials)")
	fs.Var(&f.cacheSize, "cache-bytes", "old name of --cache-size")
	f.zoneCacheSize = clusterdns.DefaultReplyCacheBytes
	fs.Var(&f.zoneCacheSize, "zone-cache-size", "cluster mode: `BYTES` of packed replies made from the cluster zone kept per snapshot (e.g. 16Mi, at least 1Mi; about 250 bytes a reply)")
	fs.DurationVar(&f.serveStale, "serve-stale", 0, "when every upstream fails, serve an expired answer up to this long past its expiry, with TTL 30 (RFC 8767; 0: off)")
	fs.IntVar(&f.prefetch, "prefetch", 0, "refresh an answer asked `N` times within a minute before it expires (0: off)")
	fs.BoolVar(&f.loadbalance, "loadbalance", true, "rotate A, AAAA and same-priority SRV records in every answer (CoreDNS's loadbalance)")
	fs.Var(&f.reverseZones, "reverse-zones", "answer the reverse names of these `CIDR`s authoritatively (the Service and Pod CIDRs): unknown ones are NXDOMAIN with the zone's SOA, not forwarded")
	fs.DurationVar(&f.lameduck, "lameduck", 5*time.Second, "on SIGTERM keep answering this long with /readyz failing, then stop")
	fs.BoolVar(&f.logQueries, "log-queries", false, "log every query (client, name, type, rcode, duration); for debugging")
	fs.IntVar(&f.maxUDPInFlight, "max-udp-in-flight", dnsserver.DefaultMaxUDPInFlight, "UDP queries answered at once; further datagrams are dropped and counted")
	fs.IntVar(&f.maxTCPConns, "max-tcp-conns", dnsserver.DefaultMaxTCPConns, "open TCP connections; further ones are closed at once and counted")
	fs.StringVar(&f.config, "config", "", "ServerConfiguration `FILE` (api/v1alpha1); flags given override it; reloaded when it changes, but for the fields that need a restart: mode, listen, reusePort, metricsListen, clusterDomain, logFormat, kubeconfig, objects, limits and nodeLocal (logged when changed)")
	fs.Var(&f.forward, "forward", "forward names under `ZONE=ADDR[,ADDR...]` to these upstreams (stub domains; \".\" is the default route); repeatable")
	fs.IntVar(&f.maxConcurrent, "max-concurrent", forward.DefaultMaxConcurrent, "forwarded queries in flight at once; beyond, SERVFAIL at once (counted)")
	fs.BoolVar(&f.reusePort, "reuse-port", false, "bind the listen addresses with SO_REUSEPORT, so that a new instance serves them before the old one stops (every instance must set it)")
	fs.StringVar(&f.hosts, "hosts", "", "answer the names of this /etc/hosts-format `FILE` (watched) before forwarding")
	f.registerNodeLocal(fs)
}

// registerNodeLocal defines the transparent-mode flags of --mode node-local
// (node-cache's names).
func (f *serveFlags) registerNodeLocal(fs *flag.FlagSet) {
	fs.Var(&f.localIPs, "local-ip", "node-local mode: also serve port 53 of these `IP`s (169.254.20.10 and, in transparent mode, the cluster DNS Service IP); comma-separated or repeated")
	fs.BoolVar(&f.setupInterface, "setup-interface", false, "node-local mode: put the --local-ip addresses on --interface-name (a dummy device, or lo without the dummy type) and remove them on exit")
	fs.StringVar(&f.interfaceName, "interface-name", v1alpha1.DefaultNodeLocalInterface, "node-local mode: the interface of --setup-interface")
	fs.BoolVar(&f.setupNotrack, "setup-notrack", false, "node-local mode: once serving, add an nftables table that takes DNS to and from the --local-ip addresses out of connection tracking (so kube-proxy's DNAT of the Service IP does not apply); removed on exit")
	fs.BoolVar(&f.setupNotrack, "setup-iptables", false, "node-local mode: node-cache's name of --setup-notrack")
	fs.BoolVar(&f.skipTeardown, "skip-teardown", false, "node-local mode: leave the addresses and the notrack table in place on exit")
	fs.StringVar(&f.lockFile, "lock-file", v1alpha1.DefaultNodeLocalLockFile, "node-local mode: the lock shared by the instances on the node; an instance stopping while another runs leaves the setup to it")
}

// check validates the parsed flags, naming the flag at fault; it turns
// --autopath-by-source into --pods verified.
func (f *serveFlags) check() error {
	if err := f.log.check(); err != nil {
		return err
	}
	if len(f.listen) == 0 && len(f.localIPs) == 0 && f.config == "" {
		return errors.New("--listen (or, in node-local mode, --local-ip) is required")
	}
	for _, l := range f.listen {
		if _, _, err := net.SplitHostPort(l); err != nil {
			return fmt.Errorf("--listen %q: %w", l, err)
		}
	}
	if f.objects != "" && f.kubeconfig != "" {
		return errors.New("--objects and --kubeconfig are exclusive")
	}
	if len(f.upstream) > 0 && f.upstreamResolvConf != "" {
		return errors.New("--upstream and --upstream-resolv-conf are exclusive")
	}
	if f.ttl > store.MaxTTL {
		return fmt.Errorf("--ttl %d: above %d", f.ttl, store.MaxTTL)
	}
	switch f.mode {
	case "cluster":
		if len(f.clusterUpstream) > 0 || len(f.localIPs) > 0 || f.setupInterface || f.setupNotrack {
			return errors.New("--cluster-upstream, --local-ip, --setup-interface and --setup-notrack are for --mode node-local")
		}
	case "node-local":
		if f.objects != "" || f.kubeconfig != "" || len(f.upstream) > 0 || f.upstreamResolvConf != "" {
			return errors.New("--mode node-local takes --cluster-upstream, not --objects, --kubeconfig, --upstream or --upstream-resolv-conf")
		}
	default:
		return fmt.Errorf("--mode %q: must be cluster or node-local", f.mode)
	}
	if f.autopathSource {
		if !f.autopath {
			return errors.New("--autopath-by-source needs --autopath")
		}
		f.pods = "verified"
	}
	if err := autopath.CheckOptionCode(f.autopathCode); err != nil {
		return fmt.Errorf("--autopath-option-code: %w", err)
	}
	if err := f.checkCache(); err != nil {
		return err
	}
	if f.lameduck < 0 || f.lameduck > time.Minute {
		return fmt.Errorf("--lameduck %v: must be between 0s and 1m", f.lameduck)
	}
	if f.maxUDPInFlight < 1 || f.maxTCPConns < 1 {
		return errors.New("--max-udp-in-flight and --max-tcp-conns must be at least 1")
	}
	for _, z := range f.reverseZones {
		if _, err := netip.ParsePrefix(z); err != nil {
			return fmt.Errorf("--reverse-zones %q: %w", z, err)
		}
	}
	return nil
}

// dnsServer is the listener of either mode, with cfg's limits.
func dnsServer(cfg *v1alpha1.ServerConfiguration, h dns.Handler, log *slog.Logger) *dnsserver.Server {
	srv := &dnsserver.Server{Listen: cfg.ListenAddrs(), Handler: h, Logger: log, Lameduck: cfg.Lameduck.Duration(), ReusePort: cfg.ReusePort,
		MaxUDPInFlight: cfg.Limits.UDPInFlight, MaxTCPConns: cfg.Limits.TCPConnections,
		TCPIdleTimeout: cfg.Limits.TCPIdleTimeout.Duration(), TCPWriteTimeout: cfg.Limits.TCPWriteTimeout.Duration(),
		Zones: metricZones(cfg), Name: "cluster"}
	if cfg.Mode == v1alpha1.ModeNodeLocal {
		srv.Name = "nodelocal"
	}
	srv.SetHandler(queryLog(cfg, h, log))
	return srv
}

// metricZones are the zones the request metrics are labelled with (both
// modes): the cluster domain, the autopath and reverse zones (node-cache's
// server blocks) and, in cluster mode, the zones of the forward routes
// (stub domains) as the file starts with; every other name is ".".
func metricZones(cfg *v1alpha1.ServerConfiguration) []string {
	zones := append([]string{cfg.ClusterDomain}, clusterZones...)
	if cfg.Mode != v1alpha1.ModeNodeLocal {
		for _, r := range cfg.Forward {
			zones = append(zones, r.ZoneName())
		}
	}
	return zones
}

// queryLog is h, logging every query when cfg asks.
func queryLog(cfg *v1alpha1.ServerConfiguration, h dns.Handler, log *slog.Logger) dns.Handler {
	if cfg.LogQueries {
		return dnsserver.LogQueries(h, log)
	}
	return h
}

// watchedUpstreams serves the nameservers of a watched resolv.conf as
// upstreams.
type watchedUpstreams struct{ w *hostresolv.Watcher }

func (u watchedUpstreams) Upstreams() []string { return u.w.Current().Raw.Nameservers }

// gcPercent is the GOGC of serve unless the GOGC variable is set.
const gcPercent = 50

func runServe(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) int {
	f, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitCode(stderr, "dnsconfigurer serve", usageError{err})
	}
	cfg, err := f.serverConfig()
	if err != nil {
		return exitCode(stderr, "dnsconfigurer serve", err)
	}
	level := new(slog.LevelVar) // logLevel is reloaded
	lv, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return exitCode(stderr, "dnsconfigurer serve", err)
	}
	level.Set(lv)
	log, err := newLeveledLogger(stderr, cfg.LogFormat, level)
	if err != nil {
		return exitCode(stderr, "dnsconfigurer serve", err)
	}
	if os.Getenv("GOGC") == "" {
		// The live heap is mostly the long-lived record index and a query
		// makes little garbage (replies come from the packed-reply cache):
		// a low GC target keeps RSS near the live heap for little GC CPU.
		debug.SetGCPercent(gcPercent)
	}
	log = log.With("component", "dnsserver")
	logStart(log, "serve")
	if cfg.Mode == v1alpha1.ModeNodeLocal {
		return exitCode(stderr, "dnsconfigurer serve", runNodeLocal(ctx, cfg, log, newRegistry()))
	}
	return exitCode(stderr, "dnsconfigurer serve", runClusterDNS(ctx, f, cfg, log, level, newRegistry()))
}

// runClusterDNS is `serve --mode cluster`: the record store, its feed, the
// answer stack and the DNS server, until ctx is done or a part fails; with
// --config, the file is watched and a change is applied (reloader).
func runClusterDNS(ctx context.Context, f *serveFlags, cfg *v1alpha1.ServerConfiguration, log *slog.Logger, level *slog.LevelVar, reg *prometheus.Registry) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts, err := storeOptions(cfg)
	if err != nil {
		return err
	}
	st, err := store.New(opts)
	if err != nil {
		return usagef("--cluster-domain %q: %v", cfg.ClusterDomain, err)
	}
	if err := clusterdns.RegisterRecordMetrics(reg, st); err != nil {
		return err
	}
	stack, err := buildStack(ctx, cfg, st, log, nil)
	if err != nil {
		return err
	}
	defer func() { stack.stop() }()
	records, err := newRecordFeed(cfg, st, log)
	if err != nil {
		return err
	}
	// With manifests the records are loaded: compile them now, then give
	// the loading garbage and the start-up pages of the binary back to the
	// OS rather than carry them as RSS.
	stack.handler.Warm()
	debug.FreeOSMemory()
	releaseStartupPages()
	srv := dnsServer(cfg, stack.handler, log.With("zone", st.Zone()))
	gather := &stackGatherer{main: reg}
	gather.cur.Store(stack)
	if err := reg.Register(srv); err != nil {
		return err
	}
	synced := func() bool { return st.Snapshot() != nil }
	ops, err := opsTasks(cfg.MetricsListen, cfg.ReusePort, gather, log, health.Condition(synced, "not synced"),
		health.Condition(srv.Ready, "lameduck"))
	if err != nil {
		return err
	}
	tasks := append(ops, records.run)
	if f.config != "" {
		r := &reloader{f: f, running: cfg, st: st, records: records, srv: srv, gather: gather, log: log, level: level, stack: &stack}
		if err := reg.Register(r); err != nil {
			return err
		}
		tasks = append(tasks, r.run)
	}
	// Stopped in reverse: the server's lameduck runs while the feed and
	// /readyz still do.
	return runTasks(ctx, append(tasks, srv.Run, releaseAfterSync(synced))...)
}

// storeOptions are the record options of cfg (the store's, changed by a
// reload).
func storeOptions(cfg *v1alpha1.ServerConfiguration) (store.Options, error) {
	podMode, err := store.ParsePodMode(cfg.Pods)
	if err != nil {
		return store.Options{}, usagef("pods: %v", err)
	}
	return store.Options{
		Zone: cfg.ClusterDomain, TTL: cfg.RecordTTL(), Pods: podMode, Namespaces: cfg.Namespaces,
		IgnoreEmptyService: cfg.IgnoreEmptyService, EndpointPodNames: cfg.EndpointPodNames, NoEndpoints: cfg.NoEndpoints,
	}, nil
}

// recordFeed fills the store: from the manifests of objects (loaded now,
// then watched), or from the cluster's API server, whose informers watch
// pods only with pods: verified and endpoints only without noEndpoints. A
// reload that changes either starts the informers again (rewatch).
type recordFeed struct {
	st        *store.Store
	log       *slog.Logger
	manifests *feed.Manifests      // or
	client    kubernetes.Interface // the API server's

	watching feedWatch      // the reloader's: what the feed watches
	rewatch  chan feedWatch // to run: watch this instead

	mu     sync.Mutex
	synced bool // the running feed has published its records
}

// feedWatch is what the cluster feed watches besides Services and
// Namespaces.
type feedWatch struct{ pods, endpoints bool }

func watchOf(cfg *v1alpha1.ServerConfiguration) feedWatch {
	return feedWatch{pods: cfg.Pods == v1alpha1.PodsVerified, endpoints: !cfg.NoEndpoints}
}

// newRecordFeed is the feed of cfg's record source.
func newRecordFeed(cfg *v1alpha1.ServerConfiguration, st *store.Store, log *slog.Logger) (*recordFeed, error) {
	r := &recordFeed{st: st, log: log, watching: watchOf(cfg), rewatch: make(chan feedWatch, 1)}
	if cfg.Objects != "" {
		r.manifests = &feed.Manifests{Path: cfg.Objects, Store: st, Logger: log}
		if err := r.manifests.Load(); err != nil {
			return nil, usagef("--objects: %v", err)
		}
		r.synced = true
		return r, nil
	}
	klog.SetSlogLogger(log.With("component", "client-go"))
	client, err := kubeClient(cfg.Kubeconfig, "serve")
	if err != nil {
		return nil, usageError{err}
	}
	if client == nil {
		return nil, usagef("no records to serve: give --kubeconfig or --objects, set $KUBECONFIG, or run in a pod (the in-cluster config)")
	}
	r.client = client
	return r, nil
}

// run feeds the store until ctx is done. The cluster feed is started again
// from an empty store when rewatch says so; the snapshot published before
// keeps answering until the new informers have synced and published.
func (r *recordFeed) run(ctx context.Context) error {
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
		c := &feed.Cluster{Client: r.client, Store: syncedStore{r.st, r}, Logger: r.log, Pods: w.pods, NoEndpoints: !w.endpoints}
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
			r.log.Info("watching the API server again", "pods", w.pods, "endpoints", w.endpoints)
		}
	}
}

// apply makes the store's records follow cfg's options (a reload): the
// cluster feed starts again when what it must watch changed, and publishes
// once synced; otherwise the records are published again now (once the
// feed has published them: before, there is nothing to serve yet).
func (r *recordFeed) apply(cfg *v1alpha1.ServerConfiguration) error {
	opts, err := storeOptions(cfg)
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
	feed *recordFeed
}

func (s syncedStore) Publish() *store.Snapshot {
	snap := s.Store.Publish()
	s.feed.mu.Lock()
	s.feed.synced = true
	s.feed.mu.Unlock()
	return snap
}

// releaseAfterSync gives back the pages start-up touched once more: the
// feed's first steps (the informers' initial list, the watcher) run after
// the listeners, so it waits for the first sync and a second more.
func releaseAfterSync(synced func() bool) task {
	return func(ctx context.Context) error {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for !synced() {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			releaseStartupPages()
		}
		return nil
	}
}
