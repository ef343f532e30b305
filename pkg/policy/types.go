package policy

import (
	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// Policy is a pod's spec.dnsPolicy, or the autopath policy selected by
// annotation.
type Policy string

// The dnsPolicy values of the Pod API, and dnsconfigurer's autopath policy.
const (
	ClusterFirstWithHostNet Policy = "ClusterFirstWithHostNet"
	ClusterFirst            Policy = "ClusterFirst"
	Default                 Policy = "Default"
	None                    Policy = "None"

	// ClusterFirstWithAutopath is selected by AnnotationDNSPolicy on a pod
	// whose dnsPolicy is ClusterFirst (or ClusterFirstWithHostNet): the API
	// server rejects unknown dnsPolicy values.
	ClusterFirstWithAutopath Policy = "ClusterFirstWithAutopath"
)

// AnnotationDNSPolicy selects ClusterFirstWithAutopath, or ClusterFirst to
// opt out of a default: as a pod annotation, and as a Namespace label for
// the namespace's pods without the annotation.
const AnnotationDNSPolicy = "dnsconfigurer.io/dns-policy"

// AutopathZone is the suffix of the autopath search path
// "search.<namespace>.<clusterDomain>.ap.k8s.io" (pkg/autopath parses it).
const AutopathZone = "ap.k8s.io"

// Limits kubelet applies to the merged config (pkg/apis/core/validation):
// the one definition every package uses.
const (
	MaxNameservers     = 3
	MaxSearchPaths     = 32
	MaxSearchListChars = 2048
	MaxSearchLength    = 253
)

// Option is one entry of spec.dnsConfig.options. A nil Value and an empty
// Value both render as the bare name, as in kubelet.
type Option struct {
	Name  string
	Value *string
}

// format is the option as resolv.conf writes it (resolvconf.FormatOption).
func (o Option) format() string {
	v := ""
	if o.Value != nil {
		v = *o.Value
	}
	return resolvconf.FormatOption(o.Name, v)
}

// DNSConfig is spec.dnsConfig.
type DNSConfig struct {
	Nameservers []string
	Searches    []string
	Options     []Option
}

// Input is everything about a pod the engine reads. Adapters build it from a
// v1.Pod (pkg/podspec) or a runtime's sandbox (pkg/podfacts).
type Input struct {
	Name      string
	Namespace string
	UID       string

	Policy Policy // spec.dnsPolicy as written; "" is treated as kubelet treats an unknown value
	// PolicyAnnotation is the value of AnnotationDNSPolicy, "" when absent:
	// ClusterFirstWithAutopath, or ClusterFirst to opt out of a namespace
	// label's or the cluster's default.
	PolicyAnnotation string
	// NamespacePolicy is the AnnotationDNSPolicy label of the pod's
	// namespace, "" when absent or not known. It applies when the pod has
	// no annotation (pod annotation > namespace label >
	// Node.DefaultPolicy), with the same values.
	NamespacePolicy string
	HostNetwork     bool
	DNSConfig       *DNSConfig // nil and an empty non-nil config differ, as in kubelet

	Hostname          string
	Subdomain         string
	HostnameOverride  *string
	SetHostnameAsFQDN bool
}

// Node is the node's DNS settings: kubelet's clusterDNS, clusterDomain and the
// node IPs, plus dnsconfigurer's node-local DNS address and the node OS.
type Node struct {
	// ClusterDNS are kubelet's clusterDNS entries, parsed as kubelet does
	// (leading zeros read as decimal); unparsable entries are skipped with a
	// warning.
	ClusterDNS    []string
	ClusterDomain string
	// NodeLocalDNS, when set, is the nameserver of autopath pods instead of
	// ClusterDNS.
	NodeLocalDNS []string
	// NodeIPs decide the loopback nameserver of host-type pods when the
	// resolver config is switched off ("" resolvConf).
	NodeIPs []string
	// OS is "linux" (the default when empty) or "windows".
	OS string
	// KubeletVersion is the node's kubelet version, such as "v1.34.4"
	// (ParseRelease); "" is the newest this package mirrors. It selects
	// kubelet's behaviour where releases differ: before 1.35 kubelet
	// ignores spec.hostnameOverride.
	KubeletVersion string

	// DefaultPolicy is the cluster's policy for pods that did not choose
	// (no AnnotationDNSPolicy annotation, no namespace label):
	// ClusterFirstWithAutopath upgrades the pods whose effective policy is
	// ClusterFirst (not hostNetwork, Default or None pods); "" and
	// ClusterFirst change nothing.
	DefaultPolicy Policy
	// Ndots, when set (0 to v1alpha1.MaxNdots), replaces kubelet's ndots:5 in the
	// base options of cluster DNS pods (ClusterFirst and autopath); a
	// pod's dnsConfig.options ndots still wins. Host-type and None pods
	// keep their options.
	Ndots *int
}

// NodeOf is the engine's view of a node's DNS settings, the cluster's pod
// policy and the node IPs. It is the one conversion from the api types:
// the shim, the NRI plugin, the webhook, render, validate, explain and
// demo all build their engine through it.
func NodeOf(n v1alpha1.NodeDNS, p v1alpha1.PodPolicy, nodeIPs []string) Node {
	node := Node{ClusterDNS: n.ClusterDNS, ClusterDomain: n.Domain(), NodeLocalDNS: n.NodeLocalDNS,
		NodeIPs: nodeIPs, OS: n.NodeOS, Ndots: p.Ndots, KubeletVersion: n.KubeletVersion}
	if p.DefaultDNSPolicy == v1alpha1.DNSPolicyClusterFirstWithAutopath {
		node.DefaultPolicy = ClusterFirstWithAutopath
	}
	return node
}

// Host is the node's resolver config (kubelet's resolvConf file), as
// kubelet reads it: loopback nameservers included (Compute applies the
// loopback rule to pods off the host network).
type Host struct {
	// Disabled is kubelet's resolvConf "": host-type pods get a loopback
	// nameserver per node IP and the search list ".".
	Disabled    bool
	Nameservers []string
	Searches    []string
	Options     []string
	// Err is a resolver config that could not be read or parsed. kubelet
	// fails every pod's sandbox on it, whatever the policy.
	Err error
	// Source names the config in a Trace (its path), and Lines where in it
	// each part was read; Compute ignores both.
	Source string
	Lines  resolvconf.Lines
}

// Type is how the engine built the base config.
type Type string

// The base config types.
const (
	TypeNone     Type = "none"
	TypeCluster  Type = "cluster"
	TypeHost     Type = "host"
	TypeAutopath Type = "autopath"
)

// Result is a pod's resolver config and names.
type Result struct {
	Nameservers []string
	Searches    []string
	Options     []string
	// Hostname is the sandbox hostname (the FQDN with setHostnameAsFQDN);
	// empty for hostNetwork pods, which keep the node's.
	Hostname string
	// FQDN is "<hostname>.<subdomain>.<namespace>.svc.<clusterDomain>", empty
	// without a subdomain and for hostNetwork pods.
	FQDN string
	// Type is the base the config was built from, after fallbacks.
	Type Type
	// Warnings are what kubelet would log or emit as Events, in order.
	Warnings []Warning
}

// Config is the result's resolver config, to Format or compare.
func (r Result) Config() resolvconf.Config {
	return resolvconf.Config{Nameservers: r.Nameservers, Searches: r.Searches, Options: r.Options}
}

// Warning reasons. The first three are kubelet's Event reasons.
const (
	ReasonDNSConfigForming  = "DNSConfigForming"
	ReasonMissingClusterDNS = "MissingClusterDNS"
	ReasonInvalidClusterDNS = "InvalidClusterDNS"

	ReasonInvalidDNSPolicy          = "InvalidDNSPolicy"
	ReasonClusterFirstOnHostNetwork = "ClusterFirstOnHostNetwork"
	ReasonHostnameTruncated         = "HostnameTruncated"
	ReasonAutopathIgnored           = "AutopathIgnored"
	ReasonWindowsOptionsIgnored     = "WindowsOptionsIgnored"
	ReasonLoopbackNameserver        = "LoopbackNameserverDropped"
	ReasonHostnameOverrideIgnored   = "HostnameOverrideIgnored"
)

// Limit names carried by Warning.Limit.
const (
	LimitNameservers = "nameservers"
	LimitSearches    = "searches"
)

// Warning is something kubelet tolerates but reports. Reason and Message are
// what kubelet's Event or log line says; Limit and Omitted describe a
// trimming so that callers can reject instead of trim.
type Warning struct {
	Reason  string
	Message string
	// Limit is LimitNameservers or LimitSearches for a DNSConfigForming
	// trimming, empty otherwise.
	Limit string
	// Omitted are the entries the trimming removed, in order.
	Omitted []string
	// Before is how many entries there were before the trimming.
	Before int
}

// HostOf is the Host of a parsed resolver config.
func HostOf(cfg resolvconf.Config) Host {
	return Host{Nameservers: cfg.Nameservers, Searches: cfg.Searches, Options: cfg.Options}
}
