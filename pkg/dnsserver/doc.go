// Package dnsserver is the UDP and TCP listener both DNS modes share.
//
// A Server serves a dns.Handler over UDP and TCP on each listen address.
// The cluster DNS (pkg/clusterdns) and the node-local stage
// (pkg/nodelocal) both answer through it. Every resource a client can make
// it hold is bounded: UDP queries in flight; TCP connections and queries
// in flight, each with a share per client address; and each connection's
// queries and time.
//
// UDP is read in batches from GOMAXPROCS SO_REUSEPORT sockets by default.
// A handler that implements WireAnswerer answers from the wire form with
// no allocation; every other query is served as miekg/dns serves it. TCP
// is served by the package too: the queries pipelined on a connection are
// answered concurrently (RFC 7766), and a message that does not parse
// closes its connection. SetHandler swaps the handler without dropping a
// query.
//
// The Server counts every query in the families of CoreDNS's
// coredns_dns_* metrics, under dnsconfigurer_dnsserver_*.
//
// README.md is the manual: the limits, the UDP and TCP paths step by step,
// restarts with ReusePort and lameduck, and every metric with its labels.
package dnsserver
