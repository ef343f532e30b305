// Package autopath is the pure core of server-side search expansion (KEP
// "DNS Autopath in PodSpec").
//
// It builds and validates the EDNS0 option that carries a pod's search
// list. It lists the names to try in order. The autopath names are
// policy's: policy builds the search domain and parses a query name
// "<name>.search.<namespace>.<clusterDomain>.ap.k8s.io." back
// (policy.ParseAutopath).
//
// A ClusterFirstWithAutopath pod has the single search path
// "search.<ns>.<clusterDomain>.ap.k8s.io" and ndots:5, so its stub resolver
// sends one query per lookup; the node-local stage adds the option with the
// full search list, and the cluster DNS server tries "<name>.<search>" for
// each entry and finally "<name>." itself, answering with the first result
// that is not NXDOMAIN behind a CNAME from the asked name.
//
// It imports the standard library and pkg/policy only (no DNS library), so
// the rules are testable alone; the search list shape, kubelet's limits and
// the zone are policy's.
package autopath
