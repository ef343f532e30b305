package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// routeFlag is --forward ZONE=ADDR[,ADDR...], repeatable.
type routeFlag []v1alpha1.ForwardRoute

func (r *routeFlag) String() string {
	var parts []string
	for _, rt := range *r {
		parts = append(parts, rt.Zone+"="+strings.Join(rt.Upstreams, ","))
	}
	return strings.Join(parts, " ")
}

func (r *routeFlag) Set(v string) error {
	zone, addrs, ok := strings.Cut(v, "=")
	if !ok || zone == "" || addrs == "" {
		return fmt.Errorf("%q: want ZONE=ADDR[,ADDR...], e.g. .=10.0.0.2 or corp.example=10.1.0.53:53", v)
	}
	if _, ok := dns.IsDomainName(zone); !ok {
		return fmt.Errorf("%q: zone %q is not a domain name", v, zone)
	}
	var ups listFlag
	_ = ups.Set(addrs)
	for _, u := range ups {
		if strings.HasPrefix(u, "/") || strings.HasPrefix(u, "$(") {
			// A resolv.conf whose nameservers are the upstreams; an
			// unexpanded variable, which validation explains.
			continue
		}
		if _, err := forward.ParseAddrPort(u); err != nil {
			return fmt.Errorf("%q: upstream %q is not an address such as 10.0.0.53, 10.0.0.53:53 or [fd00::53]:53, nor a resolv.conf path", v, u)
		}
	}
	*r = append(*r, v1alpha1.ForwardRoute{Zone: zone, Upstreams: ups})
	return nil
}

// serverConfig is the configuration serve runs: the --config file (when
// given), then every flag set on the command line over it, then defaults;
// validated, with errors naming the field. It is called again on every
// reload of the file, with the same flags.
func (f *serveFlags) serverConfig() (*v1alpha1.ServerConfiguration, error) {
	cfg := &v1alpha1.ServerConfiguration{}
	if f.config != "" {
		c, err := loadServerConfig(f.config)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	if f.set["cluster-domain"] && f.clusterDomain == "" {
		// The agents' "" is no cluster domain; a DNS server needs its zone.
		return nil, usagef("--cluster-domain: empty: serve needs the cluster zone (default %q)", v1alpha1.DefaultServerClusterDomain)
	}
	f.applyFlags(cfg)
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, usageError{err}
	}
	if err := cfg.CheckComplete(); err != nil {
		return nil, usageError{err}
	}
	return cfg, nil
}

// applyFlags copies the flags set on the command line into cfg.
func (f *serveFlags) applyFlags(cfg *v1alpha1.ServerConfiguration) {
	set := func(name string) bool { return f.set[name] }
	if set("mode") {
		cfg.Mode = f.mode
	}
	if set("listen") {
		cfg.Listen = f.listen
	}
	if set("cluster-domain") {
		cfg.ClusterDomain = f.clusterDomain
	}
	if set("metrics-listen") {
		cfg.MetricsListen = f.metricsListen
	}
	if set("log-level") {
		cfg.LogLevel = f.log.level
	}
	if set("log-format") {
		cfg.LogFormat = f.log.format
	}
	if set("log-queries") {
		cfg.LogQueries = f.logQueries
	}
	f.applySourceFlags(cfg)
	f.applyForwardFlags(cfg)
	f.applyCacheFlags(cfg)
	if set("loadbalance") {
		cfg.Loadbalance = &f.loadbalance
	}
	if set("hosts") {
		cfg.Hosts.File = f.hosts
	}
	if set("reverse-zones") {
		cfg.ReverseZones = f.reverseZones
	}
	if set("lameduck") {
		cfg.Lameduck = v1alpha1.Duration(f.lameduck.String())
	}
	if set("reuse-port") {
		cfg.ReusePort = f.reusePort
	}
	if set("max-udp-in-flight") {
		cfg.Limits.UDPInFlight = f.maxUDPInFlight
	}
	if set("max-tcp-conns") {
		cfg.Limits.TCPConnections = f.maxTCPConns
	}
}

// applySourceFlags copies the record-source flags.
func (f *serveFlags) applySourceFlags(cfg *v1alpha1.ServerConfiguration) {
	set := func(name string) bool { return f.set[name] }
	if set("kubeconfig") {
		cfg.Kubeconfig = f.kubeconfig
	}
	if set("objects") {
		cfg.Objects = f.objects
	}
	if set("namespaces") {
		cfg.Namespaces = f.namespaces
	}
	switch {
	case f.autopathSource: // implies verified pods
		cfg.Pods = v1alpha1.PodsVerified
	case set("pods"):
		cfg.Pods = f.pods
	}
	if set("ttl") {
		ttl := int(f.ttl)
		cfg.TTL = &ttl
	}
	if set("ignore-empty-service") {
		cfg.IgnoreEmptyService = f.ignoreEmptyService
	}
	if set("endpoint-pod-names") {
		cfg.EndpointPodNames = f.endpointPodNames
	}
	if set("no-endpoints") {
		cfg.NoEndpoints = f.noEndpoints
	}
	if set("autopath") {
		cfg.Autopath = &f.autopath
	}
	if set("autopath-by-source") {
		cfg.AutopathBySource = f.autopathSource
	}
	if set("autopath-option-code") {
		cfg.AutopathOptionCode = int(f.autopathCode)
	}
	if set("namespace-metrics") {
		cfg.NamespaceMetrics = &f.topNamespaces
	}
}

// applyForwardFlags: --upstream and --upstream-resolv-conf are the default
// route ("."), --forward adds routes (replacing the file's routes of the
// same zones), --max-concurrent; node-local's --cluster-upstream and
// --resolv-conf.
func (f *serveFlags) applyForwardFlags(cfg *v1alpha1.ServerConfiguration) {
	set := func(name string) bool { return f.set[name] }
	var routes []v1alpha1.ForwardRoute
	switch {
	case set("upstream"):
		routes = append(routes, v1alpha1.ForwardRoute{Zone: ".", Upstreams: f.upstream})
	case set("upstream-resolv-conf"):
		// A route names a file by an absolute path; the flag is a path.
		path := f.upstreamResolvConf
		if abs, err := filepath.Abs(path); err == nil && path != "" {
			path = abs
		}
		routes = append(routes, v1alpha1.ForwardRoute{Zone: ".", Upstreams: []string{path}})
	}
	routes = append(routes, f.forward...)
	for _, r := range routes {
		cfg.Forward = replaceRoute(cfg.Forward, r)
	}
	if set("max-concurrent") {
		cfg.MaxConcurrent = f.maxConcurrent
	}
	if set("cluster-upstream") {
		cfg.NodeLocal.ClusterUpstream = f.clusterUpstream
	}
	if set("resolv-conf") {
		rc := f.resolvConf
		cfg.NodeLocal.ResolvConf = &rc
	}
	f.applyNodeLocalFlags(cfg)
}

// applyNodeLocalFlags copies the transparent-mode flags.
func (f *serveFlags) applyNodeLocalFlags(cfg *v1alpha1.ServerConfiguration) {
	set := func(name string) bool { return f.set[name] }
	nl := &cfg.NodeLocal
	if set("local-ip") {
		nl.LocalIPs = f.localIPs
	}
	if set("setup-interface") {
		nl.SetupInterface = f.setupInterface
	}
	if set("interface-name") {
		nl.InterfaceName = f.interfaceName
	}
	if set("setup-notrack") || set("setup-iptables") {
		nl.SetupNotrack = f.setupNotrack
	}
	if set("skip-teardown") {
		nl.SkipTeardown = f.skipTeardown
	}
	if set("lock-file") {
		nl.LockFile = f.lockFile
	}
}

// replaceRoute puts r in routes, in place of a route of the same zone.
func replaceRoute(routes []v1alpha1.ForwardRoute, r v1alpha1.ForwardRoute) []v1alpha1.ForwardRoute {
	for i := range routes {
		if strings.EqualFold(strings.TrimSuffix(routes[i].Zone, "."), strings.TrimSuffix(r.Zone, ".")) {
			routes[i].Upstreams = r.Upstreams
			return routes
		}
	}
	return append(routes, r)
}

// applyCacheFlags copies the cache flags into the cache section (both
// modes).
func (f *serveFlags) applyCacheFlags(cfg *v1alpha1.ServerConfiguration) {
	set := func(name string) bool { return f.set[name] }
	if set("cache-size") || set("cache-bytes") {
		total := int64(f.cacheSize)
		cfg.Cache.SuccessBytes = v1alpha1.ByteSize(strconv.FormatInt(total/5*4, 10))
		cfg.Cache.DenialBytes = v1alpha1.ByteSize(strconv.FormatInt(total/5, 10))
	}
	if set("zone-cache-size") {
		cfg.Cache.ZoneBytes = v1alpha1.ByteSize(strconv.FormatInt(int64(f.zoneCacheSize), 10))
	}
	if set("max-ttl") {
		cfg.Cache.MaxTTL = v1alpha1.Duration(f.maxTTL.String())
	}
	if set("max-negative-ttl") {
		cfg.Cache.MaxNegativeTTL = v1alpha1.Duration(f.maxNegativeTTL.String())
	}
	if set("serve-stale") {
		cfg.Cache.ServeStale = v1alpha1.Duration(f.serveStale.String())
	}
	if set("prefetch") {
		cfg.Cache.Prefetch.Amount = f.prefetch
	}
}
