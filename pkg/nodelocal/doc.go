// Package nodelocal is the node-local DNS stage (`dnsconfigurer serve --mode
// node-local`): a caching forwarder in front of the cluster DNS that also
// carries autopath search lists.
//
// For every query it answers from a cache (positive answers up to MaxTTL,
// negative ones up to MaxNegativeTTL, SERVFAIL never) or forwards it once,
// however many identical questions are in flight (request coalescing), over
// UDP and over TCP when the reply is truncated or the client used TCP. For a
// name under "search.<ns>.<clusterDomain>.ap.k8s.io" it adds an EDNS0 local
// option (code 65001 by default) whose value is the pod's search list
// "<ns>.svc.<zone>,svc.<zone>,<zone>,<node's host searches>", and strips the
// option from the reply. A client-supplied option with that code is always
// removed first, so pods cannot choose another namespace's search list.
package nodelocal
