package policy

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/fqdn"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// Engine computes pod DNS for one node. It is immutable after New and safe
// for concurrent use; the per-pod work in Compute allocates only the result.
type Engine struct {
	node         Node
	clusterDNS   []string // canonical, usable entries
	nodeLocalDNS []string
	hostOffline  []string // nameservers for host-type pods with resolvConf ""
	shape        searchShape
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
		ip := parseIPSloppy(s)
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
	e.shape = newSearchShape(node.ClusterDomain)
	return e, nil
}

func (e *Engine) parseIPs(in []string, what string) []string {
	var out []string
	for _, s := range in {
		ip := parseIPSloppy(s)
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

// HasClusterDNS reports a usable cluster DNS address: without one,
// ClusterFirst pods fall back to the node's resolver config, as in kubelet.
func (e *Engine) HasClusterDNS() bool { return len(e.clusterDNS) > 0 }

// ErrHostConfig wraps Host.Err in Compute's error.
var ErrHostConfig = errors.New("node resolver config unusable")

// Compute returns the pod's resolver config and names. The error is what
// would make kubelet fail the pod's sandbox: an unusable node resolver
// config (ErrHostConfig), an invalid hostname or subdomain, or a
// setHostnameAsFQDN FQDN over 64 characters (*fqdn.TooLongError).
func (e *Engine) Compute(in Input, host Host) (Result, error) {
	// kubelet reads the node file before it looks at the policy (S1).
	if host.Err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrHostConfig, host.Err)
	}
	r := e.resolver(in, host)
	if in.HostNetwork {
		return r, nil
	}
	return r, e.names(in, &r)
}

// resolver is the resolver half of Compute (nameservers, searches,
// options, type and their warnings) for a usable host config.
func (e *Engine) resolver(in Input, host Host) Result {
	var r Result
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
		r.Searches = e.shape.cluster(sr, in.Namespace, host.Searches)
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
		r.Searches = append(sr, e.shape.autopath(in.Namespace))
		r.Options = append(op, ndots5)
	}
	if r.Type == TypeHost {
		e.hostBase(&r, host)
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
	return r
}

// hostBase is the base of a host-type pod: kubelet's loopback servers and
// "." when the resolver config is switched off, else the node's config with
// the loopback rule applied (resolvconf.WithoutLoopback).
func (e *Engine) hostBase(r *Result, host Host) {
	if host.Disabled {
		r.Nameservers = append([]string(nil), e.hostOffline...)
		r.Searches = []string{"."}
		return
	}
	cfg, dropped := resolvconf.WithoutLoopback(resolvconf.Config{Nameservers: host.Nameservers})
	if dropped != nil {
		r.Warnings = append(r.Warnings, Warning{Reason: ReasonLoopbackNameserver,
			Message: fmt.Sprintf("loopback nameservers %q of the node's resolver config are not handed to the pod: a stub on the node's loopback cannot answer inside the pod's network namespace (on a systemd-resolved node, point kubelet's resolvConf at /run/systemd/resolve/resolv.conf)", dropped)})
	}
	r.Nameservers = append([]string(nil), cfg.Nameservers...)
	r.Searches = append([]string(nil), host.Searches...)
	r.Options = append([]string(nil), host.Options...)
}

// names sets the pod's hostname and FQDN (non-hostNetwork pods only).
func (e *Engine) names(in Input, r *Result) error {
	names, err := fqdn.ForPod(fqdn.Pod{Name: in.Name, Namespace: in.Namespace, Hostname: in.Hostname,
		Subdomain: in.Subdomain, HostnameOverride: in.HostnameOverride}, e.node.ClusterDomain)
	if err != nil {
		return err
	}
	if names.Truncated {
		r.Warnings = append(r.Warnings, Warning{Reason: ReasonHostnameTruncated,
			Message: fmt.Sprintf("Hostname for pod was too long, truncated it: %q is %d characters, the hostname is %q", names.Original, len(names.Original), names.Hostname)})
	}
	r.Hostname, err = fqdn.KernelHostname(names, in.SetHostnameAsFQDN)
	if err != nil {
		return err
	}
	r.FQDN = names.FQDN()
	return nil
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
		case e.shape.domain == "":
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

// mergeOptions is kubelet's mergeDNSOptions with a stable order: a base
// option is keyed by its name before the first ':' (resolvconf.OptionName),
// a pod option by its Name verbatim, so {name: "ndots:3"} is a new option
// beside ndots:5 rather than an override. A later entry with a key already
// present replaces it in place, a new key is appended. Every option is
// re-rendered from its key and value (resolvconf.FormatOption), so "name:"
// becomes "name". kubelet's own order is random (a map).
func mergeOptions(base []string, pod []Option) []string {
	var small [8]string // keys of a usual merge, without a heap allocation
	keys := small[:0]
	out := make([]string, 0, len(base)+len(pod))
	for i := 0; i < len(base)+len(pod); i++ {
		var key, opt string
		if i < len(base) {
			key, opt = resolvconf.OptionName(base[i]), resolvconf.NormalizeOption(base[i])
		} else {
			o := pod[i-len(base)]
			v := ""
			if o.Value != nil {
				v = *o.Value
			}
			key, opt = o.Name, resolvconf.FormatOption(o.Name, v)
		}
		if k := slices.Index(keys, key); k >= 0 {
			out[k] = opt
			continue
		}
		keys = append(keys, key)
		out = append(out, opt)
	}
	return out
}

// fitNameservers keeps the first MaxNameservers entries (w may be nil: no
// warning).
func fitNameservers(ns []string, w *[]Warning) []string {
	if len(ns) <= MaxNameservers {
		return ns
	}
	kept := ns[:MaxNameservers:MaxNameservers]
	if w == nil {
		return kept
	}
	*w = append(*w, Warning{Reason: ReasonDNSConfigForming, Limit: LimitNameservers, Before: len(ns),
		Omitted: append([]string(nil), ns[MaxNameservers:]...),
		Message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(kept, " ")})
	return kept
}

// fitSearches (w may be nil: no warning) applies kubelet's three search steps in order: keep the first
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
	if len(omitted) == 0 || w == nil {
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

// parseIPSloppy parses an IP as kubelet's config does (netutils.ParseIPSloppy):
// IPv4 parts may carry leading zeros and are read as decimal. It returns nil
// for anything that is not an IP.
func parseIPSloppy(s string) net.IP {
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
