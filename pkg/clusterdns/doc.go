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
// in reload.go). It also returns start-up memory to the OS (rss.go).
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
//     CoreDNS's "rewrite name" (exact, prefix, suffix, substring, regex;
//     rules in order, the first match the last unless it continues). The
//     reply carries the question as asked and the answer's names mapped
//     back (README "Rewrites"); it is cached under the question as asked.
//     Autopath names are not rewritten, their candidates are;
//   - names in the zone come from the snapshot (one map lookup on the
//     lowercase name); the question's case is echoed in the answer owners.
//     Replies made from the zone are cached packed, keyed by the question
//     as asked, EDNS0 presence, DO bit and size limit; a cache hit patches
//     the ID and the RD and CD bits and writes the bytes (over UDP found
//     from the query's wire form, AnswerWire). The cache is bounded
//     (WithReplyCache, 16 MiB by default, in two generations) and lives
//     across snapshots: a new snapshot retires the replies made from the
//     names that changed (see wireCache), so it never serves stale data;
//   - a name that does not exist is NXDOMAIN, a name that exists (including
//     an empty non-terminal) without the asked type is NOERROR with no
//     answer; both carry the SOA of the zone the name is in in the authority
//     section, its minimum TTL equal to the record TTL. WithWireMisses (serve
//     sets it) answers two UDP replies that miss the reply cache from the
//     query's wire form, before ServeDNS: the snapshot lookup, then the
//     NXDOMAIN with the SOA, or the one address of an A or AAAA query for a
//     name that has exactly one (a ClusterIP Service), written as
//     miekg/dns packs them (missWire), counted in the namespace metrics;
//     not cached, since the ndots:5 misses and the names of a large
//     cluster outnumber the reply cache;
//   - ANY is answered minimally (RFC 8482) for the names this server
//     answers: a synthesized HINFO "RFC8482" for a name that exists (an
//     ExternalName: its CNAME), NXDOMAIN with the SOA for a zone name that
//     does not; ANY for other names is forwarded like any other type, as
//     CoreDNS's forward does (REFUSED without a forwarder);
//   - a headless Service without a ready endpoint has no name (NXDOMAIN),
//     and SRV at the bare Service name lists every port, as CoreDNS;
//   - WithLoadBalance rotates each run of A or AAAA records, and of SRV
//     records of one priority, of one owner in the answer section by one
//     step per reply; a cached reply is rotated in its packed bytes (the
//     runs' ranges and the compression pointers into them are recorded
//     when it is cached), or served unrotated when that is not safe;
//   - WithUDPAnswerLimit cuts the A or AAAA RRset of a UDP reply made here
//     (zone, chase, autopath; not a relayed one) to the limit, TC clear,
//     the window moving by the limit each reply (dnsmsg.LimitAnswer); a
//     cached cut reply is kept whole and each hit writes the next window
//     of its packed run (planWindow), or it is not cached;
//   - before the first full sync every zone and reverse name is SERVFAIL;
//   - ExternalName Services answer with their CNAME followed by the target's
//     records: looked up in the snapshot when the target is in the zone,
//     asked upstream otherwise;
//   - reverse names (in-addr.arpa, ip6.arpa) of ClusterIPs and endpoints are
//     answered from the snapshot; inside the WithReverseZones prefixes the
//     others are NXDOMAIN (NODATA above known addresses) with the SOA of
//     the prefix's octet- or nibble-aligned reverse zone; other reverse
//     names are forwarded, as CoreDNS's default "fallthrough in-addr.arpa
//     ip6.arpa";
//   - names outside the cluster zone that the Static source (WithStatic)
//     has are answered from it, authoritatively and uncached, before
//     forwarding: NOERROR with no answer and no SOA for types it has none
//     of; cluster-zone names come from the zone only;
//   - names under the autopath suffix (search.<ns>.<zone>.ap.k8s.io) are
//     never forwarded: each candidate of the search list (from the EDNS0
//     local option, else the namespace's cluster searches; pkg/autopath's
//     rules) is tried and the first that is not NXDOMAIN, in search-list
//     order, answers behind a CNAME from the asked name; such answers are
//     not cached. Zone candidates are free; at most 8 candidates that need
//     an upstream (the name itself always among them) are asked, in
//     parallel, the others are not tried, and the expansion ends within 2 s
//     (2.5 s by source: v1alpha1.AutopathDeadline, below node-local's
//     timeout toward this server);
//   - every other name is forwarded (REFUSED without a forwarder) through
//     the Exchanger given to WithForwarder: a pkg/forward Forwarder (or
//     Router), which never sends to the server's own listen addresses,
//     bounds each exchange in time, sheds beyond MaxConcurrent, health-checks
//     its upstreams and fails fast when all are down, and keeps forwarding
//     loops from forming (a per-query EDNS0 marker and loop probes); see its
//     README. A TCP client's query goes upstream over TCP
//     (forward.WithClientTCP); a failed forward answers forward.Rcode.
//     When that Exchanger is serve's answer cache (*dnscache.Cache), a
//     UDP reply made from a cache hit is kept with the cached answer in
//     its finished wire form (dnscache.Keep), and AnswerWire answers the
//     next query of that shape from it, as the node-local stage does:
//     ID, RD and CD set, TTLs aged, the hit counted. Not kept: replies
//     load balancing rotates, and every reply while rewrites or autopath
//     by source are on. AnswerWire serves a kept reply only to a name that
//     ServeDNS would forward now (outside the cluster, reverse and
//     autopath zones, without static records): a reload may keep the
//     cache and change that.
//
// # Metrics
//
// The metrics keep the dnsconfigurer_dnsserver_ prefix they had before the
// zone left pkg/dnsserver. The listener counts the queries (requests,
// responses, durations, sizes). RegisterRecordMetrics adds the snapshot's
// _records{kind} and _synced. WithAutopath adds _autopath_expansions_total,
// _autopath_hits_total{position}, _autopath_misses_total,
// _autopath_bad_options_total and _autopath_truncated_total.
// WithAmplification adds the search-list amplification per namespace of
// the asking pods (Amplification: _namespace_queries_total{namespace},
// _namespace_lookups_total, _namespace_misses_total, _namespace_hits_total,
// _namespace_external_lookups_total for the N busiest namespaces and
// "other"; docs/amplification.md).
//
// It imports miekg/dns; its store subpackage is pure and must not
// (internal/layering checks it). Its feed subpackage is the only DNS
// package that imports client-go.
package clusterdns
