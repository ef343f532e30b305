package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
)

// serverConfig is the config of `dnsconfigurer serve`.
type serverConfig = v1alpha1.ServerConfiguration

// serveFlags binds the flags of `dnsconfigurer serve` to its config; with
// --config, each one set on the command line replaces the file's field.
func serveFlags(fs *flag.FlagSet) *flaglayer.Layer[serverConfig] {
	l := flaglayer.New[serverConfig](fs)
	l.Repeated(func(c *serverConfig) *[]string { return &c.Listen }, "listen", "`ADDR` (ip:port) to serve DNS on, UDP and TCP; repeatable")
	l.String(func(c *serverConfig) *string { return &c.ClusterDomain }, "cluster-domain", v1alpha1.DefaultServerClusterDomain, "the cluster `zone`")
	l.String(func(c *serverConfig) *string { return &c.Objects }, "objects", "", "serve the Services, EndpointSlices, Pods, Namespaces and Nodes of this manifest file or directory (watched)")
	l.String(func(c *serverConfig) *string { return &c.ClustersetZone }, "clusterset-zone", "", "answer the Multi-Cluster Services `zone` (e.g. clusterset.local) from the cluster's ServiceImports and their EndpointSlices (KEP-1645); default: off")
	l.Bool(func(c *serverConfig) *bool { return &c.NoClusterZone }, "no-cluster-zone", false, "serve no cluster: read no API server or objects, and answer the cluster domain's names and the reverse names from the templates, hosts and forwarders (a CoreDNS without its kubernetes plugin)")
	l.String(func(c *serverConfig) *string { return &c.Kubeconfig }, "kubeconfig", "", "watch the cluster of this kubeconfig (default with neither: $KUBECONFIG, else the in-cluster config)")
	l.String(func(c *serverConfig) *string { return &c.Pods }, "pods", v1alpha1.DefaultPodRecords, "pod records <a-b-c-d>.<ns>.pod.<zone>: verified, insecure or disabled")
	ttl := fs.Uint("ttl", v1alpha1.DefaultRecordTTL, "TTL of the records and of negative answers, 0-3600")
	l.Defined("ttl", "ttl", func(c *serverConfig) { n := int(*ttl); c.TTL = &n })
	registerUpstreamFlags(l)
	l.String(func(c *serverConfig) *string { return &c.MetricsListen }, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this `ADDR`")
	l.Bool(func(c *serverConfig) *bool { return &c.CoreDNSMetrics }, "coredns-metrics", v1alpha1.DefaultCoreDNSMetrics, "also serve the request, cache and forward metrics under CoreDNS's names and labels (coredns_dns_*, coredns_cache_*, coredns_forward_*, ...), for dashboards and alerts written for CoreDNS")
	l.Repeated(func(c *serverConfig) *[]string { return &c.Namespaces }, "namespaces", "only serve these namespaces (comma-separated or repeated)")
	l.Bool(func(c *serverConfig) *bool { return &c.IgnoreEmptyService }, "ignore-empty-service", false, "answer NXDOMAIN for Services without a ready endpoint")
	l.Bool(func(c *serverConfig) *bool { return &c.EndpointPodNames }, "endpoint-pod-names", false, "name endpoints without a hostname after their pod instead of their dashed IP")
	l.Bool(func(c *serverConfig) *bool { return &c.NoEndpoints }, "no-endpoints", false, "serve no endpoint records (headless Services and endpoint names are NXDOMAIN)")
	var logf logFlags
	logf.register(fs, logText)
	l.Defined("log-format", "logFormat", func(c *serverConfig) { c.LogFormat = logf.format })
	l.Defined("log-level", "logLevel", func(c *serverConfig) { c.LogLevel = logf.level })
	l.String(func(c *serverConfig) *string { return &c.Mode }, "mode", v1alpha1.DefaultServerMode, "cluster (the cluster DNS) or node-local (a caching forwarder to --cluster-upstream that adds the autopath option)")
	registerAutopathFlags(l)
	l.Repeated(func(c *serverConfig) *[]string { return &c.NodeLocal.ClusterUpstream }, "cluster-upstream", "node-local mode: the cluster DNS `ADDR`s (ip or ip:port), asked over TCP for cluster names: a Service of the cluster DNS pods of its own, not the Service IP node-local takes over")
	l.StringPtr(func(c *serverConfig) **string { return &c.NodeLocal.ResolvConf }, "resolv-conf", v1alpha1.DefaultNodeLocalResolvConf, "node-local mode: the node's resolv.conf (watched; auto: systemd-resolved's when it runs): its search domains end autopath search lists and, with --external direct, its nameservers answer names outside the cluster; \"\" for none")
	l.String(func(c *serverConfig) *string { return &c.NodeLocal.ClusterConfig }, "cluster-config", "", "node-local mode: the cluster DNS's own ServerConfiguration `FILE` (watched): its stub domains, hosts, overrides and rewrites name the names sent to --cluster-upstream")
	l.String(func(c *serverConfig) *string { return &c.NodeLocal.External }, "external", "", "node-local mode: where names the cluster DNS does not treat specially go: cluster (the default: to --cluster-upstream, every answer the cluster DNS's) or direct (to the --resolv-conf nameservers, as NodeLocal DNSCache)")
	registerCacheFlags(l)
	l.BoolPtr(func(c *serverConfig) **bool { return &c.Loadbalance }, "loadbalance", v1alpha1.DefaultLoadbalance, "rotate A, AAAA and same-priority SRV records in every answer (CoreDNS's loadbalance)")
	l.Int(func(c *serverConfig) *int { return &c.UDPAnswerLimit }, "udp-answer-limit", v1alpha1.DefaultUDPAnswerLimit, "a UDP answer holds at most `N` (0-100) A or AAAA records of a name, the next ones each reply, TC clear; TCP gets them all (Consul's udp_answer_limit); 0: off, every ready endpoint in every answer")
	l.Repeated(func(c *serverConfig) *[]string { return &c.ReverseScope }, "reverse-scope", "answer from the cluster only the reverse names of addresses inside these `CIDR`s and forward the others (CoreDNS's kubernetes plugin with CIDR zones alone); default: every address")
	l.Repeated(func(c *serverConfig) *[]string { return &c.ReverseZones }, "reverse-zones", "answer the reverse names of these `CIDR`s authoritatively (the Service and Pod CIDRs): unknown ones are NXDOMAIN with the zone's SOA, not forwarded")
	l.Duration(func(c *serverConfig) *v1alpha1.Duration { return &c.Lameduck }, "lameduck", v1alpha1.DefaultLameduck, "on SIGTERM keep answering this long with /readyz failing, then stop")
	l.Bool(func(c *serverConfig) *bool { return &c.LogQueries }, "log-queries", false, "log every query (client, name, type, rcode, duration); for debugging")
	l.Int(func(c *serverConfig) *int { return &c.Limits.UDPInFlight }, "max-udp-in-flight", v1alpha1.DefaultUDPInFlight, "UDP queries answered at once; further datagrams are dropped and counted")
	l.Int(func(c *serverConfig) *int { return &c.UDPSockets }, "udp-sockets", v1alpha1.DefaultUDPSockets, "UDP sockets bound on each listen address with SO_REUSEPORT, each read by its own goroutine (CoreDNS's multisocket); 0: GOMAXPROCS")
	l.Int(func(c *serverConfig) *int { return &c.Limits.TCPConnections }, "max-tcp-conns", v1alpha1.DefaultTCPConnections, "open TCP connections; past it a new one takes the place of one of the client holding the most, busy or idle; counted")
	l.Int(func(c *serverConfig) *int { return &c.Limits.TCPConnectionsPerClient }, "max-tcp-conns-per-client", v1alpha1.DefaultTCPConnectionsPerClient, "open TCP connections of one client address (at most --max-tcp-conns); further ones are closed at once and counted")
	fs.String("config", "", "ServerConfiguration `FILE` (api/v1alpha1); flags given override it; reloaded when it changes, but for the fields that need a restart: mode, listen, reusePort, udpSockets, metricsListen, clusterDomain, logFormat, kubeconfig, objects, noClusterZone, clustersetZone, limits and nodeLocal (logged when changed)")
	var routes routeFlag
	l.Var(&routes, "forward", "forward", "forward names under `ZONE=ADDR[,ADDR...]` to these upstreams (stub domains; \".\" is the default route); repeatable", func(c *serverConfig) {
		for _, r := range routes {
			c.Forward = replaceRoute(c.Forward, r)
		}
	})
	l.Int(func(c *serverConfig) *int { return &c.MaxConcurrent }, "max-concurrent", v1alpha1.DefaultMaxConcurrent, "forwarded queries in flight at once, shared per client address; beyond, the oldest of the client holding the most gives way to another client's query (to its own of a less busy domain), else the new one is SERVFAIL at once (counted)")
	l.Int(func(c *serverConfig) *int { return &c.MaxConcurrentPerDomain }, "max-concurrent-per-domain", 0, "deprecated, no effect: --max-concurrent is shared per client address instead")
	l.Bool(func(c *serverConfig) *bool { return &c.FailFastAllUnhealthy }, "failfast-all-unhealthy-upstreams", false, "answer SERVFAIL at once while every upstream of a route is down by its health probes, instead of asking one anyway (CoreDNS's failfast_all_unhealthy_upstreams)")
	l.Bool(func(c *serverConfig) *bool { return &c.ReusePort }, "reuse-port", false, "bind the listen addresses with SO_REUSEPORT, so that a new instance serves them before the old one stops (every instance must set it)")
	l.String(func(c *serverConfig) *string { return &c.Hosts.File }, "hosts", "", "answer the names of this /etc/hosts-format `FILE` (watched) before forwarding")
	registerNodeLocalFlags(l)
	return l
}

// registerUpstreamFlags: --upstream and --upstream-resolv-conf are the
// default route ("."), replacing the file's; empty, they add none (their
// default).
func registerUpstreamFlags(l *flaglayer.Layer[serverConfig]) {
	var ups flaglayer.ListValue
	l.Var(&ups, "upstream", "forward", "forward names outside the cluster zone to these `ADDR`s (ip or ip:port); repeatable or comma-separated", func(c *serverConfig) {
		if len(ups) == 0 {
			return
		}
		c.Forward = replaceRoute(c.Forward, v1alpha1.ForwardRoute{Zone: ".", Upstreams: slices.Clone(ups)})
	})
	rc := l.FlagSet().String("upstream-resolv-conf", "", "forward to the nameservers of this resolv.conf (watched; the last good file is kept)")
	l.Defined("upstream-resolv-conf", "forward", func(c *serverConfig) {
		// A route names a file by an absolute path; the flag is a path.
		path := *rc
		if path == "" {
			return
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		c.Forward = replaceRoute(c.Forward, v1alpha1.ForwardRoute{Zone: ".", Upstreams: []string{path}})
	})
}

// registerAutopathFlags binds the autopath flags; --autopath-by-source
// implies --pods verified.
func registerAutopathFlags(l *flaglayer.Layer[serverConfig]) {
	fs := l.FlagSet()
	l.BoolPtr(func(c *serverConfig) **bool { return &c.Autopath }, "autopath", v1alpha1.DefaultAutopath, "cluster mode: answer <name>.search.<ns>.<zone>.ap.k8s.io by server-side search expansion")
	bySource := fs.Bool("autopath-by-source", false, "cluster mode: also expand plain queries from known pod IPs with that pod's namespace search list (implies --pods verified)")
	l.Defined("autopath-by-source", "autopathBySource", func(c *serverConfig) {
		c.AutopathBySource = *bySource
		if *bySource {
			c.Pods = v1alpha1.PodsVerified
		}
	})
	code := fs.Uint("autopath-option-code", v1alpha1.DefaultOptionCode, "EDNS0 local option code carrying the autopath search list")
	l.Defined("autopath-option-code", "autopathOptionCode", func(c *serverConfig) { c.AutopathOptionCode = int(*code) })
	top := fs.Int("namespace-metrics", v1alpha1.DefaultNamespaceMetrics, "cluster mode: the busiest `N` namespaces (0-1000) get series of their own in the search-list amplification metrics dnsconfigurer_dnsserver_namespace_*{namespace}, the others are \"other\" (docs/amplification.md); 0: off")
	l.Defined("namespace-metrics", "namespaceMetrics", func(c *serverConfig) { n := *top; c.NamespaceMetrics = &n })
}

// registerNodeLocalFlags binds the transparent-mode flags of --mode
// node-local (node-cache's names).
func registerNodeLocalFlags(l *flaglayer.Layer[serverConfig]) {
	type cfg = serverConfig
	l.Repeated(func(c *cfg) *[]string { return &c.NodeLocal.LocalIPs }, "local-ip", "node-local mode: also serve port 53 of these `IP`s (169.254.20.10 and, in transparent mode, the cluster DNS Service IP); comma-separated or repeated")
	l.Bool(func(c *cfg) *bool { return &c.NodeLocal.SetupInterface }, "setup-interface", false, "node-local mode: put the --local-ip addresses on --interface-name (a dummy device, or lo without the dummy type) and remove them on exit")
	l.String(func(c *cfg) *string { return &c.NodeLocal.InterfaceName }, "interface-name", v1alpha1.DefaultNodeLocalInterface, "node-local mode: the interface of --setup-interface")
	var notrack bool
	l.FlagSet().BoolVar(&notrack, "setup-notrack", false, "node-local mode: once serving, add an nftables table that takes DNS to and from the --local-ip addresses out of connection tracking (so kube-proxy's DNAT of the Service IP does not apply); removed on exit")
	l.FlagSet().BoolVar(&notrack, "setup-iptables", false, "node-local mode: node-cache's name of --setup-notrack")
	for _, name := range []string{"setup-notrack", "setup-iptables"} {
		l.Defined(name, "nodeLocal.setupNotrack", func(c *cfg) { c.NodeLocal.SetupNotrack = notrack })
	}
	l.Bool(func(c *cfg) *bool { return &c.NodeLocal.SkipTeardown }, "skip-teardown", false, "node-local mode: leave the addresses and the notrack table in place on exit")
	l.String(func(c *cfg) *string { return &c.NodeLocal.LockFile }, "lock-file", v1alpha1.DefaultNodeLocalLockFile, "node-local mode: the lock shared by the instances on the node; an instance stopping while another runs leaves the setup to it")
	l.StringEnv(func(c *cfg) *string { return &c.NodeLocal.NodeName }, "node-name", "NODE_NAME", "node-local mode: this node's `NAME` (default $NODE_NAME): its topology zone label picks the cluster DNS pods to ask first, and both reach the cluster DNS in the topology option")
	l.BoolPtr(func(c *cfg) **bool { return &c.NodeLocal.ClusterPipeline }, "cluster-pipeline", v1alpha1.DefaultNodeLocalClusterPipeline, "node-local mode: send the queries to --cluster-upstream pipelined over a few TCP connections (RFC 7766), as this project's cluster DNS answers them; false for a cluster DNS that answers one query of a connection at a time (CoreDNS, kube-dns)")
	l.BoolPtr(func(c *cfg) **bool { return &c.NodeLocal.PreferZone }, "prefer-zone", v1alpha1.DefaultNodeLocalPreferZone, "node-local mode: ask the ready cluster DNS pods of the node's topology zone first, then the other zones', then --cluster-upstream (needs an API server and --node-name; get nodes, list/watch endpointslices)")
	l.Duration(func(c *cfg) *v1alpha1.Duration { return &c.NodeLocal.WatchJitter }, "watch-jitter", v1alpha1.DefaultNodeLocalWatchJitter, "node-local mode: wait up to this long, at random, before listing the --upstream-service's EndpointSlices again after the watch failed (an API server restart), so that the nodes come back spread out; 0s: no wait")
	l.String(func(c *cfg) *string { return &c.NodeLocal.UpstreamService }, "upstream-service", v1alpha1.DefaultNodeLocalUpstreamService, "node-local mode: the `NAMESPACE/NAME` of the Service behind --cluster-upstream, whose EndpointSlices list the cluster DNS pods")
	code := l.FlagSet().Uint("topology-option-code", v1alpha1.DefaultTopologyOptionCode, "EDNS0 local option code carrying the client's topology zone and node from node-local to the cluster DNS")
	l.Defined("topology-option-code", "topologyOptionCode", func(c *cfg) { c.TopologyOptionCode = int(*code) })
}

// checkServeFlags rejects what the configuration cannot see: the log
// flags every long-running command checks alike, two flags for one field,
// and a 0 or "" that SetDefaults would read as "unset". Validate checks
// everything else.
func checkServeFlags(fs *flag.FlagSet) error {
	value := func(name string) string { return fs.Lookup(name).Value.String() }
	logf := logFlags{format: value("log-format"), level: value("log-level")}
	if err := logf.check(); err != nil {
		return err
	}
	if value("upstream") != "" && value("upstream-resolv-conf") != "" {
		return errors.New("--upstream and --upstream-resolv-conf are exclusive")
	}
	for _, name := range []string{"autopath-option-code", "topology-option-code", "max-udp-in-flight", "max-tcp-conns"} {
		if value(name) == "0" {
			return fmt.Errorf("--%s 0: must be at least 1", name)
		}
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "cluster-domain" })
	if set && value("cluster-domain") == "" {
		// SetDefaults reads "" as unset, so Validate cannot see it.
		return usagef("--cluster-domain (clusterDomain): %v", v1alpha1.ValidateClusterDomain(""))
	}
	return checkCacheSize(*fs.Lookup("cache-size").Value.(*byteSize))
}
