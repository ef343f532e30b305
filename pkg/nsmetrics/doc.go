// Package nsmetrics counts the cluster DNS queries of each namespace's pods.
//
// It counts ClusterFirst search walks in the cluster zone and autopath
// queries. It exports them for the topN namespaces by volume plus "other".
// docs/amplification.md has the definitions and the PromQL:
//
//   - dnsconfigurer_dnsserver_namespace_queries_total{namespace}
//   - dnsconfigurer_dnsserver_namespace_lookups_total{namespace}
//   - dnsconfigurer_dnsserver_namespace_misses_total{namespace}
//   - dnsconfigurer_dnsserver_namespace_hits_total{namespace}
//   - dnsconfigurer_dnsserver_namespace_external_lookups_total{namespace}
//   - dnsconfigurer_dnsserver_namespaces_tracked (gauge)
//   - dnsconfigurer_dnsserver_namespace_series_changes_total
//
// Only a walk's first step carries the pod's namespace. That step is
// "<x>.<ns>.svc.<zone>" (kubelet's search list starts with
// "<ns>.svc.<zone>"), or "<x>.search.<ns>.<zone>.ap.k8s.io" under autopath.
// A first step answered other than NXDOMAIN is a lookup of one query.
// A first step answered NXDOMAIN counts the rest of the walk in the zone,
// predicted from the snapshot: "<x>.svc.<zone>" then "<x>.<zone>", up to
// the first that exists. Later steps may reach other replicas (each step
// is a new socket), so predicting counts the walk whole, once. Later
// steps are not counted when they arrive, nor steps outside the zone.
// A name of a namespace the store does not know counts one query in
// "other" ("www.example.com.svc.<zone>" is of namespace "com").
//
// Bounds: counters exist only for namespaces the store knows, and go with
// the namespace. Each family has at most topN+1 series. A handler classifies
// a query once per cached reply; counting a cache hit is a few atomic adds,
// with no allocation.
//
// Series are monotonic. A namespace that gets a series starts it where its
// last one stopped (0 the first time). What it counted without one is in
// "other". A series taken away ends at its value of the last collection.
// The series are chosen at the first collection, and again at a collection
// a minute after the last choice. Free places go to the highest scores. A
// namespace without a series takes the place of the lowest one only when
// its score is more than twice that and at least 60 above it, so noise does
// not swap them.
//
// It imports the record store and miekg/dns, and nothing of pkg/clusterdns.
package nsmetrics
