// Package dnscache is the answer cache of the cluster DNS (for forwarded
// answers) and of the node-local stage.
//
// A Cache sits in front of an Exchanger (a forwarder) and is itself an
// Exchanger. New(next, Config) builds it. Exchange(ctx, m) answers m from
// the cache or asks next. The reply has m's ID, question (in m's case, also
// in the owner names equal to it), RD and CD bits. Its TTLs are aged by the
// time the answer has been cached. It has no OPT: the caller adds its own,
// and an upstream's OPT, cookies and echoed options are never kept. Answer
// is Exchange that also says where the reply came from (Hit, Miss,
// Coalesced, Stale). AnswerTicket is Answer with a Ticket for a hit (see
// wire answers below).
//
// Key: the lowercase name, the type, the class, the DO bit, the CD bit and
// the RD bit; never EDNS0 options (loop markers, autopath search lists)
// nor the ID. RD is in the key because the next step answers a query
// without it from what it holds: a recursive upstream says REFUSED or an
// empty NOERROR, and a query without RD that led the flight (or filled
// the entry) would give that to clients asking for recursion. So a query
// without RD is asked and cached on its own and never shares with one
// with RD. (unbound and BIND answer such a query from their cache only; a
// cache in front of the cluster DNS, authoritative for the cluster zone,
// must not: the zone's answers do not depend on RD and are the server's
// to give.) The next step's caller decides which options it relays: see
// pkg/forward's Config.RelayOptions.
//
// Wire answers: a caller may keep its finished reply (the OPT it adds,
// truncated, packed) with the cached answer it was made from, Keep(ticket,
// shape, reply), the ticket coming with AnswerTicket's hit; AnswerWire then
// answers a query read with dnsmsg.ParseQuery, of the same shape (the
// caller's number for its EDNS0 and size limit, say) and the same question
// name as sent, by copying those bytes and setting the ID, the RD and CD
// bits and the TTLs (kept as cached, at the offsets of every record but the
// caller's OPT, aged per query as AnswerTicket ages them), without unpacking
// or packing; the same bytes as the caller's reply made at that moment
// (FuzzCache). Only fresh answers are answered so (stale ones are
// AnswerTicket's), and such a hit counts as a hit, moves the answer up its
// list and may start its prefetch, as any other. The kept replies are part
// of the entry: at most MaxForms (4) per answer, counted in its kind's
// bytes (evicting other answers, never their own), dropped with it. A
// reply is not kept when its answer has been replaced or expired since,
// when it is not a reply to the answer's question, or when the aging took a
// TTL to 0 (the TTL as cached is then unknown).
//
// What is cached (CoreDNS cache's rules, RFC 2308):
//
//   - success, NOERROR with answer records: for the smallest TTL of its
//     records (every section), raised to MinTTL (none by default) and
//     capped at MaxTTL (30 s);
//   - denial, NXDOMAIN or NODATA (NOERROR without answer records) with an
//     SOA in the authority section: for min(SOA TTL, SOA MINIMUM), raised
//     to MinNegativeTTL (none) and capped at MaxNegativeTTL (5 s); a
//     denial without an SOA (a referral, say) is not cached (RFC 2308
//     section 5);
//   - never: truncated replies, SERVFAIL, REFUSED and other rcodes,
//     replies whose question is not the query's, AXFR and IXFR, lifetimes
//     under 1 s, and errors. They are returned as next gave them (its OPT
//     removed, the query's ID set).
//
// Every record of a cached answer is stored with a TTL no longer than the
// answer's lifetime (and the SOA of a denial with at most its MINIMUM), and
// served aged by whole seconds.
//
// Memory: answers are kept packed; each counts its packed size as the
// runtime allocates it (size class or whole pages), its name,
// EntryOverhead and its kept replies, against the capacity of its kind: SuccessBytes (32 MiB)
// and DenialBytes (8 MiB), so the heap the cache holds stays within their
// sum whatever the answer sizes (TestCacheBytesBound: 38 MiB of answers of
// 100 B to 60 KB offered to an 8 MiB cache leave 7.85 MiB on the heap;
// the test fails above 8 MiB). MaxEntries optionally bounds the answers of each kind. The least
// recently used answer of the kind being stored is dropped first, so
// denials never evict successes; an answer bigger than its capacity is
// returned and not cached.
//
// Misses: identical misses in flight ask next once and share its answer
// (coalescing) for at most MaxFlights distinct questions at once, beyond
// which a miss asks on its own; a waiter leaves when its context ends, and
// a flight whose leader's context has ended is not joined (its followers
// ask again rather than share a cancellation).
//
// Loops: when next is a LoopChecker (pkg/forward's Forwarder and Router
// are), a miss first asks it whether the query came back round a
// forwarding loop; such a query fails at once with next's error (a miss of
// kind other) instead of joining the flight of the identical query, which
// is its own one lap earlier and would hold it until the timeout. A hit is
// answered as any other.
//
// Serve-stale (RFC 8767, off unless ServeStale > 0): expired answers are
// kept (still within the byte bounds) until ServeStale past their expiry;
// when next then fails (an error, SERVFAIL or REFUSED) the expired answer
// is returned with every TTL set to StaleTTL (30 s), and for StaleTTL the
// answer is served stale without asking next again (the RFC's failure
// recheck timer). Beyond the window the failure is returned.
//
// Prefetch (off unless Prefetch.Amount > 0): an answer asked Amount times
// within Window (1 min) is refreshed in the background when a hit finds its
// remaining TTL under Percentage % (10) of its lifetime or at most 1 s; at
// most MaxPrefetches (4) refreshes run at once, each within 5 s; a miss
// for the same question joins the refresh. Close stops prefetching and
// waits for the refreshes running.
//
// Metrics: Cache is a prometheus.Collector of dnsconfigurer_cache_*, all
// with the const label server (Config.Server) so several caches share a
// registry: hits_total{kind} (success, denial), misses_total{kind}
// (success, denial, other: what next answered), stale_total,
// prefetches_total, coalesced_total, evictions_total{kind}, entries{kind},
// bytes{kind}. A stale answer served under the failure recheck timer is
// counted in stale_total only; one served after next failed is also a miss
// of kind other.
//
// It imports miekg/dns, Prometheus, pkg/dnsmsg (the wire query) and
// api/v1alpha1 (its defaults: the cluster DNS and node-local caches'
// defaults are one).
package dnscache
