// Package forward is the project's forwarder: it sends the queries a DNS
// handler does not answer itself to upstream servers.
//
// It works within bounded time, memory, sockets and goroutines, and keeps
// forwarding loops from forming. The cluster DNS server (pkg/clusterdns) and
// the node-local stage (pkg/nodelocal) use it through their own Exchanger
// interfaces; a Router sends each zone to its own Forwarder (stub domains).
//
// # Forwarder
//
// New(Config) validates the configuration (errors name the field) and
// returns a Forwarder. Exchange sends a query and returns the reply:
//
//   - the upstream list is read from Config.Upstreams at every query (a
//     watched resolv.conf may change it); the server's own listen addresses
//     (Config.Self) are dropped: the same address and port, or any
//     loopback upstream on the port of an unspecified listen address
//     (SelfReason); a loopback neighbour such as 127.0.0.53 is kept;
//   - the healthy upstreams are tried in Config.Policy's order (random by
//     default, round_robin, sequential); each but the last gets 7/8 of the
//     time left (1.75s of 2s for the first), so a slow but alive upstream
//     answers: one Exchange ends within Config.Timeout (2s) whatever the
//     number of upstreams;
//   - over UDP, then TCP when the reply is truncated, bigger than advertised
//     or does not parse; over TCP at once for a client that asked over TCP
//     (WithClientTCP marks the context) unless Config.PreferUDP, and always
//     with Config.ForceTCP;
//   - queries go upstream with a random ID of ours and an EDNS0 size of
//     dnsmsg.EDNSSize (1232), so a UDP read needs 1233 bytes (one more
//     detects a reply bigger than advertised). A reply whose ID or question
//     does not match strictly (the name byte for byte; a reply without the
//     question does not match) is dropped and the read goes on until the
//     deadline;
//   - each UDP query gets a socket of its own, on a fresh random source
//     port (RFC 5452 §9.2), MaxConcurrent bounding them;
//   - TCP connections are pooled per upstream (at most 256 idle) and
//     reused one query at a time; an idle one is closed after
//     Config.Expire (10s) and a TCP connection the upstream closed while
//     idle is replaced once;
//   - identical queries in flight (same name, type, class, opcode, RD, CD,
//     DO, relayed EDNS0 options and transport) are sent once and share the
//     reply;
//   - at most Config.MaxConcurrent (1000) exchanges wait at once; beyond
//     that Exchange fails at once with ErrOverloaded (shed).
//
// # Options
//
// Of the client's EDNS0 options only two kinds go upstream: loop markers
// (Config.LoopOptionCode) and the codes in Config.RelayOptions (node-local
// relays its autopath option, 65001 by default, to the cluster DNS; the
// cluster DNS relays none). Every other option is dropped from the query
// sent: EDNS Client Subnet (8), whose tailored answer would be cached for
// every client under a key without it (RFC 7871 section 7.3 asks for a
// key by scope; dropping it is simpler and keeps clients' subnets off the
// upstreams), and the hop-by-hop ones, which are between the client and
// us only: cookies (10, RFC 7873), NSID (3), padding (12), TCP keepalive
// (11), and any unknown code. The OPT's DO bit and version are kept; the
// size is ours (dnsmsg.EDNSSize). Records in the other sections of the
// query (TSIG and the like) are relayed as they are, and such a query is
// not coalesced.
//
// Rcode maps an Exchange error to the rcode to answer: SERVFAIL, or
// Config.ShedRcode (SERVFAIL or REFUSED) for a shed query.
//
// # Background work and health
//
// Start (or Run, for a task runner) does the background work until its
// context ends or Close is called, with at most 8 probes at once, each
// within 1s: every Config.HealthCheck (500ms) it checks the upstream list,
// probes the down upstreams and closes expired connections. Close stops it
// and closes the idle connections.
//
// While it runs, a failed exchange with an upstream (a timeout, a refused
// connection) only triggers a health probe of it (". IN NS", as CoreDNS,
// within Config.Timeout or 1s, the longer); any reply to the probe is
// healthy. Config.MaxFails (2) probes failed in a row mark the upstream
// down: it is skipped, and probed every HealthCheck until it answers. A
// name whose servers drop queries thus never takes an upstream that
// answers its probe out of rotation. When every upstream is down, Exchange
// still asks one at random (counted in all_down_total). Without Start no
// upstream is ever marked down.
//
// Forward errors are logged at warning level, at most one line per
// upstream per 10s with the count of the lines suppressed.
//
// # Loops
//
// Two defences:
//
//   - every query sent carries an EDNS0 local option (Config.LoopOptionCode,
//     65534) with a random 8-byte marker of this Forwarder and a random
//     4-byte tag of the upstream it is sent to, after the markers of the
//     forwarders it already went through. A query that comes back with our
//     marker, or with more than MaxHops markers, fails with ErrLoop
//     (CheckLoop): two servers forwarding to each other stop after three
//     queries. It is counted, and logged at error level naming the upstream
//     it was sent to, at most once per upstream every 10s (the first time
//     also counts in loop_detected_total). The upstream stays in use: the
//     marker stops every looping query after one lap, and the loop ends
//     when the upstream stops forwarding back. A cache in front of the
//     Forwarder calls CheckLoop before it asks (pkg/dnscache's LoopChecker;
//     a Router passes it to the route's Forwarder): the query that comes
//     back is identical to the one the cache has in flight, its own;
//   - a loop probe (the idea of CoreDNS's loop plugin): at Start and
//     whenever the upstream list changes, each upstream is asked
//     "<nonce>.<index>.loop-probe.dnsconfigurer. HINFO", with the marker
//     as any query, so a loop is found before the first client query; an
//     upstream that gives no reply (a peer not up yet) is asked again after
//     HealthCheck, the wait doubling up to 30s, until it replies. If the
//     probe reaches this Forwarder without our marker, the upstream forwards
//     back to us through a resolver that drops EDNS0 options: it is marked
//     looping and never used again until the list changes, logged once at
//     error level and counted. The probe itself fails with ErrLoop. With
//     only looping upstreams left Exchange fails with ErrNoUpstream.
//
// A loop through a resolver that drops unknown options and that no probe
// found holds each query until the timeout, not more: the query that comes
// back is identical to the one in flight and waits for it.
//
// # Metrics
//
// A Forwarder is a prometheus.Collector of dnsconfigurer_forward_* series
// (listed at its Collect method), every one with the const label zone
// (Config.Zone), so that one Forwarder per zone registers on one registry.
// Per-upstream series are dropped when the upstream leaves the list.
//
// Config's defaults are those of a forward route in api/v1alpha1.
package forward
