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
// Coalesced, Stale). AnswerTicket is Answer for a
// query of a client (dnsmsg.Origin), with a Ticket for a hit (see
// Wire answers in README.md).
//
// README.md is the manual: the cache key, wire answers, what is cached,
// memory, misses, loops, serve-stale, prefetch and metrics.
//
// It imports miekg/dns, Prometheus, pkg/dnsmsg (the wire query, the
// Origin), pkg/forward (Ask: a miss is asked on behalf of its client) and
// api/v1alpha1 (its defaults: the cluster DNS and node-local caches'
// defaults are one).
package dnscache
