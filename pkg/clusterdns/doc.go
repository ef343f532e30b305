// Package clusterdns answers the cluster zone: records, the packed reply
// cache, autopath expansion and the namespace amplification metrics.
//
// Server is the component `dnsconfigurer serve` runs in mode cluster.
// New(cfg, deps) takes a validated v1alpha1.ServerConfiguration. Run builds
// the answer stack: the Handler with its forwarders, answer cache and
// static records. It loads the records and serves them on a
// dnsserver.Server and /metrics until its context ends. With Deps.Reload
// it watches the config file and swaps in a new answer stack on a change.
// It keeps the forwarders when their settings did not change (see reloader
// in reload.go). It also returns start-up memory to the OS (internal/memrelease).
// Errors of the configuration are marked v1alpha1.ErrConfig.
//
// The Handler answers the cluster zone (Kubernetes DNS-Based Service
// Discovery 1.1.0) from a store.Snapshot, and autopath names by server-side
// search expansion (WithAutopath, WithAutopathBySource). It forwards every
// other name through an Exchanger. A dnsserver.Server puts it on the wire;
// the Handler implements dnsserver.WireAnswerer for its cached replies.
//
// The core is Handler.Resolve(ctx, question) → Result{Rcode, Answer, Ns,
// Extra}: it answers without touching the wire. The autopath expander
// reaches the zone through one method, candidateResolver's
// resolveCandidate (Resolve, or with localOnly only what needs no
// upstream); the handler builds its messages.
//
// ServeDNS runs the stages of one query value (query.go): admit makes it
// once (the checked message, its lowercase name, its client and the reply
// cache key), then fromCache, answer and account read it in turn, each in
// its file; AnswerWire runs the same stages with a byte-level admit
// (admitWire). Nothing of a query travels in a context. ServeDNS wraps
// Resolve with pkg/dnsmsg's message rules (Check, Finish), which the
// node-local stage shares: FORMERR, NOTIMP and BADVERS, replies cut to the
// client's size (at most 1232 bytes over UDP) with TC set.
// Resolve answers REFUSED for classes other than IN (and ANY) and for
// AXFR and IXFR (never a zone listing).
//
// Answers:
//
//   - WithTemplates answers the names of CoreDNS template blocks (package
//     template: zones, class, type, regexes, records built from Go
//     templates, rcode, fallthrough) after a rewrite and before the zone,
//     hosts and forwarding, in CoreDNS's plugin order.
//   - WithExternal answers Services' external IPs and LoadBalancer
//     ingress IPs under outside zones, as CoreDNS's k8s_external
//     (external.go), before the cluster zone. Its answers are not cached.
//   - WithClusterset answers the Multi-Cluster Services zone (e.g.
//     clusterset.local) from a store of its own that kubefeed.Clusterset
//     fills from the ServiceImports (clusterset.go), before the cluster
//     zone and with its rules; the reserved <clusterid>.<svc> is
//     NXDOMAIN, a namespace of the cluster is a name of it, and its
//     replies are not cached. docs/multicluster.md.
//   - WithRewrites renames the question before everything below, as
//     CoreDNS's "rewrite name" does (exact, prefix, suffix, substring,
//     regex). The rules run in order, and the first match is the last
//     unless it continues. The reply carries the question as asked, with
//     the answer's names mapped back (README "Rewrites"). It is cached
//     under the question as asked. Autopath names are not rewritten; their
//     candidates are.
//   - Names in the zone come from the snapshot: one lookup of the
//     lowercase name. The answer owners echo the question's case.
//   - A headless Service with a traffic distribution answers each client
//     its nearest ready endpoints (Snapshot.VariantFor, pkg/topology's
//     rule). admit places the client once per query: by node-local's
//     topology option (WithTopology; taken off, never forwarded), else by
//     its source pod's node and zone. CoreDNS's zone-scoped names
//     (coredns#8388) read the same variants.
//   - Replies made from the zone are cached packed (package replycache),
//     keyed by the question as asked, EDNS0, DO and the size limit, and by
//     the client's topology variant where the name has them. A hit patches
//     the ID, RD and CD; over UDP it is found from the wire (AnswerWire).
//     The cache is bounded (WithReplyCache) and lives across snapshots: a
//     new one retires the replies made from the names that changed.
//   - A name that does not exist is NXDOMAIN. A name that exists (an empty
//     non-terminal too) without the asked type is NOERROR with no answer.
//     Both carry the SOA of the name's zone in the authority section, its
//     minimum TTL equal to the record TTL.
//   - WithWireMisses (serve sets it) answers NXDOMAIN and a ClusterIP
//     Service's A or AAAA from the query's wire form on a UDP reply cache
//     miss (missWire), uncached: the ndots:5 misses outnumber the cache.
//   - ANY is answered minimally (RFC 8482) for the names this server
//     answers. A name that exists gets a synthesized HINFO "RFC8482" (an
//     ExternalName: its CNAME). A zone name that does not exist gets
//     NXDOMAIN with the SOA. ANY for other names is forwarded like any
//     other type, as CoreDNS's forward does (REFUSED without a forwarder).
//   - A headless Service without a ready endpoint has no name (NXDOMAIN).
//     SRV at the bare Service name lists every port, as in CoreDNS.
//   - WithLoadBalance rotates each run of A, AAAA or same-priority SRV
//     records of one owner by one step per reply; a cached reply is
//     rotated in its packed bytes, or served unrotated when that is unsafe.
//   - WithUDPAnswerLimit cuts the A or AAAA RRset of a UDP reply made here
//     to the limit, TC clear, the window moving each reply; a cached cut
//     reply hands out the next window per hit (replycache.NewWindow).
//   - Before the first full sync every zone and reverse name is SERVFAIL.
//   - ExternalName Services answer with their CNAME, then the target's
//     records. A target in the zone is looked up in the snapshot; any
//     other is asked upstream.
//   - Reverse names (in-addr.arpa, ip6.arpa) of ClusterIPs and endpoints
//     are answered from the snapshot. Inside the WithReverseZones
//     prefixes the others are NXDOMAIN (NODATA above known addresses),
//     with the SOA of the prefix's octet- or nibble-aligned reverse zone.
//     Other reverse names are forwarded, as with CoreDNS's default
//     "fallthrough in-addr.arpa ip6.arpa".
//   - Names outside the cluster zone that the Static source (WithStatic)
//     has are answered from it before forwarding, authoritatively and
//     uncached. A type it has none of is NOERROR with no answer and no
//     SOA. Cluster-zone names come from the zone only.
//   - Names under the autopath suffix (search.<ns>.<zone>.ap.k8s.io) are
//     never forwarded. Each candidate of the search list is tried: from
//     the EDNS0 local option, else the namespace's cluster searches
//     (policy.ClusterSearches). The first that is not NXDOMAIN, in
//     search-list order, answers behind a CNAME from the asked name,
//     uncached, each candidate with its topology variant for the client.
//     At most 8 candidates that need an upstream are asked, in parallel;
//     the expansion ends within v1alpha1.AutopathDeadline.
//   - Every other name is forwarded through the Exchanger given to
//     WithForwarder (REFUSED without one): a pkg/forward Forwarder or
//     Router, whose README says how it bounds, sheds, health-checks and
//     stops loops. A TCP client's query goes upstream over TCP. A failed
//     forward answers forward.Rcode. Given WithAnswerCache (serve's
//     *dnscache.Cache) instead, AnswerWire also answers a UDP query from
//     the finished reply kept with a cached answer, for a name that
//     decide routes upstream now.
//
// # Metrics
//
// The metrics keep the dnsconfigurer_dnsserver_ prefix. The listener
// counts the queries; RegisterRecordMetrics (_records, _synced),
// Server.Run (kubefeed.Skips), WithAutopath (_autopath_*) and
// WithAmplification (pkg/nsmetrics, docs/amplification.md) add theirs.
//
// It imports miekg/dns; its store subpackage is pure and must not
// (internal/layering checks it). It takes a client-go clientset in Deps;
// pkg/kubefeed watches and converts the objects.
package clusterdns
