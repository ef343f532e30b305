// Package dnsserver is the wire layer of the cluster DNS server: a miekg/dns
// Handler that answers the cluster zone (Kubernetes DNS-Based Service
// Discovery 1.1.0) from a store.Snapshot and autopath names by server-side
// search expansion (WithAutopath, WithAutopathBySource), a Forwarder for
// every other name, a Server that serves UDP and TCP on each listen address
// (the node-local stage uses it and the Forwarder too; a TCP reply that
// cannot be written within 5 s closes its connection, so clients that never
// read are released), and the Prometheus
// metrics (served by internal/health with /healthz and /readyz).
//
// The core is Handler.Resolve(ctx, question) → Result{Rcode, Answer, Ns,
// Extra}: it answers without touching the wire, so that server-side search
// expansion (autopath) can call it per suffix. ServeDNS wraps it with the
// message-level rules of pkg/dnsmsg, which the node-local stage shares:
// FORMERR for a query without exactly one question, NOTIMP for opcodes other
// than QUERY, BADVERS for EDNS versions other than 0, EDNS0 (the server
// advertises dnsmsg.EDNSSize, 1232 bytes) and truncation to 512 bytes
// without EDNS0, the client's EDNS0 size with it but never more than 1232
// bytes over UDP (a claim of 65535 gets 1232), 64 KiB over TCP, with the TC
// bit set when records were left out. Resolve answers REFUSED for classes
// other than IN (and ANY).
//
// Answers:
//
//   - names in the zone come from the snapshot (one map lookup on the
//     lowercase name); the question's case is echoed in the answer owners.
//     Replies made from the zone are cached packed, per snapshot, keyed by
//     the question as asked, EDNS0 presence, DO bit and size limit; a cache
//     hit patches the ID and the RD and CD bits and writes the bytes. The
//     cache is bounded (6 MiB in two generations) and dropped with its
//     snapshot, so it never serves stale data;
//   - a name that does not exist is NXDOMAIN, a name that exists (including
//     an empty non-terminal) without the asked type is NOERROR with no
//     answer; both carry the zone SOA in the authority section, its minimum
//     TTL equal to the record TTL;
//   - before the first full sync every zone and reverse name is SERVFAIL;
//   - ExternalName Services answer with their CNAME followed by the target's
//     records: looked up in the snapshot when the target is in the zone,
//     asked upstream otherwise;
//   - reverse names (in-addr.arpa, ip6.arpa) of ClusterIPs and endpoints are
//     answered from the snapshot; other reverse names are forwarded, as
//     CoreDNS's default "fallthrough in-addr.arpa ip6.arpa";
//   - names under the autopath suffix (search.<ns>.<zone>.ap.k8s.io) are
//     never forwarded: each candidate of the search list (from the EDNS0
//     local option, else the namespace's cluster searches; pkg/autopath's
//     rules) is tried and the first that is not NXDOMAIN, in search-list
//     order, answers behind a CNAME from the asked name; such answers are
//     not cached. Zone candidates are free; at most 8 candidates that need
//     an upstream (the name itself always among them) are asked, in
//     parallel, the others are not tried, and the expansion ends within 4 s;
//   - every other name is forwarded to the upstreams (REFUSED without any).
//     The Forwarder never sends to the server's own listen addresses. Its
//     resources are bounded: an Exchange ends within its timeout (2s by
//     default) whatever the number of upstreams; at most MaxInFlight (1000)
//     wait at once and further queries are SERVFAIL at once; queries go
//     upstream advertising dnsmsg.EDNSSize, so a UDP read needs 1232 bytes
//     (TCP when the reply does not fit); identical queries in flight are
//     sent once. Each query carries a loop marker (an EDNS0 local option,
//     65534, random per Forwarder); one that comes back with it is
//     SERVFAIL, so two servers forwarding to each other stop after three
//     queries.
//
// The DNS adapters (this package, pkg/dnsmsg, pkg/nodelocal, and cmd) import
// miekg/dns; the pure core, pkg/dnsserver/store included, must not
// (internal/layering checks it).
package dnsserver
