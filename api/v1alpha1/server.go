package v1alpha1

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ServerKind is the kind of the config file of `dnsconfigurer serve`.
const ServerKind = "ServerConfiguration"

// Modes of `dnsconfigurer serve`.
const (
	ModeCluster   = "cluster"
	ModeNodeLocal = "node-local"
)

// Pod record modes (the pods field).
const (
	PodsVerified = "verified"
	PodsInsecure = "insecure"
	PodsDisabled = "disabled"
)

// Forward policies: how a route picks the upstream to ask first.
const (
	PolicyRandom     = "random"
	PolicyRoundRobin = "round_robin"
	PolicySequential = "sequential"
)

// Shed rcodes: the answer to a query over maxConcurrent.
const (
	ShedServfail = "SERVFAIL"
	ShedRefused  = "REFUSED"
)

// Server defaults. Durations are Go durations, sizes bytes.
const (
	DefaultServerMode          = ModeCluster
	DefaultServerClusterDomain = DefaultClusterDomain
	DefaultLogLevel            = "info"
	DefaultLogFormat           = "text"
	DefaultPodRecords          = PodsDisabled
	DefaultAutopath            = true
	DefaultLoadbalance         = true
	// DefaultUDPAnswerLimit (0) leaves every answer whole: every ready
	// endpoint of a headless Service, as the Kubernetes DNS specification
	// says. MaxUDPAnswerLimit bounds udpAnswerLimit: a 1232-byte UDP reply
	// holds at most 74 A records, so a larger limit never cuts an answer
	// that would not be truncated anyway.
	DefaultUDPAnswerLimit = 0
	MaxUDPAnswerLimit     = 100
	// DefaultRecordTTL is the TTL of the zone's records and denials (CoreDNS
	// kubernetes' default); MaxRecordTTL is the largest allowed.
	DefaultRecordTTL   = 5
	MaxRecordTTL       = 3600
	DefaultOptionCode  = 65001 // the first local/experimental EDNS0 option code (RFC 6891 9)
	MinLocalOptionCode = 65001
	MaxLocalOptionCode = 65534

	DefaultMaxFails    = 2
	DefaultHealthCheck = Duration("500ms")
	DefaultTimeout     = Duration("2s")
	DefaultExpire      = Duration("10s")

	DefaultMaxConcurrent = 1000

	// DefaultNamespaceMetrics is how many namespaces get series of their
	// own in the namespace query metrics; MaxNamespaceMetrics bounds it.
	DefaultNamespaceMetrics = 20
	MaxNamespaceMetrics     = 1000
	// DefaultCoreDNSMetrics: /metrics has dnsconfigurer's names only.
	DefaultCoreDNSMetrics = false

	DefaultSuccessBytes       = ByteSize("32Mi")
	DefaultDenialBytes        = ByteSize("8Mi")
	DefaultZoneBytes          = ByteSize("16Mi")
	DefaultMaxTTL             = Duration("30s")
	DefaultMaxNegativeTTL     = Duration("5s")
	DefaultServeStale         = Duration("0s") // off
	DefaultStaleTTL           = Duration("30s")
	DefaultPrefetchAmount     = 0 // off
	DefaultPrefetchWindow     = Duration("1m")
	DefaultPrefetchPercentage = 10

	// MinZoneBytes is the smallest zoneBytes: below it the replies in use
	// would not stay cached.
	MinZoneBytes = 1 << 20

	DefaultHostsTTL    = Duration("3600s")
	DefaultHostsReload = Duration("5s")
	DefaultLameduck    = Duration("5s")

	// DefaultUDPInFlight bounds the UDP queries answered at once. Each holds
	// a goroutine (a few KiB of stack) until it is answered. A zone answer
	// takes microseconds, so even at 100k qps on 2 cores only a handful are
	// in flight. A forwarded query holds its slot for up to the forward
	// timeout, and at most maxConcurrent (1000) of them wait at once. The
	// default is that cap plus as many slots again for the zone. So a dead
	// upstream can never take the slots in-cluster names need. The worst
	// case is about 16 MiB of stacks. Validate requires udpInFlight >
	// maxConcurrent.
	DefaultUDPInFlight = 2000
	// DefaultTCPConnections bounds the open TCP connections. TCP is the rare
	// path (truncated replies, zone transfers refused at once); each
	// connection holds a goroutine and a socket for up to tcpIdleTimeout
	// between queries, so 1000 allows 100 new connections a second that
	// idle out, well inside a pod's file descriptor limit.
	DefaultTCPConnections = 1000
	// DefaultTCPConnectionsPerClient bounds the open TCP connections of
	// one client address, so that no client can hold more than a quarter
	// of the slots. Node-local asks the cluster DNS over TCP, one query a
	// connection, from its node's address: 250 is 250 of its queries in
	// flight at one replica. Under tcpConnections when that is lower.
	DefaultTCPConnectionsPerClient = 250
	DefaultTCPIdleTimeout          = Duration("10s")
	DefaultTCPWriteTimeout         = Duration("5s")

	// DefaultUDPSockets (0) binds GOMAXPROCS UDP sockets on each listen
	// address, as CoreDNS's multisocket: each is read by a goroutine of its
	// own, in batches, and the kernel spreads the clients over them, so
	// the UDP path uses every core the process may. MaxUDPSockets bounds
	// it, as CoreDNS does.
	DefaultUDPSockets = 0
	MaxUDPSockets     = 1024

	DefaultNodeLocalResolvConf = "/etc/resolv.conf"
	DefaultNodeLocalInterface  = "nodelocaldns"
	DefaultNodeLocalLockFile   = "/run/dnsconfigurer/node-local.lock"
	// DefaultNodeLocalClusterTimeout bounds node-local's exchange with the
	// cluster DNS. It exceeds the longest the cluster DNS takes for one
	// query: its forward timeout (DefaultTimeout, 2s) and AutopathDeadline.
	// So a name whose servers do not answer comes back as the cluster DNS's
	// SERVFAIL before node-local gives up. The failure is that name's, never
	// the cluster DNS's. It stays under the 5s a glibc client waits by
	// default.
	DefaultNodeLocalClusterTimeout = Duration("3s")
	// DefaultNodeLocalWatchJitter spreads the node-local stages' relists
	// of the cluster DNS's EndpointSlices after an API server restart:
	// each waits up to this long, at random, before it lists again. The
	// relists of 300 stages came 13.6-35.5 s (p50, last) after the API
	// server's start with client-go's backoff alone, 20.3-46.3 s with
	// this (test/bench TestScale).
	DefaultNodeLocalWatchJitter = Duration("10s")
	// MaxNodeLocalWatchJitter bounds watchJitter: the endpoints the stage
	// orders by zone may be that much older after a restart.
	MaxNodeLocalWatchJitter = 5 * time.Minute
	// DefaultNodeLocalClusterPipeline pipelines node-local's queries to
	// the cluster DNS (NodeLocal.ClusterPipeline).
	DefaultNodeLocalClusterPipeline = true
	// DefaultNodeLocalExternal sends every name to the cluster DNS, so that
	// every answer is the cluster DNS's (its stub domains, hosts,
	// overrides and rewrites included).
	DefaultNodeLocalExternal = ExternalCluster
)

// Where the node-local stage sends the names the cluster DNS does not
// treat specially (nodeLocal.external).
const (
	// ExternalCluster sends them to nodeLocal.clusterUpstream.
	ExternalCluster = "cluster"
	// ExternalDirect sends them to the node's nameservers
	// (nodeLocal.resolvConf), as NodeLocal DNSCache does.
	ExternalDirect = "direct"
)

// AutopathDeadline bounds one autopath expansion at the cluster DNS, every
// candidate included (those it forwards are asked in parallel, each within
// its forward timeout). It is above DefaultTimeout, so a forwarded
// candidate has its whole timeout, and below DefaultNodeLocalClusterTimeout;
// nodeLocal.clusterTimeout must exceed it.
const AutopathDeadline = 2500 * time.Millisecond

// maxDNSTTL is the largest TTL a DNS record may carry (RFC 2181 8).
const maxDNSTTL = (1<<31 - 1) * time.Second

// ServerConfiguration is the config file of `dnsconfigurer serve`. Flags
// override it. Every top-level field is optional. Below is a complete file.
// Each field holds its default. A field without one, or off by default,
// holds an example value. testdata/server-full.yaml is the same file;
// TestServerExampleDefaults checks each value against SetDefaults.
//
//	apiVersion: dnsconfigurer.io/v1alpha1
//	kind: ServerConfiguration
//	mode: cluster                       # or node-local
//	listen: ["0.0.0.0:53", "[::]:53"]   # required here or as --listen
//	clusterDomain: cluster.local
//	metricsListen: 127.0.0.1:9153
//	logFormat: text                     # text, json
//	logLevel: info                      # debug, info, warn, error
//	logQueries: false
//	# the records (mode cluster): a kubeconfig, or manifests; neither: in-cluster config
//	kubeconfig: /etc/kubernetes/dns.kubeconfig
//	namespaces: [default, kube-system]  # empty: all
//	pods: disabled                      # verified, insecure, disabled
//	ttl: 5                              # seconds, 0-3600
//	ignoreEmptyService: false
//	endpointPodNames: false
//	noEndpoints: false
//	autopath: true
//	autopathBySource: false             # needs pods: verified
//	autopathOptionCode: 65001
//	topologyOptionCode: 65002           # the client's topology zone and node, node-local to the cluster DNS
//	namespaceMetrics: 20                # busiest namespaces with series of their own in dnsconfigurer_dnsserver_namespace_*; 0: off
//	coreDNSMetrics: false               # also CoreDNS's metric names (coredns_dns_*, coredns_cache_*, coredns_forward_*, ...)
//	forward:
//	- zone: .                           # the default route
//	  upstreams: [/etc/resolv.conf]     # a resolv.conf whose nameservers are used (watched)
//	  except: [corp.example]
//	- zone: corp.example                # a stub domain
//	  upstreams: ["10.0.0.53", "10.0.1.53:5353", "[fd00::53]:53"]
//	  policy: round_robin               # random, round_robin, sequential
//	  maxFails: 2                       # 0: never taken out of rotation
//	  healthCheck: 500ms
//	  timeout: 2s
//	  expire: 10s
//	  forceTCP: false
//	  preferUDP: false
//	maxConcurrent: 1000
//	maxConcurrentPerDomain: 100         # deprecated, no effect
//	failFastAllUnhealthy: false
//	shedRcode: SERVFAIL                 # or REFUSED
//	cache:
//	  successBytes: 32Mi                # bytes, or a quantity such as 32Mi
//	  denialBytes: 8Mi
//	  zoneBytes: 16Mi                   # packed replies made from the zone (cluster mode)
//	  maxTTL: 30s
//	  minTTL: 0s
//	  maxNegativeTTL: 5s
//	  minNegativeTTL: 0s
//	  serveStale: 1h                    # 0s: off
//	  staleTTL: 30s
//	  prefetch: {amount: 10, window: 1m, percentage: 10}
//	loadbalance: true
//	udpAnswerLimit: 0                   # a UDP answer holds at most this many A or AAAA records of a name (TCP: all); 0: off
//	hosts: {file: /etc/dnsconfigurer/hosts, ttl: 1h, reload: 5s}
//	overrides:
//	- {name: host.minikube.internal, addresses: [192.168.49.1], ttl: 1m}
//	reverseZones: [10.96.0.0/12, 10.244.0.0/16, "fd00:10:96::/108"]
//	rewrites:                           # CoreDNS's "rewrite name", in order; at most 64
//	- {match: exact, from: db.example.com, to: db.prod.svc.cluster.local}
//	- match: regex                      # exact (default), prefix, suffix, substring, regex
//	  from: '^(.+)\.corp\.internal\.$'
//	  to: '{1}.svc.cluster.local'
//	  answerFrom: '^(.+)\.svc\.cluster\.local\.$'   # and answerTo, or neither: "answer auto"
//	  answerTo: '{1}.corp.internal'
//	  continue: false                   # true: go on to the next rule
//	lameduck: 5s
//	reusePort: true                     # a new instance binds before the old one stops
//	udpSockets: 0                       # UDP sockets per listen address (CoreDNS's multisocket); 0: GOMAXPROCS
//	limits: {udpInFlight: 2000, tcpConnections: 1000, tcpConnectionsPerClient: 250, tcpIdleTimeout: 10s, tcpWriteTimeout: 5s}
//	nodeLocal:                          # read in mode node-local only
//	  # clusterUpstream: [10.96.0.10]   # required in mode node-local
//	  clusterTimeout: 3s                # above the cluster DNS's forward timeout (2s) and autopath deadline (2.5s)
//	  clusterPipeline: true             # false when clusterUpstream is CoreDNS or kube-dns
//	  # clusterConfig: /etc/dnsconfigurer/cluster/config.yaml   # the cluster DNS's own file (watched)
//	  # external: cluster               # other names: cluster (to clusterUpstream) or direct (to resolvConf's nameservers)
//	  resolvConf: /etc/resolv.conf      # nameservers for other names, search domains; "": none
//	  # localIPs: [169.254.20.10, 10.96.0.10]   # transparent mode: also the cluster DNS Service IP
//	  setupInterface: false             # put localIPs on interfaceName (dummy, or lo)
//	  interfaceName: nodelocaldns
//	  setupNotrack: false               # nftables table taking DNS to localIPs out of conntrack
//	  skipTeardown: false               # keep both when the last instance stops
//	  lockFile: /run/dnsconfigurer/node-local.lock
//	  preferZone: true                  # the node's topology zone's cluster DNS pods first (needs an API server)
//	  upstreamService: kube-system/dnsconfigurer-dns-upstream   # the Service behind clusterUpstream
//	  watchJitter: 10s                  # up to this long, at random, before listing it again after a failed watch
//	  # nodeName: node-1                # default $NODE_NAME
//
// # Forwarding
//
// Names outside the cluster domain go to the route of the longest zone that
// contains them and that does not list them (or a parent of them) in except;
// an excepted name goes to the next less specific route, and a name no route
// takes is not forwarded. A route for a zone inside the cluster domain
// ("paris.svc.cluster.local", another cluster's namespace) takes its names
// before the cluster zone answers them, as a CoreDNS server block for that
// zone does; a route for the cluster domain itself is an error (but with
// noClusterZone). Zones are compared case-insensitively
// with a trailing dot, so "Corp.Example" and "corp.example." are one zone.
//
// # Reload
//
// `serve --config` reads the file again when it changes and applies every
// field but RestartFields (mode, listen, reusePort, udpSockets, metricsListen,
// clusterDomain, logFormat, kubeconfig, objects, limits, nodeLocal), which
// keep their running values and are named in a warning when their value
// changed (KeepRestartFields). Mode node-local reads the file once.
//
// # Validation
//
// Validate reports every invalid field, each as "path: message" (for example
// `forward[1].upstreams[0]: "10.0.0.1:99999": invalid port`), joined with
// errors.Join. It does not require what flags may still give (listen, and
// nodeLocal.clusterUpstream in mode node-local): CheckComplete does, after
// the flags are applied.
type ServerConfiguration struct {
	TypeMeta `json:",inline"`

	// Mode is "cluster" (default: the cluster DNS) or "node-local" (a
	// caching forwarder to nodeLocal.clusterUpstream that adds the autopath
	// option).
	Mode string `json:"mode,omitempty"`
	// Listen are the addresses, "ip:port" (or ":port" for every address),
	// each served over UDP and TCP. On Linux "0.0.0.0:53", "[::]:53" and
	// ":53" each take both families; listed together, "0.0.0.0:53" takes
	// IPv4 and "[::]:53" IPv6 (BindFamily). A wildcard beside a specific
	// address on its port needs reusePort.
	Listen []string `json:"listen,omitempty"`
	// ClusterDomain is the cluster zone (default "cluster.local").
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// MetricsListen is the HTTP address of /metrics, /healthz and /readyz;
	// "" (default) serves none.
	MetricsListen string `json:"metricsListen,omitempty"`
	// LogFormat is the log's format on stderr: text (default) or json.
	LogFormat string `json:"logFormat,omitempty"`
	// LogLevel is debug, info (default), warn or error.
	LogLevel string `json:"logLevel,omitempty"`
	// LogQueries logs every query (client, name, type, rcode, duration).
	LogQueries bool `json:"logQueries,omitempty"`

	// Kubeconfig is the API server's kubeconfig; with neither it nor
	// Objects, the files of $KUBECONFIG, else the in-cluster config. Mode
	// cluster only.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Objects is a manifest file or directory (watched) served instead of
	// an API server's objects. Mode cluster only; excludes Kubeconfig.
	Objects string `json:"objects,omitempty"`
	// ClustersetZone, when set (e.g. "clusterset.local"), answers the
	// Multi-Cluster Services zone of KEP-1645 from the cluster's
	// ServiceImports (multicluster.x-k8s.io v1beta1, else v1alpha1) and
	// the EndpointSlices labelled multicluster.kubernetes.io/service-name,
	// as CoreDNS's kubernetes plugin with `multicluster ZONE`
	// (docs/multicluster.md). Empty (default): off, and ServiceImports are
	// not read. Mode cluster only, with an API server (not objects); not
	// inside clusterDomain.
	ClustersetZone string `json:"clustersetZone,omitempty"`
	// NoClusterZone serves no cluster: no API server and no objects are
	// read, and the names of the cluster domain and the reverse names go
	// to the templates, hosts and forwarders like any other, as a CoreDNS
	// without its kubernetes plugin (OpenShift's node DNS). Mode cluster
	// only; excludes kubeconfig, objects, autopath, reverseZones,
	// reverseScope and external.
	NoClusterZone bool `json:"noClusterZone,omitempty"`
	// Namespaces limits the records to these namespaces (empty: all).
	Namespaces []string `json:"namespaces,omitempty"`
	// Pods is verified, insecure or disabled (default; verified when
	// AutopathBySource is set).
	Pods string `json:"pods,omitempty"`
	// TTL is the TTL of the zone's records and denials in seconds, 0-3600
	// (default 5).
	TTL *int `json:"ttl,omitempty"`
	// IgnoreEmptyService answers NXDOMAIN for Services without a ready
	// endpoint.
	IgnoreEmptyService bool `json:"ignoreEmptyService,omitempty"`
	// EndpointPodNames names endpoints without a hostname after their pod
	// instead of their dashed IP.
	EndpointPodNames bool `json:"endpointPodNames,omitempty"`
	// NoEndpoints serves no endpoint records.
	NoEndpoints bool `json:"noEndpoints,omitempty"`
	// Autopath answers <name>.search.<ns>.<zone>.ap.k8s.io by server-side
	// search expansion (default true).
	Autopath *bool `json:"autopath,omitempty"`
	// AutopathBySource also expands plain queries from known pod IPs; it
	// needs Autopath and pods: verified.
	AutopathBySource bool `json:"autopathBySource,omitempty"`
	// AutopathOptionCode is the EDNS0 local option code carrying the
	// autopath search list, 65001-65534 (default 65001).
	AutopathOptionCode int `json:"autopathOptionCode,omitempty"`
	// TopologyOptionCode is the EDNS0 local option code carrying the
	// client's topology zone and node from node-local to the cluster DNS
	// (pkg/topology), 65001-65534 and not autopathOptionCode (default
	// 65002). Both modes.
	TopologyOptionCode int `json:"topologyOptionCode,omitempty"`
	// NamespaceMetrics is how many namespaces, the busiest, get series of
	// their own in the namespace query metrics
	// (dnsconfigurer_dnsserver_namespace_*{namespace}, docs/amplification.md),
	// the others being "other": 0-1000 (default 20); 0 turns them off.
	// Mode cluster only.
	NamespaceMetrics *int `json:"namespaceMetrics,omitempty"`
	// CoreDNSMetrics also serves the request, cache and forward metrics
	// on /metrics under CoreDNS's names and labels (coredns_dns_*,
	// coredns_cache_*, coredns_forward_*, coredns_proxy_*, ...; table in
	// deploy/monitoring/README.md), so that dashboards and alerts written
	// for CoreDNS work unchanged (default false). Its label server is
	// CoreDNSServer. It needs metricsListen.
	CoreDNSMetrics bool `json:"coreDNSMetrics,omitempty"`

	// Forward are the forwarding routes, at most one per zone; zone "." is
	// the default route. Mode cluster only.
	Forward []ForwardRoute `json:"forward,omitempty"`
	// MaxConcurrent bounds the forwarded queries in flight (default 1000),
	// shared per client address: when all are in flight, the oldest query
	// of the client holding the most is answered ShedRcode at once and a
	// new query of another client takes its slot; one of the same client
	// takes the slot of its own oldest of a registrable domain holding more
	// of its queries than the new one's, else it is answered ShedRcode at
	// once. A client asking names that are never
	// answered thus never keeps another client's query out, however it
	// spreads them (pkg/forward's README).
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
	// MaxConcurrentPerDomain is deprecated and has no effect: it bounded the
	// queries of one registrable domain, which names spread over many
	// domains walked around (issue 66). maxConcurrent's share per client
	// replaces it. It is still accepted and validated, so that a config
	// that sets it keeps loading; a later version removes it.
	MaxConcurrentPerDomain int `json:"maxConcurrentPerDomain,omitempty"`
	// FailFastAllUnhealthy answers SERVFAIL at once when every upstream of
	// a route is down by its health probes, instead of asking one of them
	// at random (CoreDNS's failfast_all_unhealthy_upstreams; default
	// false). It suits upstreams that fail together and come back
	// together (one resolver, or one site's): clients fail over at once
	// instead of waiting each query's timeout. Leave it off when a probe's
	// failure may be bad luck, as one query answered is better than none.
	// Every route needs health checks (maxFails over 0).
	FailFastAllUnhealthy bool `json:"failFastAllUnhealthy,omitempty"`
	// ShedRcode is SERVFAIL (default) or REFUSED.
	ShedRcode string `json:"shedRcode,omitempty"`
	// Cache bounds the cache of forwarded answers.
	Cache ServerCache `json:"cache"`

	// Loadbalance rotates A, AAAA and same-priority SRV records in every
	// answer (default true).
	Loadbalance *bool `json:"loadbalance,omitempty"`
	// UDPAnswerLimit cuts an A or AAAA RRset of more than this many
	// records to this many in a reply over UDP, with TC clear, as Consul's
	// udp_answer_limit; over TCP the reply holds them all. Each reply of a
	// name hands out the next records (its window moves by the limit), so
	// every endpoint is handed out across queries. It spares glibc's
	// getaddrinfo the rounds a big answer costs it (pkg/clusterdns README,
	// "UDP answer limit"). 0 (default) is off: every ready endpoint in
	// every answer, as the Kubernetes DNS specification says; at most
	// MaxUDPAnswerLimit. In mode node-local the stage cuts its UDP replies
	// to pods the same way: it asks the cluster DNS over TCP, which
	// answers whole.
	UDPAnswerLimit int `json:"udpAnswerLimit,omitempty"`
	// Hosts is a file in the /etc/hosts format, answered before forwarding.
	Hosts HostsFile `json:"hosts"`
	// Overrides are names answered with fixed addresses before forwarding.
	// A name inside the cluster domain is an error: those names come from
	// the cluster only.
	Overrides []Override `json:"overrides,omitempty"`
	// ReverseZones are CIDRs (the Service and Pod CIDRs) whose reverse names
	// are answered authoritatively instead of forwarded.
	ReverseZones []string `json:"reverseZones,omitempty"`
	// ReverseScope, when set, limits the reverse names answered from the
	// cluster to the addresses inside these CIDRs; the others are
	// forwarded, as CoreDNS's kubernetes plugin with CIDR zones and no
	// in-addr.arpa or ip6.arpa zone. Unset (default): every address of the
	// cluster, as kubeadm's Corefile. reverseZones must lie inside it.
	ReverseScope []string `json:"reverseScope,omitempty"`
	// Rewrites rename a question before it is answered and the answer's
	// names back, as CoreDNS's "rewrite name". Rules run in order.
	Rewrites []Rewrite `json:"rewrites,omitempty"`
	// Templates answer names of their zones from Go templates or with an
	// rcode, before the cluster zone, hosts and forwarders, as CoreDNS's
	// template plugin. Tried in order.
	Templates []Template `json:"templates,omitempty"`
	// External answers Services' external IPs under outside zones, as
	// CoreDNS's k8s_external plugin.
	External *External `json:"external,omitempty"`

	// Lameduck is how long the server keeps answering after SIGTERM with
	// /readyz failing, 0s-1m (default 5s).
	Lameduck Duration `json:"lameduck,omitempty"`
	// ReusePort binds the listen addresses with SO_REUSEPORT, so that a new
	// instance serves them before the old one stops (a DaemonSet's
	// maxSurge); every instance sharing them must set it.
	ReusePort bool `json:"reusePort,omitempty"`
	// UDPSockets is how many UDP sockets each listen address is bound
	// with, each read by a goroutine of its own (CoreDNS's multisocket),
	// 0-1024 (default 0: GOMAXPROCS, the CPUs the process may use). With
	// more than one they are bound with SO_REUSEPORT even without
	// reusePort (the TCP socket only with it), and Linux spreads the
	// clients over them by a hash of their address and port.
	UDPSockets int `json:"udpSockets,omitempty"`
	// Limits bound what clients can make the server hold.
	Limits ServerLimits `json:"limits"`

	// NodeLocal is read in mode node-local only.
	NodeLocal NodeLocal `json:"nodeLocal"`
}

// ForwardRoute sends the names of a zone to upstream resolvers.
type ForwardRoute struct {
	// Zone is the domain whose names this route takes; "." is every name.
	Zone string `json:"zone"`
	// Except are names under Zone (and their subdomains) this route does
	// not take.
	Except []string `json:"except,omitempty"`
	// Upstreams are "ip", "ip:port" or "[ipv6]:port" (port 53 by default);
	// "tls://" before one of these asks it over TLS (RFC 7858; port 853 by
	// default; see tls). One of them may be the absolute path of a
	// resolv.conf file, whose nameservers take its place in the list
	// (watched; the last good file is kept).
	Upstreams []string `json:"upstreams"`
	// TLS is how the tls:// upstreams are verified, and the client
	// certificate shown to them.
	TLS *ForwardTLS `json:"tls,omitempty"`
	// Policy is random (default), round_robin or sequential.
	Policy string `json:"policy,omitempty"`
	// MaxFails is how many consecutive failures take an upstream out of
	// rotation until a health check succeeds (default 2; 0: never).
	MaxFails *int `json:"maxFails,omitempty"`
	// HealthCheck is the interval of the probes of an upstream out of
	// rotation (default 500ms).
	HealthCheck Duration `json:"healthCheck,omitempty"`
	// Timeout bounds one exchange with an upstream, 1ms-1m (default 2s).
	Timeout Duration `json:"timeout,omitempty"`
	// Expire closes a kept upstream connection unused for this long
	// (default 10s).
	Expire Duration `json:"expire,omitempty"`
	// ForceTCP asks over TCP always; PreferUDP asks over UDP even when the
	// client used TCP. They are exclusive.
	ForceTCP  bool `json:"forceTCP,omitempty"`
	PreferUDP bool `json:"preferUDP,omitempty"`
	// Cache is the route's own cache policy (RouteCache); unset, its
	// answers follow cache:.
	Cache *RouteCache `json:"cache,omitempty"`
}

// ForwardTLS is the TLS of a route's tls:// upstreams (CoreDNS's tls and
// tls_servername). The files are read when the route starts.
type ForwardTLS struct {
	// ServerName is the name sent (SNI) and verified in the upstreams'
	// certificates; unset, each upstream's IP address is verified.
	ServerName string `json:"serverName,omitempty"`
	// CAFile is a PEM file of the roots the certificates are verified
	// against; unset, the system's roots.
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile are a PEM client certificate and its key, both
	// or neither; unset, no client certificate.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
}

// ServerCache bounds the cache of forwarded answers, and the size of the
// per-snapshot cache of zone replies.
type ServerCache struct {
	// SuccessBytes bounds positive answers (default 32Mi), DenialBytes
	// NXDOMAIN and NODATA answers (default 8Mi).
	SuccessBytes ByteSize `json:"successBytes,omitempty"`
	DenialBytes  ByteSize `json:"denialBytes,omitempty"`
	// ZoneBytes bounds the replies made from the cluster zone that are kept
	// packed, per snapshot, in cluster mode (default 16Mi, at least 1Mi;
	// about 250 bytes a reply). They are never stale: a new snapshot starts
	// an empty cache.
	ZoneBytes ByteSize `json:"zoneBytes,omitempty"`
	CacheTTLs
	// Prefetch refreshes popular answers before they expire.
	Prefetch Prefetch `json:"prefetch"`
}

// CacheTTLs bound how long answers are kept, and served stale: the cache's
// and a route's (RouteCache).
type CacheTTLs struct {
	// MaxTTL (default 30s, as kubeadm's `cache 30`) and MinTTL (default 0s)
	// bound how long a positive answer is cached.
	MaxTTL Duration `json:"maxTTL,omitempty"`
	MinTTL Duration `json:"minTTL,omitempty"`
	// MaxNegativeTTL (default 5s) and MinNegativeTTL (default 0s) bound how
	// long a denial is cached.
	MaxNegativeTTL Duration `json:"maxNegativeTTL,omitempty"`
	MinNegativeTTL Duration `json:"minNegativeTTL,omitempty"`
	// ServeStale is how long past its expiry an answer may be served when
	// every upstream fails (RFC 8767; default 0s: off; at most 168h), with
	// its TTLs set to StaleTTL (default 30s).
	ServeStale Duration `json:"serveStale,omitempty"`
	StaleTTL   Duration `json:"staleTTL,omitempty"`
}

// Prefetch refreshes an answer asked Amount times within Window once its
// remaining TTL falls under Percentage % of its lifetime.
type Prefetch struct {
	// Amount is 0 (default: off) or more.
	Amount int `json:"amount,omitempty"`
	// Window defaults to 1m.
	Window Duration `json:"window,omitempty"`
	// Percentage is 10-90 (default 10).
	Percentage int `json:"percentage,omitempty"`
}

// HostsFile is a watched file in the /etc/hosts format.
type HostsFile struct {
	// File is the path; "" (default) reads none.
	File string `json:"file,omitempty"`
	// TTL of its answers (default 1h).
	TTL Duration `json:"ttl,omitempty"`
	// Reload is how often the file is stat'ed besides its file events
	// (default 5s; 0s: read once, no watch).
	Reload Duration `json:"reload,omitempty"`
}

// Override answers a name with fixed addresses (A and AAAA).
type Override struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	// TTL of the answers (default: hosts.ttl).
	TTL Duration `json:"ttl,omitempty"`
}

// Rewrite renames questions that match From to To. Names are compared in
// lowercase with a trailing dot, as CoreDNS normalizes them: From and To
// of every match type but regex get a trailing dot ("foo" is "foo.").
type Rewrite struct {
	// Match is how From is compared with the question name: exact
	// (default), prefix, suffix, substring or regex.
	Match string `json:"match"`
	// From is the name, part or pattern matched.
	From string `json:"from"`
	// To replaces what From matched. With regex it may use {1}..{9}.
	To string `json:"to"`
	// AnswerFrom and AnswerTo rewrite the answer's names back (a regex and
	// its replacement), as CoreDNS's "answer name". When both are empty the
	// answer gets the question's original name back ("answer auto").
	AnswerFrom string `json:"answerFrom,omitempty"`
	AnswerTo   string `json:"answerTo,omitempty"`
	// Continue goes on to the next rule after this one matched; by default
	// the first matching rule is the last, as CoreDNS's "stop".
	Continue bool `json:"continue,omitempty"`
}

// ServerLimits bound the resources clients can make the server hold.
type ServerLimits struct {
	// UDPInFlight bounds the UDP queries answered at once (default 2000);
	// further datagrams are dropped and counted.
	UDPInFlight int `json:"udpInFlight,omitempty"`
	// TCPConnections bounds the open TCP connections (default 1000).
	// When every one is taken, a new connection takes the place of one of
	// the client holding the most, idle or busy (the one with the oldest
	// activity), which is closed (RFC 7766 6.2.3: the client reconnects);
	// counted. A connection sending a message that does not parse is
	// closed at once.
	TCPConnections int `json:"tcpConnections,omitempty"`
	// TCPConnectionsPerClient bounds the open TCP connections of one client
	// address (default 250, or tcpConnections when lower); further ones
	// are closed at once and counted.
	TCPConnectionsPerClient int `json:"tcpConnectionsPerClient,omitempty"`
	// TCPIdleTimeout closes a connection with no query for this long
	// (default 10s).
	TCPIdleTimeout Duration `json:"tcpIdleTimeout,omitempty"`
	// TCPWriteTimeout closes a connection whose reply cannot be written
	// within it (default 5s).
	TCPWriteTimeout Duration `json:"tcpWriteTimeout,omitempty"`
}

// NodeLocal is the node-local stage: a caching forwarder that adds the
// autopath search-list option. It sends cluster names, and the names
// clusterConfig makes special, to the cluster DNS over TCP, and other
// names there too or, with external "direct", to the node's nameservers.
// Its cache is the cache section, shared with mode cluster.
type NodeLocal struct {
	// ClusterUpstream are the cluster DNS addresses (ip or ip:port): a
	// Service of its own with the cluster DNS pods as endpoints (node-cache's
	// kube-dns-upstream), never the Service IP the stage takes over in
	// transparent mode. Required in mode node-local (here or as
	// --cluster-upstream) and an error in mode cluster. Names in the cluster
	// zone, under ap.k8s.io and the reverse zones go there over TCP.
	ClusterUpstream []string `json:"clusterUpstream,omitempty"`
	// ClusterTimeout bounds one exchange with clusterUpstream, above 2.5s
	// (AutopathDeadline) and at most 1m (default 3s). Keep it above the
	// cluster DNS's forward timeout too: a slow name then gets the cluster
	// DNS's own SERVFAIL, and a timeout here only asks for a health probe
	// of the cluster DNS.
	ClusterTimeout Duration `json:"clusterTimeout,omitempty"`
	// ClusterPipeline sends the queries to clusterUpstream pipelined over
	// a few TCP connections, many in flight on each (RFC 7766), instead of
	// one connection per query in flight (default true). This project's
	// cluster DNS answers each connection's queries concurrently, so the
	// node is one client with a few connections there, never throttled by
	// the cluster DNS's connections per client (a bound meant for one
	// pod). Set false when clusterUpstream is a server that answers one
	// query of a connection at a time (CoreDNS, kube-dns, a cluster DNS
	// from before issue 66): each query would wait for the one before.
	ClusterPipeline *bool `json:"clusterPipeline,omitempty"`
	// ClusterConfig is the path of the cluster DNS's own
	// ServerConfiguration (the same ConfigMap, mounted). The stage reads and
	// watches it to learn which names the cluster DNS treats specially
	// (forward routes, hosts, overrides, rewrites) and sends them to
	// clusterUpstream, so that they get the cluster DNS's answers. It must
	// be an absolute path; "" (default) reads none. Mode node-local only.
	ClusterConfig string `json:"clusterConfig,omitempty"`
	// External says where the other names go: "cluster" (default) sends
	// them to clusterUpstream too, so every name gets the cluster DNS's
	// answer; "direct" sends them to the node's nameservers (resolvConf),
	// as NodeLocal DNSCache does, and needs resolvConf. Mode node-local
	// only.
	External string `json:"external,omitempty"`
	// ResolvConf is the node's resolv.conf (watched; default
	// /etc/resolv.conf; "auto" picks systemd-resolved's upstream file when
	// the node runs it): its search domains end autopath search lists,
	// and with external "direct" its nameservers answer every other name.
	// "" for none.
	ResolvConf *string `json:"resolvConf,omitempty"`
	// LocalIPs are addresses to serve port 53 on besides listen:
	// 169.254.20.10 and, in transparent mode, the cluster DNS Service IP,
	// so that every ClusterFirst pod is answered on the node.
	LocalIPs []string `json:"localIPs,omitempty"`
	// SetupInterface puts localIPs on InterfaceName (default
	// "nodelocaldns", a dummy device, or lo on a kernel without the dummy
	// type) before binding them, and keeps them there.
	SetupInterface bool   `json:"setupInterface,omitempty"`
	InterfaceName  string `json:"interfaceName,omitempty"`
	// SetupNotrack adds an nftables table of its own that takes DNS to and
	// from localIPs out of connection tracking (node-cache's NOTRACK
	// rules), once the stage serves, and keeps it in place.
	SetupNotrack bool `json:"setupNotrack,omitempty"`
	// SkipTeardown keeps the interface addresses and the table when the
	// stage stops; by default the last instance on the node removes them,
	// so that the Service IP falls back to the cluster DNS.
	SkipTeardown bool `json:"skipTeardown,omitempty"`
	// LockFile is the file whose lock tells instances on the node apart
	// (default /run/dnsconfigurer/node-local.lock): an instance that stops
	// while another runs (a surge) leaves the setup to it, and one that a
	// newer instance supersedes is not ready. Each instance's entry is in
	// the directory beside it (LockFile with ".d").
	LockFile string `json:"lockFile,omitempty"`
	// PreferZone forwards cluster queries to the ready endpoints of
	// upstreamService in the node's topology zone first, then the other
	// zones', then clusterUpstream (default true). It needs an API server
	// (the in-cluster config, or kubeconfig) and nodeName; without them
	// the stage asks clusterUpstream only. Mode node-local only.
	PreferZone *bool `json:"preferZone,omitempty"`
	// UpstreamService is the Service behind clusterUpstream, as
	// namespace/name: its EndpointSlices are the cluster DNS pods (default
	// kube-system/dnsconfigurer-dns-upstream). Mode node-local only.
	UpstreamService string `json:"upstreamService,omitempty"`
	// WatchJitter is the longest the stage waits, at random, before it
	// lists upstreamService's EndpointSlices again after its watch failed
	// (an API server restart), on top of client-go's backoff: the
	// stages of every node come back spread over it rather than
	// together (default 10s; "0s": no wait; at most 5m). The order it
	// keeps meanwhile is the last it had. Used in mode node-local.
	WatchJitter Duration `json:"watchJitter,omitempty"`
	// NodeName is this node's name (--node-name, default $NODE_NAME): its
	// topology zone label picks the zone, and both go to the cluster DNS
	// in the topology option. Mode node-local only.
	NodeName string `json:"nodeName,omitempty"`
}

// ClusterPipelineOn is clusterPipeline (the default when unset).
func (n *NodeLocal) ClusterPipelineOn() bool {
	return deref(n.ClusterPipeline, DefaultNodeLocalClusterPipeline)
}

// SetDefaults fills unset fields.
func (c *ServerConfiguration) SetDefaults() {
	setString(&c.Mode, DefaultServerMode)
	setString(&c.ClusterDomain, DefaultServerClusterDomain)
	setString(&c.LogFormat, DefaultLogFormat)
	setString(&c.LogLevel, DefaultLogLevel)
	if c.Pods == "" && c.AutopathBySource {
		c.Pods = PodsVerified
	}
	setString(&c.Pods, DefaultPodRecords)
	setPtr(&c.TTL, DefaultRecordTTL)
	setPtr(&c.Autopath, DefaultAutopath && !c.NoClusterZone) // no cluster, no search paths to walk
	setInt(&c.AutopathOptionCode, DefaultOptionCode)
	c.setTopologyDefaults()
	setPtr(&c.NamespaceMetrics, DefaultNamespaceMetrics)
	for i := range c.Forward {
		c.Forward[i].setDefaults()
	}
	setInt(&c.MaxConcurrent, DefaultMaxConcurrent)
	setInt(&c.MaxConcurrentPerDomain, max(c.MaxConcurrent/10, 1))
	setString(&c.ShedRcode, ShedServfail)
	c.Cache.setDefaults()
	setPtr(&c.Loadbalance, DefaultLoadbalance)
	setString(&c.Hosts.TTL, DefaultHostsTTL)
	setString(&c.Hosts.Reload, DefaultHostsReload)
	for i := range c.Overrides {
		setString(&c.Overrides[i].TTL, c.Hosts.TTL)
	}
	for i := range c.Rewrites {
		c.Rewrites[i].setDefaults()
	}
	for i := range c.Templates {
		c.Templates[i].setDefaults()
	}
	c.External.setDefaults()
	setString(&c.Lameduck, DefaultLameduck)
	setInt(&c.Limits.UDPInFlight, DefaultUDPInFlight)
	setInt(&c.Limits.TCPConnections, DefaultTCPConnections)
	setInt(&c.Limits.TCPConnectionsPerClient, min(DefaultTCPConnectionsPerClient, c.Limits.TCPConnections))
	setString(&c.Limits.TCPIdleTimeout, DefaultTCPIdleTimeout)
	setString(&c.Limits.TCPWriteTimeout, DefaultTCPWriteTimeout)
	setPtr(&c.NodeLocal.ResolvConf, DefaultNodeLocalResolvConf)
	setString(&c.NodeLocal.InterfaceName, DefaultNodeLocalInterface)
	setString(&c.NodeLocal.LockFile, DefaultNodeLocalLockFile)
	setString(&c.NodeLocal.ClusterTimeout, DefaultNodeLocalClusterTimeout)
	setString(&c.NodeLocal.WatchJitter, DefaultNodeLocalWatchJitter)
	setPtr(&c.NodeLocal.ClusterPipeline, DefaultNodeLocalClusterPipeline)
	if c.Mode == ModeNodeLocal {
		setString(&c.NodeLocal.External, DefaultNodeLocalExternal)
	}
}

func (r *ForwardRoute) setDefaults() {
	setString(&r.Policy, PolicyRandom)
	if r.MaxFails == nil {
		r.MaxFails = ptr(DefaultMaxFails)
		if r.Cache != nil {
			r.Cache.setDefaults()
		}
	}
	setString(&r.HealthCheck, DefaultHealthCheck)
	setString(&r.Timeout, DefaultTimeout)
	setString(&r.Expire, DefaultExpire)
}

func (c *ServerCache) setDefaults() {
	setString(&c.SuccessBytes, DefaultSuccessBytes)
	setString(&c.DenialBytes, DefaultDenialBytes)
	setString(&c.ZoneBytes, DefaultZoneBytes)
	setString(&c.MaxTTL, DefaultMaxTTL)
	setString(&c.MinTTL, "0s")
	setString(&c.MaxNegativeTTL, DefaultMaxNegativeTTL)
	setString(&c.MinNegativeTTL, "0s")
	setString(&c.ServeStale, DefaultServeStale)
	setString(&c.StaleTTL, DefaultStaleTTL)
	setString(&c.Prefetch.Window, DefaultPrefetchWindow)
	setInt(&c.Prefetch.Percentage, DefaultPrefetchPercentage)
}

func setString[S ~string](p *S, def S) {
	if *p == "" {
		*p = def
	}
}

func setInt(p *int, def int) {
	if *p == 0 {
		*p = def
	}
}

func ptr[T any](v T) *T { return &v }

// setPtr points an unset optional field at its default.
func setPtr[T any](p **T, def T) {
	if *p == nil {
		*p = ptr(def)
	}
}

// deref is an optional field's value: *p, def when p is unset.
func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// Validate reports every invalid field by its path (see the type's doc);
// call it after SetDefaults.
func (c *ServerConfiguration) Validate() error {
	var e fieldErrors
	c.validateTop(&e)
	c.validateSource(&e)
	c.validateForward(&e)
	c.Cache.validate(&e, "cache.")
	c.validateStatic(&e)
	c.validateRewrites(&e)
	c.validateTemplates(&e)
	c.External.validate(&e, c.Mode)
	c.validateLimits(&e)
	c.NodeLocal.validate(&e, c.Mode)
	c.validateNodeLocalAnswers(&e)
	c.validateTopology(&e)
	return e.join()
}

// validateNodeLocalAnswers refuses, in mode node-local, the settings that
// change answers (hosts, overrides; rewrites are validateRewrites'): the
// stage has no answer stack, and they belong in the cluster DNS's
// configuration, whose names nodeLocal.clusterConfig sends to it.
func (c *ServerConfiguration) validateNodeLocalAnswers(e *fieldErrors) {
	if c.Mode != ModeNodeLocal {
		return
	}
	const where = "put it in the cluster DNS's configuration and point nodeLocal.clusterConfig at that file: its names then go to the cluster DNS"
	if c.Hosts.File != "" {
		e.add("hosts.file", "not used in mode %q: %s", ModeNodeLocal, where)
	}
	if len(c.Overrides) > 0 {
		e.add("overrides", "not used in mode %q: %s", ModeNodeLocal, where)
	}
}

// CheckComplete reports the required fields Validate leaves to the flags:
// listen, and nodeLocal.clusterUpstream in mode node-local. Call it after
// applying the flags.
func (c *ServerConfiguration) CheckComplete() error {
	var e fieldErrors
	if len(c.Listen) == 0 && len(c.NodeLocal.LocalIPs) == 0 {
		e.add("listen", "required: at least one address such as \"0.0.0.0:53\" (or nodeLocal.localIPs)")
	}
	if c.Mode == ModeNodeLocal && len(c.NodeLocal.ClusterUpstream) == 0 {
		e.add("nodeLocal.clusterUpstream", "required in mode %q", ModeNodeLocal)
	}
	if c.CoreDNSMetrics && c.MetricsListen == "" {
		e.add("coreDNSMetrics", "needs metricsListen: without it no /metrics is served")
	}
	return e.join()
}

func (c *ServerConfiguration) validateTop(e *fieldErrors) {
	if !oneOf(c.Mode, ModeCluster, ModeNodeLocal) {
		e.add("mode", "%q: must be %q or %q", c.Mode, ModeCluster, ModeNodeLocal)
	}
	seen := map[string]int{}
	for i, l := range c.Listen {
		path := fmt.Sprintf("listen[%d]", i)
		if err := checkListen(l); err != nil {
			e.add(path, "%q: %v", l, err)
		} else if j, dup := seen[l]; dup {
			e.add(path, "%q: the same as listen[%d]", l, j)
		} else {
			seen[l] = i
		}
	}
	c.checkBindOverlap(e)
	if err := ValidateClusterDomain(c.ClusterDomain); err != nil {
		e.add("clusterDomain", "%v", err)
	}
	c.validateClusterset(e)
	if c.MetricsListen != "" {
		if err := checkListen(c.MetricsListen); err != nil {
			e.add("metricsListen", "%q: %v", c.MetricsListen, err)
		}
	}
	if !oneOf(c.LogFormat, "text", "json") {
		e.add("logFormat", "%q: must be text or json", c.LogFormat)
	}
	if !oneOf(c.LogLevel, "debug", "info", "warn", "error") {
		e.add("logLevel", "%q: must be debug, info, warn or error", c.LogLevel)
	}
}

func (c *ServerConfiguration) validateSource(e *fieldErrors) {
	if c.Objects != "" && c.Kubeconfig != "" {
		e.add("objects", "excludes kubeconfig: give one record source")
	}
	if c.Mode == ModeNodeLocal {
		if c.Objects != "" {
			e.add("objects", "not used in mode %q, which has no records", ModeNodeLocal)
		}
		if c.NoClusterZone {
			e.add("noClusterZone", "not used in mode %q, which has no records", ModeNodeLocal)
		}
	}
	if c.NoClusterZone {
		for _, f := range []struct {
			name string
			set  bool
		}{{"kubeconfig", c.Kubeconfig != ""}, {"objects", c.Objects != ""}, {"autopath", c.Autopath != nil && *c.Autopath},
			{"autopathBySource", c.AutopathBySource}, {"reverseZones", len(c.ReverseZones) > 0},
			{"reverseScope", len(c.ReverseScope) > 0}, {"external", c.External != nil}} {
			if f.set {
				e.add(f.name, "not used with noClusterZone: there are no cluster records")
			}
		}
	}
	for i, ns := range c.Namespaces {
		if !IsDNSLabel(ns) {
			e.add(fmt.Sprintf("namespaces[%d]", i), "%q: not a namespace name (a DNS label)", ns)
		}
	}
	if !oneOf(c.Pods, PodsVerified, PodsInsecure, PodsDisabled) {
		e.add("pods", "%q: must be %q, %q or %q", c.Pods, PodsVerified, PodsInsecure, PodsDisabled)
	} else if c.AutopathBySource && c.Pods != PodsVerified {
		e.add("pods", "%q: autopathBySource needs %q", c.Pods, PodsVerified)
	}
	if c.TTL != nil && (*c.TTL < 0 || *c.TTL > MaxRecordTTL) {
		e.add("ttl", "%d: must be between 0 and %d", *c.TTL, MaxRecordTTL)
	}
	if c.AutopathBySource && c.Autopath != nil && !*c.Autopath {
		e.add("autopathBySource", "needs autopath: true")
	}
	if c.AutopathOptionCode < MinLocalOptionCode || c.AutopathOptionCode > MaxLocalOptionCode {
		e.add("autopathOptionCode", "%d: not a local option code (%d-%d)", c.AutopathOptionCode, MinLocalOptionCode, MaxLocalOptionCode)
	}
	if c.NamespaceMetrics != nil && (*c.NamespaceMetrics < 0 || *c.NamespaceMetrics > MaxNamespaceMetrics) {
		e.add("namespaceMetrics", "%d: must be between 0 and %d", *c.NamespaceMetrics, MaxNamespaceMetrics)
	}
}

func (c *ServerConfiguration) validateForward(e *fieldErrors) {
	if c.Mode == ModeNodeLocal && len(c.Forward) > 0 {
		e.add("forward", "not used in mode %q, which forwards to nodeLocal.clusterUpstream: put stub domains in the cluster DNS's configuration and point nodeLocal.clusterConfig at that file", ModeNodeLocal)
	}
	zones := map[string]int{}
	for i := range c.Forward {
		r := &c.Forward[i]
		prefix := fmt.Sprintf("forward[%d].", i)
		r.validate(e, prefix)
		if r.Cache != nil {
			z, _ := normalizeName(r.Zone)
			r.Cache.validate(e, prefix+"cache.", z, c.Cache)
		}
		if z, err := normalizeName(r.Zone); err == nil && z != "." && z == c.ClusterZone() && !c.NoClusterZone {
			e.add(prefix+"zone", "%q: the cluster domain itself, whose names come from the cluster; forward a zone inside it instead", r.Zone)
		}
		if z, err := normalizeName(r.Zone); err == nil {
			if j, dup := zones[z]; dup {
				e.add(prefix+"zone", "%q: forward[%d] already routes zone %q", r.Zone, j, z)
			} else {
				zones[z] = i
			}
		}
	}
	if c.MaxConcurrent < 1 {
		e.add("maxConcurrent", "%d: must be > 0", c.MaxConcurrent)
	}
	if c.MaxConcurrentPerDomain < 0 {
		e.add("maxConcurrentPerDomain", "%d: must be >= 0 (deprecated, no effect: maxConcurrent is shared per client)", c.MaxConcurrentPerDomain)
	}
	if c.FailFastAllUnhealthy {
		for i, r := range c.Forward {
			if r.MaxFailsValue() == 0 {
				e.add(fmt.Sprintf("forward[%d].maxFails", i), "0 (no health checks) does not go with failFastAllUnhealthy, which needs them")
			}
		}
	}
	if !oneOf(c.ShedRcode, ShedServfail, ShedRefused) {
		e.add("shedRcode", "%q: must be %q or %q", c.ShedRcode, ShedServfail, ShedRefused)
	}
}

func (r *ForwardRoute) validate(e *fieldErrors, prefix string) {
	zone, err := normalizeName(r.Zone)
	if err != nil {
		e.add(prefix+"zone", "%q: %v", r.Zone, err)
	}
	for j, x := range r.Except {
		path := fmt.Sprintf("%sexcept[%d]", prefix, j)
		n, err := normalizeName(x)
		switch {
		case err != nil:
			e.add(path, "%q: %v", x, err)
		case zone == "":
		case n == zone:
			e.add(path, "%q: the zone itself; remove the route instead", x)
		case !inZone(n, zone):
			e.add(path, "%q: not inside zone %q", x, r.Zone)
		}
	}
	if len(r.Upstreams) == 0 {
		e.add(prefix+"upstreams", "required: at least one address, or the path of a resolv.conf")
	}
	r.validateUpstreams(e, prefix)
	if !oneOf(r.Policy, PolicyRandom, PolicyRoundRobin, PolicySequential) {
		e.add(prefix+"policy", "%q: must be %q, %q or %q", r.Policy, PolicyRandom, PolicyRoundRobin, PolicySequential)
	}
	if r.MaxFails != nil && *r.MaxFails < 0 {
		e.add(prefix+"maxFails", "%d: must be >= 0", *r.MaxFails)
	}
	r.HealthCheck.check(e, prefix+"healthCheck", time.Millisecond, time.Minute)
	r.Timeout.check(e, prefix+"timeout", time.Millisecond, time.Minute)
	r.Expire.check(e, prefix+"expire", time.Millisecond, time.Hour)
	if r.ForceTCP && r.PreferUDP {
		e.add(prefix+"forceTCP", "excludes preferUDP")
	}
}

// validateUpstreams checks the upstreams (addresses, tls:// addresses, at
// most one resolv.conf path) and the TLS settings.
func (r *ForwardRoute) validateUpstreams(e *fieldErrors, prefix string) {
	seen := map[netip.AddrPort]int{} // over TLS or not: one upstream per address
	file, tlsUps := -1, 0
	for j, u := range r.Upstreams {
		path := fmt.Sprintf("%supstreams[%d]", prefix, j)
		if strings.HasPrefix(u, "/") {
			if file >= 0 {
				e.add(path, "%q: a second resolv.conf path (upstreams[%d] is one): one file per route", u, file)
			}
			file = j
			continue
		}
		ap, isTLS, err := ParseTLSUpstream(u, parseUpstream)
		if err != nil {
			e.add(path, "%q: %v", u, err)
			continue
		}
		if isTLS {
			tlsUps++
		}
		if k, dup := seen[ap]; dup {
			e.add(path, "%q: the same upstream as upstreams[%d]", u, k)
			continue
		}
		seen[ap] = j
	}
	t := r.TLS
	if t == nil {
		return
	}
	if tlsUps == 0 {
		e.add(prefix+"tls", "set, but no upstream is tls://")
	}
	if t.ServerName != "" {
		if _, err := normalizeName(t.ServerName); err != nil || strings.HasSuffix(t.ServerName, ".") {
			e.add(prefix+"tls.serverName", "%q: not a host name", t.ServerName)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		if t.CertFile == "" {
			e.add(prefix+"tls.certFile", "required with keyFile")
		} else {
			e.add(prefix+"tls.keyFile", "required with certFile")
		}
	}
}

// TLSPrefix marks an upstream asked over TLS; DefaultTLSPort is its port
// when it names none (RFC 7858).
const (
	TLSPrefix      = "tls://"
	DefaultTLSPort = 853
)

// ParseTLSUpstream reads an upstream: parse's forms, alone or after
// TLSPrefix (port DefaultTLSPort by default). tls says which.
func ParseTLSUpstream(s string, parse func(string) (netip.AddrPort, error)) (ap netip.AddrPort, tls bool, err error) {
	rest, tls := strings.CutPrefix(s, TLSPrefix)
	if a, err := netip.ParseAddr(strings.Trim(rest, "[]")); err == nil && tls {
		return netip.AddrPortFrom(a.Unmap(), DefaultTLSPort), true, nil
	}
	ap, err = parse(rest)
	return ap, tls, err
}

func (c *ServerCache) validate(e *fieldErrors, prefix string) {
	c.SuccessBytes.check(e, prefix+"successBytes")
	c.DenialBytes.check(e, prefix+"denialBytes")
	if c.ZoneBytes.check(e, prefix+"zoneBytes"); c.ZoneBytes.Bytes() > 0 && c.ZoneBytes.Bytes() < MinZoneBytes {
		e.add(prefix+"zoneBytes", "%q: must be at least 1Mi", c.ZoneBytes)
	}
	maxTTL := c.MaxTTL.check(e, prefix+"maxTTL", time.Second, maxDNSTTL)
	minTTL := c.MinTTL.check(e, prefix+"minTTL", 0, maxDNSTTL)
	if maxTTL > 0 && minTTL > maxTTL {
		e.add(prefix+"minTTL", "%q: over maxTTL %q", c.MinTTL, c.MaxTTL)
	}
	maxNeg := c.MaxNegativeTTL.check(e, prefix+"maxNegativeTTL", time.Second, maxDNSTTL)
	minNeg := c.MinNegativeTTL.check(e, prefix+"minNegativeTTL", 0, maxDNSTTL)
	if maxNeg > 0 && minNeg > maxNeg {
		e.add(prefix+"minNegativeTTL", "%q: over maxNegativeTTL %q", c.MinNegativeTTL, c.MaxNegativeTTL)
	}
	c.ServeStale.check(e, prefix+"serveStale", 0, 7*24*time.Hour)
	c.StaleTTL.check(e, prefix+"staleTTL", time.Second, maxDNSTTL)
	if c.Prefetch.Amount < 0 {
		e.add(prefix+"prefetch.amount", "%d: must be >= 0", c.Prefetch.Amount)
	}
	c.Prefetch.Window.check(e, prefix+"prefetch.window", time.Second, 24*time.Hour)
	if c.Prefetch.Percentage < 10 || c.Prefetch.Percentage > 90 {
		e.add(prefix+"prefetch.percentage", "%d: must be between 10 and 90", c.Prefetch.Percentage)
	}
}

func (c *ServerConfiguration) validateStatic(e *fieldErrors) {
	c.Hosts.TTL.check(e, "hosts.ttl", 0, maxDNSTTL)
	c.Hosts.Reload.check(e, "hosts.reload", 0, time.Hour)
	zone, zoneErr := normalizeName(c.ClusterDomain)
	names := map[string]int{}
	for i, o := range c.Overrides {
		prefix := fmt.Sprintf("overrides[%d].", i)
		n, err := normalizeName(o.Name)
		switch {
		case err != nil:
			e.add(prefix+"name", "%q: %v", o.Name, err)
		case n == ".":
			e.add(prefix+"name", "%q: the root is not a host name", o.Name)
		case zoneErr == nil && inZone(n, zone):
			e.add(prefix+"name", "%q: inside the cluster domain %q, whose names come from the cluster only", o.Name, c.ClusterDomain)
		default:
			if j, dup := names[n]; dup {
				e.add(prefix+"name", "%q: already overridden by overrides[%d]", o.Name, j)
			}
			names[n] = i
		}
		if len(o.Addresses) == 0 {
			e.add(prefix+"addresses", "required: at least one IP address")
		}
		for j, a := range o.Addresses {
			if _, err := netip.ParseAddr(a); err != nil {
				e.add(fmt.Sprintf("%saddresses[%d]", prefix, j), "%q: not an IP address", a)
			}
		}
		o.TTL.check(e, prefix+"ttl", 0, maxDNSTTL)
	}
	scope := c.validateReverseScope(e)
	seen := map[netip.Prefix]int{}
	for i, z := range c.ReverseZones {
		path := fmt.Sprintf("reverseZones[%d]", i)
		if p, ok := checkCIDR(e, path, z); ok {
			if j, dup := seen[p.Masked()]; dup {
				e.add(path, "%q: the same network as reverseZones[%d]", z, j)
			}
			seen[p.Masked()] = i
			if len(scope) > 0 && !Within(scope, p.Masked()) {
				e.add(path, "%q: outside reverseScope, whose reverse names are forwarded", z)
			}
		}
	}
	c.Lameduck.check(e, "lameduck", 0, time.Minute)
	if c.UDPAnswerLimit < 0 || c.UDPAnswerLimit > MaxUDPAnswerLimit {
		e.add("udpAnswerLimit", "%d: must be between 0 (off) and %d", c.UDPAnswerLimit, MaxUDPAnswerLimit)
	}
	if c.UDPSockets < 0 || c.UDPSockets > MaxUDPSockets {
		e.add("udpSockets", "%d: must be between 0 (GOMAXPROCS) and %d", c.UDPSockets, MaxUDPSockets)
	}
}

func (c *ServerConfiguration) validateLimits(e *fieldErrors) {
	l := &c.Limits
	if l.UDPInFlight < 1 {
		e.add("limits.udpInFlight", "%d: must be > 0", l.UDPInFlight)
	} else if c.Mode == ModeCluster && len(c.Forward) > 0 && c.MaxConcurrent > 0 && l.UDPInFlight <= c.MaxConcurrent {
		e.add("limits.udpInFlight", "%d: must be over maxConcurrent (%d), or queries waiting on upstreams can hold every slot and in-cluster names go unanswered",
			l.UDPInFlight, c.MaxConcurrent)
	}
	if l.TCPConnections < 1 {
		e.add("limits.tcpConnections", "%d: must be > 0", l.TCPConnections)
	} else if l.TCPConnectionsPerClient < 1 || l.TCPConnectionsPerClient > l.TCPConnections {
		e.add("limits.tcpConnectionsPerClient", "%d: must be between 1 and tcpConnections (%d)", l.TCPConnectionsPerClient, l.TCPConnections)
	}
	l.TCPIdleTimeout.check(e, "limits.tcpIdleTimeout", time.Millisecond, time.Hour)
	l.TCPWriteTimeout.check(e, "limits.tcpWriteTimeout", time.Millisecond, time.Minute)
}

func (n *NodeLocal) validate(e *fieldErrors, mode string) {
	if mode == ModeCluster && len(n.ClusterUpstream) > 0 {
		e.add("nodeLocal.clusterUpstream", "only used in mode %q", ModeNodeLocal)
	}
	for i, u := range n.ClusterUpstream {
		if _, err := parseUpstream(u); err != nil {
			e.add(fmt.Sprintf("nodeLocal.clusterUpstream[%d]", i), "%q: %v", u, err)
		}
	}
	if d := n.ClusterTimeout.check(e, "nodeLocal.clusterTimeout", time.Millisecond, time.Minute); d > 0 && d <= AutopathDeadline {
		e.add("nodeLocal.clusterTimeout", "%q: must be above %v, the longest the cluster DNS takes for an autopath query: a name slow at the cluster DNS would time out here instead of being its SERVFAIL", n.ClusterTimeout, AutopathDeadline)
	}
	n.WatchJitter.check(e, "nodeLocal.watchJitter", 0, MaxNodeLocalWatchJitter)
	if mode == ModeCluster && n.ClusterConfig != "" {
		e.add("nodeLocal.clusterConfig", "only used in mode %q", ModeNodeLocal)
	} else if n.ClusterConfig != "" && !filepath.IsAbs(n.ClusterConfig) {
		e.add("nodeLocal.clusterConfig", "%q: must be an absolute path", n.ClusterConfig)
	}
	switch {
	case mode == ModeCluster && n.External != "":
		e.add("nodeLocal.external", "only used in mode %q", ModeNodeLocal)
	case mode == ModeNodeLocal && !oneOf(n.External, ExternalCluster, ExternalDirect):
		e.add("nodeLocal.external", "%q: must be %q or %q", n.External, ExternalCluster, ExternalDirect)
	case mode == ModeNodeLocal && n.External == ExternalDirect && n.ResolvConfPath() == "":
		e.add("nodeLocal.external", "%q needs nodeLocal.resolvConf, the node's nameservers", ExternalDirect)
	}
	if mode == ModeCluster && (len(n.LocalIPs) > 0 || n.SetupInterface || n.SetupNotrack) {
		e.add("nodeLocal", "localIPs, setupInterface and setupNotrack are for mode %q", ModeNodeLocal)
	}
	seen := map[netip.Addr]int{}
	for i, s := range n.LocalIPs {
		path := fmt.Sprintf("nodeLocal.localIPs[%d]", i)
		ip, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			e.add(path, "%q: not an IP address", s)
			continue
		case CheckNodeLocalIP(s) != nil:
			e.add(path, "%v", CheckNodeLocalIP(s))
		case ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast():
			e.add(path, "%q: a loopback, unspecified or multicast address cannot be a node-local address", s)
		}
		if j, dup := seen[ip]; dup {
			e.add(path, "%q: also nodeLocal.localIPs[%d]", s, j)
		}
		seen[ip] = i
	}
	if (n.SetupInterface || n.SetupNotrack) && len(n.LocalIPs) == 0 {
		e.add("nodeLocal.localIPs", "required by setupInterface and setupNotrack")
	}
	if n.InterfaceName != "" && (len(n.InterfaceName) > 15 || strings.ContainsAny(n.InterfaceName, "/ \t\n:")) {
		e.add("nodeLocal.interfaceName", "%q: not a Linux interface name (at most 15 characters, no '/', ':' or space)", n.InterfaceName)
	}
	if n.SetupInterface || n.SetupNotrack {
		if n.LockFile == "" || !filepath.IsAbs(n.LockFile) {
			e.add("nodeLocal.lockFile", "%q: must be an absolute path", n.LockFile)
		}
	}
}

// Typed accessors; call them after a Validate that returned nil.

// AutopathEnabled reports autopath (true when unset).
func (c *ServerConfiguration) AutopathEnabled() bool {
	return deref(c.Autopath, DefaultAutopath)
}

// TopNamespaces is NamespaceMetrics (DefaultNamespaceMetrics when unset; 0:
// the namespace query metrics are off).
func (c *ServerConfiguration) TopNamespaces() int {
	return deref(c.NamespaceMetrics, DefaultNamespaceMetrics)
}

// CoreDNSServer is the value of the label server of the CoreDNS metrics
// (coreDNSMetrics), in CoreDNS's form "dns://[<bind>]:<port>" for the
// first listen address (else the first nodeLocal.localIPs, port 53):
// "dns://:53" for an unspecified address, as a CoreDNS server block
// without bind (kubeadm's), else "dns://169.254.20.10:53", as one with
// bind.
func (c *ServerConfiguration) CoreDNSServer() string {
	addr := ""
	switch {
	case len(c.Listen) > 0:
		addr = c.Listen[0]
	case len(c.NodeLocal.LocalIPs) > 0:
		addr = net.JoinHostPort(c.NodeLocal.LocalIPs[0], "53")
	default:
		return "dns://:53"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "dns://" + addr
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = ""
	}
	if host == "" {
		return "dns://:" + port
	}
	return "dns://" + net.JoinHostPort(host, port)
}

// LoadbalanceEnabled reports loadbalance (true when unset).
func (c *ServerConfiguration) LoadbalanceEnabled() bool {
	return deref(c.Loadbalance, DefaultLoadbalance)
}

// RecordTTL is ttl in seconds (DefaultRecordTTL when unset).
func (c *ServerConfiguration) RecordTTL() uint32 {
	return uint32(deref(c.TTL, DefaultRecordTTL))
}

// ShedRcodeValue is shedRcode as a DNS rcode: 5 (REFUSED) or 2 (SERVFAIL).
func (c *ServerConfiguration) ShedRcodeValue() int {
	if c.ShedRcode == ShedRefused {
		return 5
	}
	return 2
}

// ClusterZone is clusterDomain as a lowercase FQDN ("cluster.local.").
func (c *ServerConfiguration) ClusterZone() string {
	n, _ := normalizeName(c.ClusterDomain)
	return n
}

// ReverseZonePrefixes are reverseZones parsed and masked.
func (c *ServerConfiguration) ReverseZonePrefixes() []netip.Prefix { return masked(c.ReverseZones) }

// ReverseScopePrefixes are reverseScope parsed and masked.
func (c *ServerConfiguration) ReverseScopePrefixes() []netip.Prefix { return masked(c.ReverseScope) }

// masked are the valid CIDRs of cidrs, masked.
func masked(cidrs []string) []netip.Prefix {
	return valid(cidrs, func(s string) (netip.Prefix, error) {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	})
}

// valid are what parse makes of each of in that it parses (the fields'
// values are validated before they are read: nothing is lost).
func valid[T any](in []string, parse func(string) (T, error)) []T {
	var out []T
	for _, s := range in {
		if v, err := parse(s); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// ZoneName is the route's zone as a lowercase FQDN ("." or "corp.example.").
func (r *ForwardRoute) ZoneName() string {
	n, _ := normalizeName(r.Zone)
	return n
}

// ExceptNames are the route's except names as lowercase FQDNs.
func (r *ForwardRoute) ExceptNames() []string { return valid(r.Except, normalizeName) }

// ResolvConf is the path of the resolv.conf whose nameservers are among
// the route's upstreams, or "" when the upstreams are all addresses.
func (r *ForwardRoute) ResolvConf() string {
	for _, u := range r.Upstreams {
		if strings.HasPrefix(u, "/") {
			return u
		}
	}
	return ""
}

// UpstreamAddrs are the plain (not tls://) upstream addresses with port 53
// where none is given; a resolv.conf path adds none.
func (r *ForwardRoute) UpstreamAddrs() []netip.AddrPort {
	return parseUpstreams(r.Upstreams)
}

// MaxFailsValue is maxFails (DefaultMaxFails when unset).
func (r *ForwardRoute) MaxFailsValue() int {
	return deref(r.MaxFails, DefaultMaxFails)
}

// IPs are the override's addresses, IPv4-mapped ones unmapped.
func (o *Override) IPs() []netip.Addr {
	return valid(o.Addresses, func(s string) (netip.Addr, error) {
		a, err := netip.ParseAddr(s)
		return a.Unmap(), err
	})
}

// NameFQDN is the override's name as a lowercase FQDN.
func (o *Override) NameFQDN() string {
	n, _ := normalizeName(o.Name)
	return n
}

// ClusterUpstreamAddrs are clusterUpstream with port 53 where none is given.
func (n *NodeLocal) ClusterUpstreamAddrs() []netip.AddrPort {
	return parseUpstreams(n.ClusterUpstream)
}

// ListenAddrs is listen, then port 53 of every nodeLocal.localIPs address
// not already listed.
func (c *ServerConfiguration) ListenAddrs() []string {
	out := append([]string(nil), c.Listen...)
	for _, ip := range c.NodeLocal.LocalAddrs() {
		a := netip.AddrPortFrom(ip, 53).String()
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// LocalAddrs is localIPs parsed.
func (n *NodeLocal) LocalAddrs() []netip.Addr {
	var ips []netip.Addr
	for _, s := range n.LocalIPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// ExternalMode is external (DefaultNodeLocalExternal when unset).
func (n *NodeLocal) ExternalMode() string {
	if n.External == "" {
		return DefaultNodeLocalExternal
	}
	return n.External
}

// ResolvConfPath is resolvConf ("" for none; the default when unset).
func (n *NodeLocal) ResolvConfPath() string {
	return deref(n.ResolvConf, DefaultNodeLocalResolvConf)
}

func parseUpstreams(us []string) []netip.AddrPort {
	var aps []netip.AddrPort
	for _, u := range us {
		if ap, err := parseUpstream(u); err == nil {
			aps = append(aps, ap)
		}
	}
	return aps
}

// parseUpstream reads "ip" (port 53), "ip:port" or "[ipv6]:port".
func parseUpstream(s string) (netip.AddrPort, error) {
	if strings.HasPrefix(s, "$(") {
		// kubelet leaves $(VAR) as it is when VAR is not set: in
		// deploy/nodelocal, the upstream Service did not exist when
		// the pod started.
		return netip.AddrPort{}, fmt.Errorf("an unexpanded variable: kubelet sets %s only when the Service exists before the pod starts (create it, then delete the pod)", strings.Trim(s, "$()"))
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), 53), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("not an address such as \"10.0.0.53\", \"10.0.0.53:53\" or \"[fd00::53]:53\"")
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not an IP address", host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return netip.AddrPort{}, fmt.Errorf("invalid port")
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}

// checkListen accepts "ip:port" and ":port" (port 0 picks a free one).
func checkListen(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("not an address such as \"0.0.0.0:53\", \"[::]:53\" or \":53\"")
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("%q is not an IP address", host)
		}
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("invalid port")
	}
	return nil
}

// normalizeName returns a domain name as a lowercase FQDN ("." for the
// root), or why it is not one.
func normalizeName(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty")
	}
	if s == "." {
		return ".", nil
	}
	t := strings.TrimSuffix(s, ".")
	if len(t) > 253 {
		return "", fmt.Errorf("longer than 253 characters")
	}
	for _, label := range strings.Split(t, ".") {
		if label == "" {
			return "", fmt.Errorf("has an empty label")
		}
		if len(label) > 63 {
			return "", fmt.Errorf("has a label longer than 63 characters")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "", fmt.Errorf("has the character %q", r)
			}
		}
	}
	return strings.ToLower(t) + ".", nil
}

// inZone reports whether the FQDN name is zone or below it.
func inZone(name, zone string) bool {
	return zone == "." || name == zone || strings.HasSuffix(name, "."+zone)
}

func oneOf(s string, allowed ...string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

// BindFamily is the address family listen[i] binds: "4" or "6" for an
// unspecified address ("0.0.0.0", "::") when the list also holds the
// unspecified address of the other family on the same port, so that the
// two sockets split the families; else "" (both families where the
// address allows: on Linux Go binds "0.0.0.0", "::" and ":port" as one
// IPv6 socket that accepts IPv4 too, and a second one would fail with
// "address already in use").
func BindFamily(listen []string, i int) string {
	ip, port, ok := listenHost(listen[i])
	if !ok || !ip.IsValid() || !ip.IsUnspecified() {
		return ""
	}
	for j, l := range listen {
		o, p, ok := listenHost(l)
		if j != i && ok && p == port && o.IsValid() && o.IsUnspecified() && o.Is4() != ip.Is4() {
			if ip.Is4() {
				return "4"
			}
			return "6"
		}
	}
	return ""
}

// listenHost is a listen address's IP (invalid for ":port") and port.
func listenHost(s string) (netip.Addr, string, bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, "", false
	}
	if host == "" {
		return netip.Addr{}, port, true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, "", false
	}
	return ip.Unmap(), port, true
}

// bindCovers reports the families a listen address binds on its port
// (BindFamily's rule) and whether it is a wildcard.
func bindCovers(listen []string, i int) (v4, v6, wildcard bool) {
	ip, _, _ := listenHost(listen[i])
	switch {
	case !ip.IsValid() || ip.IsUnspecified():
		f := BindFamily(listen, i)
		return f != "6", f != "4", true
	case ip.Is4():
		return true, false, false
	}
	return false, true, false
}

// checkBindOverlap reports the listen addresses (with port 53 of the
// localIPs: ListenAddrs) that Linux will not bind beside an earlier one
// without SO_REUSEPORT: a wildcard and any address of a family it
// covers, on the same port. With reusePort they bind, and the most
// specific address gets each query.
func (c *ServerConfiguration) checkBindOverlap(e *fieldErrors) {
	if c.ReusePort {
		return
	}
	addrs := c.ListenAddrs()
	name := func(i int) string {
		if i < len(c.Listen) {
			return fmt.Sprintf("listen[%d]", i)
		}
		return "nodeLocal.localIPs"
	}
	for j := range addrs {
		_, pj, okj := listenHost(addrs[j])
		if !okj {
			continue
		}
		for i := range j {
			_, pi, oki := listenHost(addrs[i])
			if !oki || pi != pj || addrs[i] == addrs[j] {
				continue
			}
			a4, a6, aw := bindCovers(addrs, i)
			b4, b6, bw := bindCovers(addrs, j)
			if (aw || bw) && ((a4 && b4) || (a6 && b6)) {
				e.add(name(j), "%q: binds the same port as %s %q, and a wildcard address takes every address of its family: set reusePort (--reuse-port), or listen on specific addresses only", addrs[j], name(i), addrs[i])
				break
			}
		}
	}
}

// Copy is a deep copy of c (through its JSON form, which every field has).
func (c *ServerConfiguration) Copy() (ServerConfiguration, error) {
	var out ServerConfiguration
	b, err := json.Marshal(c)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(b, &out)
	return out, err
}

// validateReverseScope checks reverseScope and returns its CIDRs.
func (c *ServerConfiguration) validateReverseScope(e *fieldErrors) []netip.Prefix {
	var scope []netip.Prefix
	for i, z := range c.ReverseScope {
		if p, ok := checkCIDR(e, fmt.Sprintf("reverseScope[%d]", i), z); ok {
			scope = append(scope, p.Masked())
		}
	}
	return scope
}

// checkCIDR parses z, a CIDR of the field at path, and adds its error.
func checkCIDR(e *fieldErrors, path, z string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(z)
	switch {
	case err != nil:
		e.add(path, "%q: not a CIDR such as \"10.96.0.0/12\"", z)
	case p.Addr().Is4In6():
		e.add(path, "%q: IPv4-mapped; use the IPv4 form", z)
	default:
		return p, true
	}
	return netip.Prefix{}, false
}

// Within says whether the network p lies inside one of scope: a
// reverseZone inside reverseScope, a reverse name's address inside it.
func Within(scope []netip.Prefix, p netip.Prefix) bool {
	for _, s := range scope {
		if s.Addr().Is4() == p.Addr().Is4() && s.Bits() <= p.Bits() && s.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// validateClusterset checks clustersetZone: a domain apart from the
// cluster domain, in mode cluster, with a cluster to read.
func (c *ServerConfiguration) validateClusterset(e *fieldErrors) {
	if c.ClustersetZone == "" {
		return
	}
	if err := ValidateClusterDomain(c.ClustersetZone); err != nil {
		e.add("clustersetZone", "%v", err)
		return
	}
	z, cz := c.ClustersetZoneName(), c.ClusterZone()
	switch {
	case c.Mode == ModeNodeLocal:
		e.add("clustersetZone", "not used in mode %q: its names go to the cluster DNS with the cluster domain's; set it in the cluster DNS's configuration", ModeNodeLocal)
	case c.NoClusterZone:
		e.add("clustersetZone", "not used with noClusterZone: there are no cluster records")
	case c.Objects != "":
		e.add("clustersetZone", "not used with objects: the ServiceImports are read from an API server (kubeconfig)")
	case cz != "" && (z == cz || strings.HasSuffix(z, "."+cz) || strings.HasSuffix(cz, "."+z)):
		e.add("clustersetZone", "%q: overlaps clusterDomain %q; give a zone of its own such as \"clusterset.local\"", c.ClustersetZone, c.ClusterDomain)
	}
}

// ClustersetZoneName is clustersetZone as a lowercase FQDN, "" when off.
func (c *ServerConfiguration) ClustersetZoneName() string {
	if c.ClustersetZone == "" {
		return ""
	}
	n, _ := normalizeName(c.ClustersetZone)
	return n
}
