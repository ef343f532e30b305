// Package dnsserver is the UDP and TCP listener both DNS modes share.
//
// A Server serves a dns.Handler over UDP and TCP on each listen address.
// The cluster DNS (pkg/clusterdns) and the node-local stage (pkg/nodelocal)
// both answer through it.
//
// Every resource a client can make it hold is bounded:
//
//   - at most MaxUDPInFlight UDP queries are answered at once; further
//     datagrams are dropped and counted, and the client retries;
//   - at most MaxTCPConns TCP connections are open; further ones are closed
//     at once and counted;
//   - a TCP connection is closed when its first query does not arrive
//     within 5 s, when it idles for TCPIdleTimeout, after 128 queries, and
//     when one reply cannot be written within TCPWriteTimeout (RFC 7766).
//     A client that never reads is released about 5 s after the socket
//     buffers fill.
//
// # The UDP path
//
// UDP is served by the package itself; TCP by miekg/dns's server. Each
// listen address is bound with UDPSockets UDP sockets: by default
// GOMAXPROCS, as CoreDNS's multisocket (the ServerConfiguration's
// udpSockets, serve's --udp-sockets). With several, each has SO_REUSEPORT,
// and Linux spreads the clients over them by a hash of their address and
// port. Each socket is read by one goroutine, a batch at a time
// (internal/udpbatch: up to 16 datagrams a call). The buffers hold 4096
// bytes; a longer datagram is cut, and then malformed. Each datagram of a
// batch goes one of three ways:
//
//   - Shorter than a header: dropped.
//   - A handler that implements WireAnswerer answers it from its wire form,
//     on the reading goroutine. These are the cluster handler's cached zone
//     replies, forwarded cache hits and wire misses, and the node-local
//     stage's cache hits. The reply is counted and joins the batch's other
//     replies, sent in one call once the batch is done. The listener
//     allocates nothing for such a datagram (BenchmarkServeUDPWire: 0
//     allocs/op). The handlers allocate nothing for a hit of the answer
//     cache, one object for a zone reply (its key) and four for a zone miss
//     with namespace metrics.
//   - Every other datagram is copied and served on another goroutine: one
//     of at most 16 that served one before and wait, else a new one. It is
//     served as miekg/dns serves it. First its default MsgAcceptFunc: a
//     response is ignored, an opcode other than QUERY and NOTIFY gets
//     NOTIMP, and more than one question or too many records get FORMERR.
//     Then it is unpacked (FORMERR when that fails), then the handler's
//     ServeDNS runs. The replies are miekg/dns's byte for byte
//     (TestUDPBatch).
//
// On a wildcard address (0.0.0.0, [::]) a reply leaves from the address
// its query was sent to, as miekg/dns's does. Without ReusePort the TCP
// socket is bound first and without SO_REUSEPORT, so a second instance
// fails there before it binds a UDP socket. The UDP sockets still carry
// SO_REUSEPORT when there are several, so another program of the same user
// that sets it could share them (udpSockets 1 binds one socket without it).
//
// SetHandler swaps the handler without dropping a query (serve's config
// reload). A panic in the handler answers SERVFAIL; the panic is counted
// and its stack logged once. With ReusePort every socket is bound with
// SO_REUSEPORT, so a new instance serves the address before the old one
// stops; the clients' retry covers the queries the old sockets held unread.
// Run keeps answering for Lameduck after its context ends, with Ready false.
//
// # Metrics
//
// The Server counts every query it answers, from its wire form or through
// ServeDNS, before the reply leaves. The families carry the information of
// CoreDNS's coredns_dns_* ones: dnsconfigurer_dnsserver_requests_total{zone,
// proto,family,type}, _responses_total{zone,rcode},
// _request_duration_seconds{zone,type}, _request_size_bytes{zone,proto},
// _response_size_bytes{zone,proto}, _do_requests_total{zone}; with
// _panics_total, _udp_dropped_total, _tcp_refused_total, _tcp_connections
// and _lameduck, every series labelled
// server=Server.Name when set. _listen_queries_total{listen} counts the
// queries received on each Listen address as configured ("10.96.0.10:53"):
// the node-local stage's alert on an address that gets none (a node whose
// pods resolve through something else, such as Cilium's eBPF rewriting the
// Service IP) reads it. The label values are bounded: zone is the
// closest of Server.Zones containing the name or "."; type one of CoreDNS's
// monitored types (A, AAAA, CNAME, MX, NS, PTR, SOA, SRV, TXT, HTTPS, SVCB,
// DS, DNSKEY, RRSIG, NSEC, NSEC3, IXFR, AXFR, ANY) or "other"; rcode a name
// or "other"; proto udp or tcp; family 1 or 2. Counting is a few atomic adds
// in arrays indexed by those values, read at scrape time, with no allocation
// (BenchmarkCountWire, TestCountingAllocatesNothing). The cluster zone's own
// metrics (records, autopath, namespaces) are pkg/clusterdns's.
//
// The DNS adapters (this package, pkg/clusterdns, pkg/dnsmsg, pkg/forward,
// pkg/dnscache, pkg/hosts, pkg/nodelocal, and cmd) import miekg/dns; the
// pure core, pkg/clusterdns/store included, must not (internal/layering
// checks it).
package dnsserver
