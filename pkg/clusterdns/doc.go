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
// ServeDNS wraps Resolve with the message-level rules of pkg/dnsmsg, which
// the node-local stage shares. A query without exactly one question is
// FORMERR. An opcode other than QUERY is NOTIMP. An EDNS version other
// than 0 is BADVERS. The server advertises dnsmsg.EDNSSize (1232 bytes).
// A reply is truncated to 512 bytes without EDNS0. With EDNS0 it gets the
// client's size, but never more than 1232 bytes over UDP (a claim of 65535
// gets 1232). Over TCP the limit is 64 KiB. The TC bit is set when records
// were left out. Resolve answers REFUSED for classes other than IN (and
// ANY) and for AXFR and IXFR (never a zone listing).
//
// Answers:
//
//   - WithRewrites renames the question before everything below, as
//     CoreDNS's "rewrite name" does (exact, prefix, suffix, substring,
//     regex). The rules run in order, and the first match is the last
//     unless it continues. The reply carries the question as asked, with
//     the answer's names mapped back (README "Rewrites"). It is cached
//     under the question as asked. Autopath names are not rewritten; their
//     candidates are.
//   - Names in the zone come from the snapshot: one lookup of the
//     lowercase name. The answer owners echo the question's case.
//   - Replies made from the zone are cached packed. The key is the
//     question as asked, EDNS0 presence, the DO bit and the size limit. A
//     hit patches the ID and the RD and CD bits and writes the bytes; over
//     UDP it is found from the query's wire form (AnswerWire). The cache is
//     bounded (WithReplyCache: 16 MiB by default, in two generations) and
//     lives across snapshots. A new snapshot retires the replies made from
//     the names that changed (package replycache), so stale data is never
//     served.
//   - A name that does not exist is NXDOMAIN. A name that exists (an empty
//     non-terminal too) without the asked type is NOERROR with no answer.
//     Both carry the SOA of the name's zone in the authority section, its
//     minimum TTL equal to the record TTL.
//   - WithWireMisses (serve sets it) answers two kinds of UDP reply cache
//     misses from the query's wire form, before ServeDNS (missWire). They
//     are NXDOMAIN with the SOA, and an A or AAAA query for a name with
//     exactly one such address and no alias (a ClusterIP Service). The
//     bytes are those miekg/dns packs, and the namespace metrics count
//     them. They are not cached: the ndots:5 misses and the names of a
//     large cluster outnumber the reply cache.
//   - ANY is answered minimally (RFC 8482) for the names this server
//     answers. A name that exists gets a synthesized HINFO "RFC8482" (an
//     ExternalName: its CNAME). A zone name that does not exist gets
//     NXDOMAIN with the SOA. ANY for other names is forwarded like any
//     other type, as CoreDNS's forward does (REFUSED without a forwarder).
//   - A headless Service without a ready endpoint has no name (NXDOMAIN).
//     SRV at the bare Service name lists every port, as in CoreDNS.
//   - WithLoadBalance rotates by one step per reply each run of A or AAAA
//     records, and of SRV records of one priority, of one owner in the
//     answer section. A cached reply is rotated in its packed bytes: the
//     runs' ranges and the compression pointers into them are recorded
//     when it is cached. When that is not safe it is served unrotated.
//   - WithUDPAnswerLimit cuts the A or AAAA RRset of a UDP reply made here
//     (zone, chase, autopath; not a relayed one) to the limit, TC clear
//     (dnsmsg.LimitAnswer). The window moves by the limit each reply. A
//     cached cut reply is kept whole, and each hit writes the next window
//     of its packed run (replycache.NewWindow); otherwise it is not cached.
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
//     (pkg/autopath's rules). The first that is not NXDOMAIN, in
//     search-list order, answers behind a CNAME from the asked name. Such
//     answers are not cached. Zone candidates are free. At most 8
//     candidates that need an upstream are asked, in parallel, the name
//     itself always among them; the others are not tried. The expansion
//     ends within 2 s, 2.5 s by source (v1alpha1.AutopathDeadline, below
//     node-local's timeout toward this server).
//   - Every other name is forwarded through the Exchanger given to
//     WithForwarder (REFUSED without one). That is a pkg/forward Forwarder
//     or Router; see its README. It never sends to the server's own listen
//     addresses, bounds each exchange in time and sheds beyond
//     MaxConcurrent. It health-checks its upstreams, fails fast when all
//     are down, and keeps forwarding loops from forming (a per-query EDNS0
//     marker and loop probes). A TCP client's query goes upstream over TCP
//     (forward.WithClientTCP). A failed forward answers forward.Rcode.
//   - Given WithAnswerCache (serve's *dnscache.Cache) instead, a UDP
//     reply made from a cache hit is kept with the cached answer in its
//     finished wire form (dnscache.Keep). AnswerWire answers the next
//     query of that shape from it, as the node-local stage does: ID, RD
//     and CD set, TTLs aged, the hit counted. Replies that load balancing
//     rotates are not kept, nor any reply while rewrites or autopath by
//     source are on. AnswerWire serves a kept reply only for a name that
//     decide routes upstream now, as ServeDNS would. A reload may keep
//     the cache and change that.
//
// # Metrics
//
// The metrics keep the dnsconfigurer_dnsserver_ prefix they had before the
// zone left pkg/dnsserver. The listener counts the queries (requests,
// responses, durations, sizes). RegisterRecordMetrics adds the snapshot's
// _records{kind} and _synced; Server.Run adds the feed's
// _objects_skipped_total{kind,reason} (kubefeed.Skips). WithAutopath adds _autopath_expansions_total,
// _autopath_hits_total{position}, _autopath_misses_total,
// _autopath_bad_options_total and _autopath_truncated_total.
// WithAmplification adds the search-list amplification per namespace of
// the asking pods (pkg/nsmetrics: _namespace_queries_total{namespace},
// _namespace_lookups_total, _namespace_misses_total, _namespace_hits_total,
// _namespace_external_lookups_total for the N busiest namespaces and
// "other"; docs/amplification.md).
//
// It imports miekg/dns; its store subpackage is pure and must not
// (internal/layering checks it). Its feed subpackage is the only DNS
// package that imports client-go.
package clusterdns
