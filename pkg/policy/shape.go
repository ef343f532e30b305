package policy

import "strings"

// searchShape is kubelet's ClusterFirst search shape for one cluster domain
// (generateSearchesForDNSClusterFirst), and the autopath search domain that
// replaces it, with the suffixes computed once.
type searchShape struct {
	domain   string // cluster domain, "" for none
	svc      string // "svc.<domain>"
	nsSuffix string // ".svc.<domain>"
	apSuffix string // ".<domain>.ap.k8s.io"
}

func newSearchShape(domain string) searchShape {
	if domain == "" {
		return searchShape{}
	}
	return searchShape{domain: domain, svc: "svc." + domain, nsSuffix: ".svc." + domain,
		apSuffix: "." + domain + "." + AutopathZone}
}

// cluster appends the search list of a ClusterFirst pod in ns to dst: the
// namespace, service and cluster domains ahead of the host searches,
// duplicates omitted; the host searches alone without a cluster domain.
// It does not apply the limits.
func (s searchShape) cluster(dst []string, ns string, hostSearches []string) []string {
	if s.domain == "" {
		return append(dst, hostSearches...)
	}
	dst = s.clusterDomains(dst, ns)
	dst = append(dst, hostSearches...)
	return omitDuplicates(dst)
}

// clusterDomains appends the namespace, service and cluster domains of a
// ClusterFirst pod in ns to dst (a cluster domain is required).
func (s searchShape) clusterDomains(dst []string, ns string) []string {
	return append(dst, ns+s.nsSuffix, s.svc, s.domain)
}

// autopath is the single search domain of an autopath pod in ns:
// "search.<ns>.<domain>.ap.k8s.io"; "" without a cluster domain.
func (s searchShape) autopath(ns string) string {
	if s.domain == "" {
		return ""
	}
	return "search." + ns + s.apSuffix
}

// ClusterSearches is the search list kubelet gives a ClusterFirst pod of
// namespace ns without a dnsConfig, on a node with cluster domain domain
// (no trailing dot) and host search domains hostSearches, fitted to
// kubelet's limits. The autopath stage and the cluster DNS server expand
// names over this list, so it is the one definition of the shape.
func ClusterSearches(ns, domain string, hostSearches []string) []string {
	s := newSearchShape(domain).cluster(nil, ns, hostSearches)
	return fitSearches(s, nil, nil)
}

// NamespaceSearch is the first entry of a ClusterFirst pod's search list,
// "<ns>.svc.<domain>" (the name a stub resolver tries first).
func NamespaceSearch(ns, domain string) string {
	return ns + newSearchShape(domain).nsSuffix
}

// AutopathName is a parsed autopath query name: what searchShape.autopath
// built, with the name the application asked for in front.
type AutopathName struct {
	// Base is the name the application asked for, as an FQDN, in the case
	// the question used.
	Base string
	// Namespace is the pod's namespace (lowercase).
	Namespace string
}

// ParseAutopath is the inverse of the autopath search domain. It
// recognises qname (an FQDN, any case) of the form
// "<base>.search.<namespace>.<domain>.ap.k8s.io." for the cluster domain
// domain (with or without trailing dot). It works from the right, so a
// base that holds a "search" label is kept whole. ok is false for any
// other name, and for a base that already carries the autopath zone: a
// name is never expanded twice.
func ParseAutopath(qname, domain string) (n AutopathName, ok bool) {
	const zone = "." + AutopathZone + "."
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	if domain == "" || !hasSuffixFold(qname, zone) {
		return AutopathName{}, false
	}
	rest := qname[:len(qname)-len(zone)] // "<base>.search.<ns>.<domain>"
	if !hasSuffixFold(rest, "."+domain) {
		return AutopathName{}, false
	}
	rest = rest[:len(rest)-len(domain)-1] // "<base>.search.<ns>"
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return AutopathName{}, false
	}
	ns := strings.ToLower(rest[i+1:])
	rest = rest[:i] // "<base>.search"
	j := strings.LastIndexByte(rest, '.')
	if j <= 0 || !strings.EqualFold(rest[j+1:], "search") || ns == "" {
		return AutopathName{}, false
	}
	base := rest[:j] + "."
	if hasSuffixFold(base, zone) || strings.EqualFold(base, zone[1:]) {
		return AutopathName{}, false
	}
	return AutopathName{Base: base, Namespace: ns}, true
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}
