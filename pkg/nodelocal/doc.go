// Package nodelocal is the node-local DNS stage: a caching forwarder in
// front of the cluster DNS that also carries autopath search lists.
//
// Stage is the component `dnsconfigurer serve --mode node-local` runs:
// NewStage(cfg, deps) and Run(ctx). Run sets up the node (transparent mode),
// builds the forwarders and the Handler, serves it on a dnsserver.Server
// and /metrics, and stops them in reverse order.
//
// Every query is answered from a pkg/dnscache Cache or forwarded once,
// however many identical questions are in flight (request coalescing).
// Config.Cache sets the byte bounds of answers and denials, the TTL caps
// (30s and 5s by default: dnscache's, which are api/v1alpha1's), and
// serve-stale and prefetch when asked; pkg/dnscache's README gives the rules
// and its memory bound. Queries go upstream through an Exchanger. The Stage
// gives it its router, which sends every name to the cluster DNS over TCP
// (nodeLocal.external "cluster", the default). That is a Service of the
// cluster DNS pods of its own, node-cache's kube-dns-upstream. With
// external "direct" only the names of its Routes go there: the cluster
// zone, ap.k8s.io, the reverse zones, and the names the cluster DNS's own
// configuration (nodeLocal.clusterConfig, read with the command's
// LoadFunc and watched by internal/filewatch) treats specially: its stub
// domains, the names its default route excepts, its overrides, its hosts
// file's names, its exact and suffix rewrites. A prefix, substring or regex
// rewrite, or a hosts file the stage cannot read, is unbounded: every name
// then goes to the cluster DNS, and a log line and
// dnsconfigurer_nodelocal_cluster_routes_unbounded say so. Other names go
// to the node's nameservers (the watched resolv.conf). Routes.Cluster is a
// map lookup per label, without allocation; a change of the files swaps
// the Routes atomically, and a bad file keeps the last good ones. Each
// upstream is a pkg/forward Forwarder (health
// checks, failfast, connection reuse, max_concurrent). An upstream that
// fails is SERVFAIL, or a stale answer when serve-stale is on. The query
// sent upstream is made afresh, without the client's EDNS0 options. But the
// cache first asks the Exchanger's CheckLoop (dnscache.LoopChecker) about
// the client's query. One that came back round a forwarding loop with the
// stage's own marker is SERVFAIL at once (TestLoopBack).
//
// Cache hits over UDP are answered from their wire form: Handler
// implements dnsserver.WireAnswerer, so the server's UDP reader hands it
// each datagram first. ServeDNS keeps each UDP reply it makes from a cached
// answer, packed, with that answer (dnscache.Keep), for the query's shape:
// whether it has an OPT and the size the reply is truncated to
// (dnsmsg.ReplySize), and its question name as sent. AnswerWire reads a
// plain query (dnsmsg.ParseQuery) and, when a fresh answer has a reply kept
// for its shape and name, answers with those bytes, the ID, RD and CD bits
// and TTLs set for it (dnscache.AnswerWire): the bytes ServeDNS would write
// (TestAnswerWireSameBytes, FuzzAnswerWire), with no unpacking, packing or
// goroutine. Everything else (misses, stale answers, TCP, other queries,
// the first hit of each shape) is ServeDNS's. A wire answer is counted as
// the hit it is, and counts towards a prefetch. On test/bench's
// TestNodeLocalSideBySide (one cached cluster name) this took the stage
// from 12-14 µs of CPU per answer to 5 µs, against CoreDNS's 13-16 µs.
//
// Metrics: dnsconfigurer_nodelocal_cache_hits_total{type} and
// _cache_misses_total{type} (by query type), _coalesced_total,
// _autopath_options_total, _upstream_failures_total; the cache's
// dnsconfigurer_cache_*{server="nodelocal"} (entries, bytes, evictions,
// stale answers by kind) and the forwarders' dnsconfigurer_forward_*{zone}
// (latency and health per upstream) are registered beside them, and the
// server's dnsconfigurer_dnsserver_*{server="nodelocal"} (requests by
// zone, transport, family and type, responses by rcode, latency, sizes,
// panics), which count the wire answers too. The routing metrics are
// dnsconfigurer_nodelocal_forwarded_total{upstream} ("cluster" or
// "direct"), _cluster_routes, _cluster_routes_unbounded,
// _cluster_config_errors_total and _cluster_config_last_read_ok.
//
// No traffic: dnsconfigurer_dnsserver_listen_queries_total{server=
// "nodelocal",listen="10.96.0.10:53"} (and "169.254.20.10:53") counts the
// queries received on each local address. One that stays flat while the
// node's pods resolve means they reach the cluster DNS another way: Cilium's
// eBPF socket load balancing rewrites 10.96.0.10 before the packet reaches
// the node-local address (cilium/cilium#13040), so the stage is bypassed
// without an error anywhere.
//
// Transparent mode (its addresses, including the cluster DNS Service IP,
// and the notrack table on the node) is pkg/nodenet's. Beside NodeLocal
// DNSCache, whose node-cache makes the same "nodelocaldns" interface and
// addresses: the stage adds only the addresses missing, never deletes an
// interface it did not make, and removes only the addresses it added
// (test/integration/nodelocalroute TestNodeCacheInterfaceSurvives). The
// ports collide, though. node-cache serves its Corefile's metrics on 9253,
// its own setup metrics on 0.0.0.0:9353 (-metrics-listen-address) and
// health on 169.254.20.10:8080 (nodelocaldns.yaml). deploy/nodelocal serves
// this stage's metrics on 0.0.0.0:9353 of the node (metricsListen has no
// default). Beside node-cache, give --metrics-listen another port, and
// never serve 169.254.20.10:53 from both.
//
// The forwarded query is made afresh (dnsmsg.Query): the question, RD and an
// OPT with the client's DO bit, nothing else of the client's query. For a
// name under "search.<ns>.<clusterDomain>.ap.k8s.io" it adds an EDNS0 local
// option (OptionCode, autopath.DefaultOptionCode 65001 by default) whose
// value is the pod's search list (autopath.OptionValue:
// "<ns>.svc.<zone>,svc.<zone>,<zone>,<node's host searches>" within kubelet's
// limits). A client-supplied option is therefore never forwarded, so pods
// cannot choose another namespace's search list, and the upstream reply's OPT
// (with any echo of the option) is dropped.
//
// Topology (issue 59). Every query to the cluster DNS carries the
// topology option (pkg/topology, code topologyOptionCode, 65002): the
// node's topology zone and name. No query to the node's nameservers does.
// With an API server, nodeName and preferZone, the stage follows the
// EndpointSlices of upstreamService and asks, in order, the ready pods in
// the node's topology zone, the other ready pods, then clusterUpstream
// (forward.PolicySequential): a killed zone-local pod costs one refused
// try, and its health probe then skips it. Answers are counted by the
// answering upstream's zone (dnsconfigurer_nodelocal_cluster_upstream_answers_total).
//
// The message rules are pkg/dnsmsg's, as in the cluster DNS: FORMERR,
// NOTIMP and BADVERS for queries it does not answer, an OPT advertising
// dnsmsg.EDNSSize (1232) in replies to EDNS0 clients and in forwarded
// queries, and truncation to what the client can receive.
//
// Config.UDPAnswerLimit (udpAnswerLimit, off by default) is the cluster
// DNS's UDP answer limit applied here: the stage asks the cluster DNS over
// TCP, whose answers are whole, so it cuts the A or AAAA RRset of a
// cluster or autopath name in its own UDP replies to pods
// (dnsmsg.LimitAnswer, TC clear), the window moving on every reply. Such
// a reply is not kept for AnswerWire, which would serve one window until
// the answer expires: a cut name costs a ServeDNS per UDP query. Names
// outside the cluster zone are relayed whole, as the cluster DNS relays
// them.
//
// The Handler imports miekg/dns, Prometheus, api/v1alpha1 (its defaults),
// pkg/autopath, pkg/dnscache, pkg/dnsmsg and pkg/forward (each query is asked
// on behalf of its pod, a dnsmsg.Origin: the forwarders share their slots per
// pod; Exchanger is declared here).
// The Stage adds the listener (pkg/dnsserver), the forwarders, the node's
// resolv.conf watcher, pkg/nodenet, and for the routes internal/filewatch,
// internal/safefile and pkg/hosts (Table.Names); errors of its
// configuration are marked v1alpha1.ErrConfig.
package nodelocal
