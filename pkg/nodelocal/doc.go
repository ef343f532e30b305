// Package nodelocal is the node-local DNS stage (`dnsconfigurer serve --mode
// node-local`): a caching forwarder in front of the cluster DNS that also
// carries autopath search lists.
//
// For every query it answers from a pkg/dnscache Cache keyed by the
// lowercase question and the DO and CD bits (positive answers up to MaxTTL
// and their own TTLs, NXDOMAIN and NODATA with an SOA up to MaxNegativeTTL
// and min(SOA TTL, SOA MINIMUM), other rcodes, denials without an SOA and
// truncated replies never; TTLs age while cached; at most CacheSize
// answers of each kind and CacheBytes of memory, 32 MiB by default, four
// fifths for answers and one fifth for denials, so NXDOMAIN floods never
// evict answers; the least recently used dropped first) or forwards it
// once, however many identical questions are in flight (request
// coalescing), through an Exchanger (dnsserver.Forwarder: UDP, then TCP
// when the reply is truncated). An upstream that fails is SERVFAIL.
//
// Answers are cached packed: each counts its packed size as the runtime
// allocates it (size class or whole pages), its name and EntryOverhead, so
// the heap the cache holds stays within CacheBytes whatever the answer sizes
// (dnscache's TestCacheBytesBound: 38 MiB of answers of 100 B to 60 KB
// offered to an 8 MiB cache leave 7.85 MiB on the heap). An answer bigger
// than its share of CacheBytes is served and not cached. The cache's
// metrics (dnsconfigurer_cache_*{server="nodelocal"}) are registered with
// the stage's.
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
// The message rules are pkg/dnsmsg's, as in the cluster DNS: FORMERR,
// NOTIMP and BADVERS for queries it does not answer, an OPT advertising
// dnsmsg.EDNSSize (1232) in replies to EDNS0 clients and in forwarded
// queries, and truncation to what the client can receive.
//
// It imports miekg/dns, Prometheus, pkg/autopath, pkg/dnscache and
// pkg/dnsmsg; not pkg/dnsserver (Exchanger is declared here).
package nodelocal
