package policy

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
