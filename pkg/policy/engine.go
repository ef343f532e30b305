package policy

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/fqdn"
)

// Engine computes pod DNS for one node. It is immutable after New and safe
// for concurrent use; the per-pod work in Compute allocates only the result.
type Engine struct {
	node         Node
	clusterDNS   []string // canonical, usable entries
	nodeLocalDNS []string
	hostOffline  []string // nameservers for host-type pods with resolvConf ""
	svcDomain    string   // "svc.<domain>"
	nsSuffix     string   // ".svc.<domain>"
	apSuffix     string   // ".<domain>.ap.k8s.io"
	windows      bool
	warnings     []Warning
}

// New prepares an engine for node. Unparsable clusterDNS or nodeLocalDNS
// entries are skipped and reported as warnings (kubelet logs "Invalid
// clusterDNS IP"); an unknown OS is an error.
func New(node Node) (*Engine, error) {
	e := &Engine{node: node}
	switch node.OS {
	case "", "linux":
	case "windows":
		e.windows = true
	default:
		return nil, fmt.Errorf("node os %q: must be \"linux\" or \"windows\"", node.OS)
	}
	e.clusterDNS = e.parseIPs(node.ClusterDNS, "clusterDNS")
	e.nodeLocalDNS = e.parseIPs(node.NodeLocalDNS, "nodeLocalDNS")
	for _, s := range node.NodeIPs {
		ip := ParseIPSloppy(s)
		if ip == nil {
			e.warnings = append(e.warnings, Warning{Reason: ReasonInvalidClusterDNS, Message: fmt.Sprintf("invalid node IP %q skipped", s)})
			continue
		}
		if ip.To4() == nil {
			e.hostOffline = append(e.hostOffline, "::1")
		} else {
			e.hostOffline = append(e.hostOffline, "127.0.0.1")
		}
	}
	if len(e.hostOffline) == 0 {
		e.hostOffline = []string{"127.0.0.1"}
	}
	if d := node.ClusterDomain; d != "" {
		e.svcDomain = "svc." + d
		e.nsSuffix = ".svc." + d
		e.apSuffix = "." + d + "." + AutopathZone
	}
	return e, nil
}

func (e *Engine) parseIPs(in []string, what string) []string {
	var out []string
	for _, s := range in {
		ip := ParseIPSloppy(s)
		if ip == nil {
			e.warnings = append(e.warnings, Warning{Reason: ReasonInvalidClusterDNS, Message: fmt.Sprintf("Invalid %s IP %q skipped", what, s)})
			continue
		}
		out = append(out, ip.String())
	}
	return out
}

// Warnings are the problems New found in the node settings.
func (e *Engine) Warnings() []Warning { return e.warnings }

// Node returns the settings the engine was built from.
func (e *Engine) Node() Node { return e.node }

// ClusterDNS returns the usable cluster DNS addresses in canonical form.
func (e *Engine) ClusterDNS() []string { return append([]string(nil), e.clusterDNS...) }

// AutopathSearch is the single search path of an autopath pod in ns:
// "search.<ns>.<clusterDomain>.ap.k8s.io". Empty without a cluster domain.
func (e *Engine) AutopathSearch(ns string) string {
	if e.apSuffix == "" {
		return ""
	}
	return "search." + ns + e.apSuffix
}

// ErrHostConfig wraps Host.Err in Compute's error.
var ErrHostConfig = errors.New("node resolver config unusable")

// Compute returns the pod's resolver config and names. The error is what
// would make kubelet fail the pod's sandbox: an unusable node resolver
// config (ErrHostConfig), an invalid hostname or subdomain, or a
// setHostnameAsFQDN FQDN over 64 characters (*fqdn.TooLongError).
func (e *Engine) Compute(in Input, host Host) (Result, error) {
	var r Result
	// kubelet reads the node file before it looks at the policy (S1).
	if host.Err != nil {
		return r, fmt.Errorf("%w: %w", ErrHostConfig, host.Err)
	}
	r.Type = e.baseType(in, &r.Warnings)
	switch r.Type {
	case TypeCluster:
		if len(e.clusterDNS) == 0 {
			r.Warnings = append(r.Warnings, missingClusterDNS())
			r.Type = TypeHost
			break
		}
		ns, sr, op := carve(len(e.clusterDNS)+podLen(in, 0), 3+len(host.Searches)+podLen(in, 1), 1+optLen(in))
		r.Nameservers = append(ns, e.clusterDNS...)
		r.Searches = e.clusterSearches(sr, in.Namespace, host.Searches)
		r.Options = append(op, ndots5)
	case TypeAutopath:
		servers := e.nodeLocalDNS
		if len(servers) == 0 {
			servers = e.clusterDNS
		}
		if len(servers) == 0 {
			r.Warnings = append(r.Warnings, missingClusterDNS())
			r.Type = TypeHost
			break
		}
		ns, sr, op := carve(len(servers)+podLen(in, 0), 1+podLen(in, 1), 1+optLen(in))
		r.Nameservers = append(ns, servers...)
		r.Searches = append(sr, e.AutopathSearch(in.Namespace))
		r.Options = append(op, ndots5)
	}
	if r.Type == TypeHost {
		if host.Disabled {
			r.Nameservers = append([]string(nil), e.hostOffline...)
			r.Searches = []string{"."}
		} else {
			r.Nameservers = append([]string(nil), host.Nameservers...)
			r.Searches = append([]string(nil), host.Searches...)
			r.Options = append([]string(nil), host.Options...)
		}
	}
	if in.DNSConfig != nil {
		r.Nameservers = omitDuplicates(append(r.Nameservers, in.DNSConfig.Nameservers...))
		r.Searches = omitDuplicates(append(r.Searches, in.DNSConfig.Searches...))
		r.Options = mergeOptions(r.Options, in.DNSConfig.Options)
	}
	r.Nameservers = fitNameservers(r.Nameservers, &r.Warnings)
	r.Searches = fitSearches(r.Searches, &r.Warnings)
	if r.Nameservers == nil {
		r.Nameservers = []string{}
	}
	if r.Searches == nil {
		r.Searches = []string{}
	}
	if r.Options == nil {
		r.Options = []string{}
	}
	if e.windows && len(r.Options) > 0 {
		r.Warnings = append(r.Warnings, Warning{Reason: ReasonWindowsOptionsIgnored,
			Message: fmt.Sprintf("Windows nodes apply only nameservers and search suffixes; options %q have no effect", strings.Join(r.Options, " "))})
	}
	if in.HostNetwork {
		return r, nil
	}
	names, err := fqdn.ForPod(fqdn.Pod{Name: in.Name, Namespace: in.Namespace, Hostname: in.Hostname,
		Subdomain: in.Subdomain, HostnameOverride: in.HostnameOverride}, e.node.ClusterDomain)
	if err != nil {
		return r, err
	}
	if names.Truncated {
		r.Warnings = append(r.Warnings, Warning{Reason: ReasonHostnameTruncated,
			Message: fmt.Sprintf("Hostname for pod was too long, truncated it: %q is %d characters, the hostname is %q", names.Original, len(names.Original), names.Hostname)})
	}
	r.Hostname, err = fqdn.KernelHostname(names, in.SetHostnameAsFQDN)
	if err != nil {
		return r, err
	}
	r.FQDN = names.FQDN()
	return r, nil
}

// baseType maps the policy to a base type as getPodDNSType does, adding the
// autopath policy, and records what kubelet tolerates silently.
func (e *Engine) baseType(in Input, w *[]Warning) Type {
	var t Type
	switch in.Policy {
	case None:
		t = TypeNone
	case ClusterFirstWithHostNet:
		t = TypeCluster
	case ClusterFirst:
		t = TypeCluster
		if in.HostNetwork {
			t = TypeHost
			*w = append(*w, Warning{Reason: ReasonClusterFirstOnHostNetwork,
				Message: `dnsPolicy "ClusterFirst" on a hostNetwork pod uses the node's resolver config, as "Default" does; use "ClusterFirstWithHostNet" for cluster DNS`})
		}
	case Default:
		t = TypeHost
	default:
		t = TypeCluster
		*w = append(*w, Warning{Reason: ReasonInvalidDNSPolicy,
			Message: fmt.Sprintf("invalid DNSPolicy=%s: falling back to DNSClusterFirst policy", in.Policy)})
	}
	switch in.PolicyAnnotation {
	case "":
	case string(ClusterFirstWithAutopath):
		switch {
		case t != TypeCluster:
			*w = append(*w, Warning{Reason: ReasonAutopathIgnored, Message: autopathUnusable(in)})
		case e.apSuffix == "":
			*w = append(*w, Warning{Reason: ReasonAutopathIgnored,
				Message: "annotation " + AnnotationDNSPolicy + ": ClusterFirstWithAutopath needs a cluster domain; using ClusterFirst"})
		default:
			t = TypeAutopath
		}
	default:
		*w = append(*w, Warning{Reason: ReasonAutopathIgnored,
			Message: fmt.Sprintf("annotation %s: unsupported value %q ignored: the only supported value is %q", AnnotationDNSPolicy, in.PolicyAnnotation, ClusterFirstWithAutopath)})
	}
	return t
}

// autopathUnusable explains why a pod's policy cannot carry the autopath
// annotation, or returns "" when it can.
func autopathUnusable(in Input) string {
	switch {
	case in.Policy == None || in.Policy == Default:
		return fmt.Sprintf("annotation %s: ClusterFirstWithAutopath is ignored with dnsPolicy %q; it needs dnsPolicy \"ClusterFirst\"", AnnotationDNSPolicy, in.Policy)
	case in.HostNetwork && in.Policy == ClusterFirst:
		return fmt.Sprintf("annotation %s: ClusterFirstWithAutopath is ignored on a hostNetwork pod with dnsPolicy \"ClusterFirst\"; it needs dnsPolicy \"ClusterFirstWithHostNet\"", AnnotationDNSPolicy)
	}
	return ""
}

func missingClusterDNS() Warning {
	return Warning{Reason: ReasonMissingClusterDNS,
		Message: `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`}
}

// podLen is the number of pod nameservers (which=0) or searches (which=1),
// to size slices once.
func podLen(in Input, which int) int {
	if in.DNSConfig == nil {
		return 0
	}
	if which == 0 {
		return len(in.DNSConfig.Nameservers)
	}
	return len(in.DNSConfig.Searches)
}

const ndots5 = "ndots:5"

// carve makes one backing array for the three result lists, each an empty
// slice with exactly its capacity, so that filling them never reallocates
// and one list can never grow into the next.
func carve(a, b, c int) (x, y, z []string) {
	buf := make([]string, a+b+c)
	return buf[:0:a], buf[a : a : a+b], buf[a+b : a+b : a+b+c]
}

func optLen(in Input) int {
	if in.DNSConfig == nil {
		return 0
	}
	return len(in.DNSConfig.Options)
}

// clusterSearches is generateSearchesForDNSClusterFirst: the namespace,
// service and cluster domains ahead of the host searches, duplicates
// omitted; the host searches alone without a cluster domain.
func (e *Engine) clusterSearches(dst []string, ns string, hostSearches []string) []string {
	if e.node.ClusterDomain == "" {
		return append(dst, hostSearches...)
	}
	dst = append(dst, ns+e.nsSuffix, e.svcDomain, e.node.ClusterDomain)
	dst = append(dst, hostSearches...)
	return omitDuplicates(dst)
}

// omitDuplicates keeps the first of equal strings (exact, case-sensitive),
// in place. Up to 64 entries (every list that can fit kubelet's limits) it
// compares 64-bit hashes kept on the stack before strings, so it neither
// allocates nor compares every pair of strings byte by byte.
func omitDuplicates(s []string) []string {
	if len(s) < 2 {
		return s
	}
	out := s[:0]
	if len(s) <= 8 {
	small:
		for _, v := range s {
			for _, have := range out {
				if have == v {
					continue small
				}
			}
			out = append(out, v)
		}
		return out
	}
	if len(s) <= 64 {
		var hs [64]uint64
	outer:
		for _, v := range s {
			h := fnv1a(v)
			for j, have := range out {
				if hs[j] == h && have == v {
					continue outer
				}
			}
			hs[len(out)] = h
			out = append(out, v)
		}
		return out
	}
	seen := make(map[string]struct{}, len(s))
	for _, v := range s {
		if _, dup := seen[v]; dup {
			continue
		}
		seen[v] = struct{}{}
		out = append(out, v)
	}
	return out
}

func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mergeOptions is kubelet's mergeDNSOptions with a stable order. Every
// option is re-rendered from its name and value, so "name:" becomes "name".
func mergeOptions(base []string, pod []Option) []string {
	out := make([]string, 0, len(base)+len(pod))
	set := func(name, value string) {
		opt := name
		if value != "" {
			opt = name + ":" + value
		}
		for i, have := range out {
			if optionName(have) == name {
				out[i] = opt
				return
			}
		}
		out = append(out, opt)
	}
	for _, b := range base {
		name, value, _ := strings.Cut(b, ":")
		set(name, value)
	}
	for _, o := range pod {
		v := ""
		if o.Value != nil {
			v = *o.Value
		}
		set(o.Name, v)
	}
	return out
}

func optionName(opt string) string {
	name, _, _ := strings.Cut(opt, ":")
	return name
}

// fitNameservers keeps the first MaxNameservers entries.
func fitNameservers(ns []string, w *[]Warning) []string {
	if len(ns) <= MaxNameservers {
		return ns
	}
	kept := ns[:MaxNameservers:MaxNameservers]
	*w = append(*w, Warning{Reason: ReasonDNSConfigForming, Limit: LimitNameservers, Before: len(ns),
		Omitted: append([]string(nil), ns[MaxNameservers:]...),
		Message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(kept, " ")})
	return kept
}

// fitSearches applies kubelet's three search steps in order: keep the first
// 32 entries, drop entries over 253 characters, then remove whole entries
// from the end until the space-joined line is at most 2048 characters.
func fitSearches(s []string, w *[]Warning) []string {
	before := len(s)
	var omitted []string
	if len(s) > MaxSearchPaths {
		omitted = append(omitted, s[MaxSearchPaths:]...)
		s = s[:MaxSearchPaths]
	}
	long := false
	for _, v := range s {
		if len(v) > MaxSearchLength {
			long = true
			break
		}
	}
	if long {
		kept := make([]string, 0, len(s))
		for _, v := range s {
			if len(v) > MaxSearchLength {
				omitted = append(omitted, v)
				continue
			}
			kept = append(kept, v)
		}
		s = kept
	}
	if n := joinedLen(s); n > MaxSearchListChars {
		i := len(s)
		for i > 0 && n > MaxSearchListChars {
			i--
			n -= len(s[i])
			if i > 0 {
				n-- // the space before it
			}
		}
		omitted = append(omitted, s[i:]...)
		s = s[:i]
	}
	if len(omitted) == 0 {
		return s
	}
	*w = append(*w, Warning{Reason: ReasonDNSConfigForming, Limit: LimitSearches, Before: before, Omitted: omitted,
		Message: "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(s, " ")})
	return s
}

func joinedLen(s []string) int {
	if len(s) == 0 {
		return 0
	}
	n := len(s) - 1
	for _, v := range s {
		n += len(v)
	}
	return n
}

// ParseIPSloppy parses an IP as kubelet's config does (netutils.ParseIPSloppy):
// IPv4 parts may carry leading zeros and are read as decimal. It returns nil
// for anything that is not an IP.
func ParseIPSloppy(s string) net.IP {
	if strings.IndexByte(s, ':') >= 0 {
		return net.ParseIP(s)
	}
	var ip [4]byte
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return nil
	}
	for i, p := range parts {
		if p == "" || len(p) > 3 {
			return nil
		}
		for j := 0; j < len(p); j++ {
			if p[j] < '0' || p[j] > '9' {
				return nil
			}
		}
		v, err := strconv.Atoi(p)
		if err != nil || v > 255 {
			return nil
		}
		ip[i] = byte(v)
	}
	return net.IPv4(ip[0], ip[1], ip[2], ip[3])
}
