package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodelocal"
)

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
	fs.StringVar(&f.pods, "pods", v1alpha1.DefaultPodRecords, "pod records <a-b-c-d>.<ns>.pod.<zone>: verified, insecure or disabled")
	fs.UintVar(&f.ttl, "ttl", v1alpha1.DefaultRecordTTL, "TTL of the records and of negative answers, 0-3600")
	fs.Var(&f.upstream, "upstream", "forward names outside the cluster zone to these `ADDR`s (ip or ip:port); repeatable or comma-separated")
	fs.StringVar(&f.upstreamResolvConf, "upstream-resolv-conf", "", "forward to the nameservers of this resolv.conf (watched; the last good file is kept)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this `ADDR`")
	fs.Var(&f.namespaces, "namespaces", "only serve these namespaces (comma-separated or repeated)")
	fs.BoolVar(&f.ignoreEmptyService, "ignore-empty-service", false, "answer NXDOMAIN for Services without a ready endpoint")
	fs.BoolVar(&f.endpointPodNames, "endpoint-pod-names", false, "name endpoints without a hostname after their pod instead of their dashed IP")
	fs.BoolVar(&f.noEndpoints, "no-endpoints", false, "serve no endpoint records (headless Services and endpoint names are NXDOMAIN)")
	f.log.register(fs, logText)
	fs.StringVar(&f.mode, "mode", v1alpha1.DefaultServerMode, "cluster (the cluster DNS) or node-local (a caching forwarder to --cluster-upstream that adds the autopath option)")
	fs.BoolVar(&f.autopath, "autopath", v1alpha1.DefaultAutopath, "cluster mode: answer <name>.search.<ns>.<zone>.ap.k8s.io by server-side search expansion")
	fs.BoolVar(&f.autopathSource, "autopath-by-source", false, "cluster mode: also expand plain queries from known pod IPs with that pod's namespace search list (implies --pods verified)")
	fs.UintVar(&f.autopathCode, "autopath-option-code", v1alpha1.DefaultOptionCode, "EDNS0 local option code carrying the autopath search list")
	fs.IntVar(&f.topNamespaces, "namespace-metrics", v1alpha1.DefaultNamespaceMetrics, "cluster mode: the busiest `N` namespaces (0-1000) get series of their own in the search-list amplification metrics dnsconfigurer_dnsserver_namespace_*{namespace}, the others are \"other\" (docs/amplification.md); 0: off")
	fs.Var(&f.clusterUpstream, "cluster-upstream", "node-local mode: the cluster DNS `ADDR`s (ip or ip:port), asked over TCP for cluster names: a Service of the cluster DNS pods of its own, not the Service IP node-local takes over")
	fs.StringVar(&f.resolvConf, "resolv-conf", v1alpha1.DefaultNodeLocalResolvConf, "node-local mode: the node's resolv.conf (watched; auto: systemd-resolved's when it runs): its nameservers answer names outside the cluster, its search domains end autopath search lists; \"\" for none (every name to --cluster-upstream)")
	fs.DurationVar(&f.maxTTL, "max-ttl", v1alpha1.DefaultMaxTTL.Duration(), "longest time a positive forwarded answer is cached")
	fs.DurationVar(&f.maxNegativeTTL, "max-negative-ttl", v1alpha1.DefaultMaxNegativeTTL.Duration(), "longest time a forwarded NXDOMAIN/NODATA is cached")
	f.cacheSize = byteSize(v1alpha1.DefaultSuccessBytes.Bytes() + v1alpha1.DefaultDenialBytes.Bytes())
	fs.Var(&f.cacheSize, "cache-size", "`BYTES` of forwarded answers cached, counted with their overhead (e.g. 32Mi; 4/5 for answers, 1/5 for denials)")
	fs.Var(&f.cacheSize, "cache-bytes", "old name of --cache-size")
	f.zoneCacheSize = byteSize(v1alpha1.DefaultZoneBytes.Bytes())
	fs.Var(&f.zoneCacheSize, "zone-cache-size", "cluster mode: `BYTES` of packed replies made from the cluster zone kept per snapshot (e.g. 16Mi, at least 1Mi; about 250 bytes a reply)")
	fs.DurationVar(&f.serveStale, "serve-stale", v1alpha1.DefaultServeStale.Duration(), "when every upstream fails, serve an expired answer up to this long past its expiry, with TTL 30 (RFC 8767; 0: off)")
	fs.IntVar(&f.prefetch, "prefetch", v1alpha1.DefaultPrefetchAmount, "refresh an answer asked `N` times within a minute before it expires (0: off)")
	fs.BoolVar(&f.loadbalance, "loadbalance", v1alpha1.DefaultLoadbalance, "rotate A, AAAA and same-priority SRV records in every answer (CoreDNS's loadbalance)")
	fs.Var(&f.reverseZones, "reverse-zones", "answer the reverse names of these `CIDR`s authoritatively (the Service and Pod CIDRs): unknown ones are NXDOMAIN with the zone's SOA, not forwarded")
	fs.DurationVar(&f.lameduck, "lameduck", v1alpha1.DefaultLameduck.Duration(), "on SIGTERM keep answering this long with /readyz failing, then stop")
	fs.BoolVar(&f.logQueries, "log-queries", false, "log every query (client, name, type, rcode, duration); for debugging")
	fs.IntVar(&f.maxUDPInFlight, "max-udp-in-flight", v1alpha1.DefaultUDPInFlight, "UDP queries answered at once; further datagrams are dropped and counted")
	fs.IntVar(&f.maxTCPConns, "max-tcp-conns", v1alpha1.DefaultTCPConnections, "open TCP connections; further ones are closed at once and counted")
	fs.StringVar(&f.config, "config", "", "ServerConfiguration `FILE` (api/v1alpha1); flags given override it; reloaded when it changes, but for the fields that need a restart: mode, listen, reusePort, metricsListen, clusterDomain, logFormat, kubeconfig, objects, limits and nodeLocal (logged when changed)")
	fs.Var(&f.forward, "forward", "forward names under `ZONE=ADDR[,ADDR...]` to these upstreams (stub domains; \".\" is the default route); repeatable")
	fs.IntVar(&f.maxConcurrent, "max-concurrent", v1alpha1.DefaultMaxConcurrent, "forwarded queries in flight at once; beyond, SERVFAIL at once (counted)")
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

// check rejects what the configuration cannot see: the log flags every
// long-running command checks alike, two flags for one field, and a 0 the
// configuration would read as "unset". Validate checks everything else.
func (f *serveFlags) check() error {
	if err := f.log.check(); err != nil {
		return err
	}
	if len(f.upstream) > 0 && f.upstreamResolvConf != "" {
		return errors.New("--upstream and --upstream-resolv-conf are exclusive")
	}
	for _, fl := range []struct {
		name string
		zero bool
	}{{"autopath-option-code", f.autopathCode == 0}, {"max-udp-in-flight", f.maxUDPInFlight == 0}, {"max-tcp-conns", f.maxTCPConns == 0}} {
		if fl.zero {
			return fmt.Errorf("--%s 0: must be at least 1", fl.name)
		}
	}
	return f.checkCache()
}

// reloadInterval is how often serve --config reads the file (0: the
// component's default); tests shorten it.
var reloadInterval time.Duration

// gcPercent is the GOGC of serve unless the GOGC variable is set: the live
// heap is mostly the long-lived record index and a query makes little
// garbage, so a low GC target keeps RSS near the live heap for little GC
// CPU.
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
		debug.SetGCPercent(gcPercent)
	}
	log = log.With("component", "dnsserver")
	logStart(log, "serve")
	err = f.run(ctx, cfg, log, level)
	if errors.Is(err, v1alpha1.ErrConfig) {
		err = usageError{err}
	}
	return exitCode(stderr, "dnsconfigurer serve", err)
}

// run runs the component of cfg's mode: the node-local stage, or the
// cluster DNS with its record source and, with --config, its reload.
func (f *serveFlags) run(ctx context.Context, cfg *v1alpha1.ServerConfiguration, log *slog.Logger, level *slog.LevelVar) error {
	if cfg.Mode == v1alpha1.ModeNodeLocal {
		stage, err := nodelocal.NewStage(cfg, nodelocal.Deps{Logger: log, Registry: newRegistry()})
		if err != nil {
			return err
		}
		return stage.Run(ctx)
	}
	deps := clusterdns.Deps{Logger: log, Registry: newRegistry()}
	if cfg.Objects == "" {
		klog.SetSlogLogger(log.With("component", "client-go"))
		client, err := kubeClient(cfg.Kubeconfig, "serve")
		if err != nil {
			return usageError{err}
		}
		if client == nil {
			return usagef("no records to serve: give --kubeconfig or --objects, set $KUBECONFIG, or run in a pod (the in-cluster config)")
		}
		deps.Client = client
	}
	if f.config != "" {
		deps.Reload = &clusterdns.Reload{Path: f.config, Load: f.serverConfig, Interval: reloadInterval,
			SetLogLevel: func(l string) error {
				lv, err := parseLevel(l)
				if err == nil {
					level.Set(lv)
				}
				return err
			}}
	}
	srv, err := clusterdns.New(cfg, deps)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
