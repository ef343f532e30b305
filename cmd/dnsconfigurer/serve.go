package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/feed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodelocal"
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
	logLevel           string

	mode            string
	autopath        bool
	autopathSource  bool
	autopathCode    uint
	clusterUpstream listFlag
	resolvConf      string
	maxTTL          time.Duration
	maxNegativeTTL  time.Duration
	cacheSize       int
	cacheBytes      int64
}

func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dnsconfigurer serve --listen ADDR [--listen ADDR...] [--cluster-domain cluster.local]\n"+
			"    [--objects PATH | --kubeconfig PATH] [--pods verified|insecure|disabled] [--ttl N]\n"+
			"    [--upstream ADDR[,ADDR...] | --upstream-resolv-conf PATH] [--metrics-listen ADDR]\n\nflags:")
		fs.PrintDefaults()
	}
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
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
	fs.StringVar(&f.clusterDomain, "cluster-domain", "cluster.local", "the cluster `zone`")
	fs.StringVar(&f.objects, "objects", "", "serve the Services, EndpointSlices, Pods and Namespaces of this manifest file or directory (watched)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "watch the cluster of this kubeconfig (default with neither: the in-cluster config)")
	fs.StringVar(&f.pods, "pods", "disabled", "pod records <a-b-c-d>.<ns>.pod.<zone>: verified, insecure or disabled")
	fs.UintVar(&f.ttl, "ttl", 5, "TTL of the records and of negative answers, 0-3600")
	fs.Var(&f.upstream, "upstream", "forward names outside the cluster zone to these `ADDR`s (ip or ip:port); repeatable or comma-separated")
	fs.StringVar(&f.upstreamResolvConf, "upstream-resolv-conf", "", "forward to the nameservers of this resolv.conf (watched; the last good file is kept)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this `ADDR`")
	fs.Var(&f.namespaces, "namespaces", "only serve these namespaces (comma-separated or repeated)")
	fs.BoolVar(&f.ignoreEmptyService, "ignore-empty-service", false, "answer NXDOMAIN for Services without a ready endpoint")
	fs.BoolVar(&f.endpointPodNames, "endpoint-pod-names", false, "name endpoints without a hostname after their pod instead of their dashed IP")
	fs.BoolVar(&f.noEndpoints, "no-endpoints", false, "serve no endpoint records (headless Services and endpoint names are NXDOMAIN)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.mode, "mode", "cluster", "cluster (the cluster DNS) or node-local (a caching forwarder to --cluster-upstream that adds the autopath option)")
	fs.BoolVar(&f.autopath, "autopath", true, "cluster mode: answer <name>.search.<ns>.<zone>.ap.k8s.io by server-side search expansion")
	fs.BoolVar(&f.autopathSource, "autopath-by-source", false, "cluster mode: also expand plain queries from known pod IPs with that pod's namespace search list (implies --pods verified)")
	fs.UintVar(&f.autopathCode, "autopath-option-code", autopath.DefaultOptionCode, "EDNS0 local option code carrying the autopath search list")
	fs.Var(&f.clusterUpstream, "cluster-upstream", "node-local mode: the cluster DNS `ADDR`s (ip or ip:port)")
	fs.StringVar(&f.resolvConf, "resolv-conf", "/etc/resolv.conf", "node-local mode: the node's resolv.conf whose search domains end autopath search lists (watched; \"\" for none)")
	fs.DurationVar(&f.maxTTL, "max-ttl", 30*time.Second, "node-local mode: longest time a positive answer is cached")
	fs.DurationVar(&f.maxNegativeTTL, "max-negative-ttl", 5*time.Second, "node-local mode: longest time NXDOMAIN/NODATA is cached")
	fs.IntVar(&f.cacheSize, "cache-size", 10000, "node-local mode: most answers cached")
	fs.Int64Var(&f.cacheBytes, "cache-bytes", nodelocal.DefaultCacheBytes, "node-local mode: most bytes of answers cached (counted with their overhead)")
}

// check validates the parsed flags, naming the flag at fault; it turns
// --autopath-by-source into --pods verified.
func (f *serveFlags) check() error {
	if len(f.listen) == 0 {
		return errors.New("--listen is required")
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
		if len(f.clusterUpstream) > 0 {
			return errors.New("--cluster-upstream is for --mode node-local")
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
	if f.cacheBytes <= 0 {
		return fmt.Errorf("--cache-bytes %d: must be positive", f.cacheBytes)
	}
	return nil
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
	log, err := newLogger(stderr, f.logLevel)
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
	if f.mode == "node-local" {
		return exitCode(stderr, "dnsconfigurer serve", runNodeLocal(ctx, f, log, newRegistry()))
	}
	return exitCode(stderr, "dnsconfigurer serve", runClusterDNS(ctx, f, log, newRegistry()))
}

// runClusterDNS is `serve --mode cluster`: the record store, its feed, the
// handler and the DNS server, until ctx is done or a part fails.
func runClusterDNS(ctx context.Context, f *serveFlags, log *slog.Logger, reg *prometheus.Registry) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	podMode, err := store.ParsePodMode(f.pods)
	if err != nil {
		return usagef("--pods: %v", err)
	}
	st, err := store.New(store.Options{
		Zone: f.clusterDomain, TTL: uint32(f.ttl), Pods: podMode, Namespaces: f.namespaces,
		IgnoreEmptyService: f.ignoreEmptyService, EndpointPodNames: f.endpointPodNames, NoEndpoints: f.noEndpoints,
	})
	if err != nil {
		return usagef("--cluster-domain %q: %v", f.clusterDomain, err)
	}
	metrics, err := dnsserver.NewMetrics(reg, st)
	if err != nil {
		return err
	}
	source, stop, err := upstreamSource(ctx, f, log, reg)
	if err != nil {
		return err
	}
	defer stop()
	handler, err := clusterHandler(f, st, metrics, source, reg, log)
	if err != nil {
		return err
	}
	feedRun, err := recordFeed(f, st, podMode, log)
	if err != nil {
		return err
	}
	// With manifests the records are loaded: compile them now, then give
	// the loading garbage and the start-up pages of the binary back to the
	// OS rather than carry them as RSS.
	handler.Warm()
	debug.FreeOSMemory()
	releaseStartupPages()
	srv := &dnsserver.Server{Listen: f.listen, Handler: handler,
		Logger: log.With("zone", st.Zone(), "pods", podMode.String(), "ttl", f.ttl)}
	ops, err := opsTasks(f.metricsListen, reg, log, health.Condition(handler.Synced, "not synced"))
	if err != nil {
		return err
	}
	feedTask := func(ctx context.Context) error {
		if err := feedRun(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("record feed stopped: %w", err)
		}
		return nil
	}
	return runTasks(ctx, append(ops, srv.Run, feedTask, releaseAfterSync(handler.Synced))...)
}

// upstreamSource is where names outside the zone are forwarded: --upstream,
// or the nameservers of the watched --upstream-resolv-conf (nil: no
// forwarding). stop ends the watcher and waits for it.
func upstreamSource(ctx context.Context, f *serveFlags, log *slog.Logger, reg prometheus.Registerer) (dnsserver.UpstreamSource, func(), error) {
	switch {
	case len(f.upstream) > 0:
		return dnsserver.StaticUpstreams(f.upstream), func() {}, nil
	case f.upstreamResolvConf == "":
		return nil, func() {}, nil
	}
	// The node resolver config, watched (fsnotify; the last good file is
	// kept while the file is broken). Raw keeps loopback nameservers: the
	// Forwarder drops only our own addresses.
	wctx, cancel := context.WithCancel(ctx)
	w, err := hostresolv.Watch(wctx, f.upstreamResolvConf, hostresolv.WithLogger(log), hostresolv.WithRegistry(reg))
	if err != nil {
		cancel()
		return nil, nil, usagef("--upstream-resolv-conf: %v", err)
	}
	stop := func() { cancel(); <-w.Done() }
	if snap := w.Current(); snap.Err != nil {
		stop()
		return nil, nil, usagef("--upstream-resolv-conf %q: %v", f.upstreamResolvConf, snap.Err)
	}
	return watchedUpstreams{w}, stop, nil
}

// clusterHandler is the cluster DNS handler with autopath and forwarding as
// the flags ask.
func clusterHandler(f *serveFlags, st *store.Store, metrics *dnsserver.Metrics, source dnsserver.UpstreamSource, reg prometheus.Registerer, log *slog.Logger) (*dnsserver.Handler, error) {
	opts := []dnsserver.Option{dnsserver.WithLogger(log), dnsserver.WithMetrics(metrics)}
	if f.autopath {
		ap, err := dnsserver.WithAutopath(uint16(f.autopathCode), reg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, ap)
		if f.autopathSource {
			opts = append(opts, dnsserver.WithAutopathBySource())
		}
	}
	if source != nil {
		fwd, err := dnsserver.NewForwarder(source, f.listen, 2*time.Second, metrics)
		if err != nil {
			return nil, usagef("--upstream: %v", err)
		}
		for _, u := range source.Upstreams() {
			if _, err := dnsserver.ParseAddrPort(u); err != nil {
				return nil, usagef("upstream %q: %v", u, err)
			}
		}
		if err := reg.Register(fwd); err != nil {
			return nil, err
		}
		if len(fwd.Upstreams()) == 0 {
			log.Warn("no usable upstream: every upstream is one of the listen addresses", "upstreams", source.Upstreams())
		}
		opts = append(opts, dnsserver.WithForwarder(fwd))
	}
	return dnsserver.NewHandler(f.clusterDomain, st, opts...), nil
}

// recordFeed is what fills the store: the --objects manifests (loaded now,
// then watched) or the cluster's API server.
func recordFeed(f *serveFlags, st *store.Store, podMode store.PodMode, log *slog.Logger) (func(context.Context) error, error) {
	if f.objects != "" {
		m := &feed.Manifests{Path: f.objects, Store: st, Logger: log}
		if err := m.Load(); err != nil {
			return nil, usagef("--objects: %v", err)
		}
		return m.Run, nil
	}
	klog.SetSlogLogger(log.With("component", "client-go"))
	client, err := feed.NewClient(f.kubeconfig)
	if err != nil {
		return nil, usageError{err}
	}
	c := &feed.Cluster{Client: client, Store: st, Logger: log,
		Pods: podMode == store.PodsVerified, NoEndpoints: f.noEndpoints}
	return c.Run, nil
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
