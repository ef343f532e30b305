package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Decision is one step of how the engine built a result.
type Decision struct {
	// Step is the part of the result decided: "node", "policy",
	// "nameservers", "searches", "options", "hostname" or "fqdn".
	Step string `json:"step"`
	// Rule is the rule applied, a stable identifier (the package doc lists
	// them all).
	Rule string `json:"rule"`
	// Detail says what the rule meant for this pod, for a reader.
	Detail string `json:"detail"`
	// Added and Removed are the entries the step added and removed, in
	// order; nil when none.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
}

// MarshalJSON writes d with its lists as [], never null: the --explain
// trace of render, validate and explain.
func (d Decision) MarshalJSON() ([]byte, error) {
	type plain Decision
	if d.Added == nil {
		d.Added = []string{}
	}
	if d.Removed == nil {
		d.Removed = []string{}
	}
	return json.Marshal(plain(d))
}

// Trace is the decisions behind one result, in the order they were taken.
// Its rules, in about the order they occur:
//
//	node.ip.invalid                 a clusterDNS, nodeLocalDNS or node IP entry that is no IP is skipped (New)
//	node.resolvconf.unusable        the node's resolver config is unreadable: kubelet fails every sandbox
//	policy.clusterfirst             dnsPolicy ClusterFirst: the cluster DNS
//	policy.clusterfirstwithhostnet  dnsPolicy ClusterFirstWithHostNet: the cluster DNS, on the host network too
//	policy.default                  dnsPolicy Default: the node's resolver config
//	policy.none                     dnsPolicy None: the pod's dnsConfig alone
//	policy.fallback.hostnetwork     ClusterFirst on a hostNetwork pod: as Default
//	policy.fallback.invalid         an unknown dnsPolicy: as ClusterFirst
//	policy.autopath                 ClusterFirstWithAutopath is selected
//	policy.autopath.ignored         AnnotationDNSPolicy does not apply (policy, no cluster domain, value of annotation or label)
//	autopath.source.annotation      the pod's AnnotationDNSPolicy annotation chose ClusterFirstWithAutopath
//	autopath.source.namespace-label the AnnotationDNSPolicy label of the pod's namespace chose it (no annotation)
//	autopath.source.cluster-default Node.DefaultPolicy chose it (no annotation, no label)
//	autopath.optout.annotation      the pod's annotation ClusterFirst: no label or cluster default applies
//	autopath.optout.namespace-label the namespace's label ClusterFirst: the cluster default does not apply
//	autopath.default.notapplicable  a label's or the cluster default's autopath is not for this pod (not ClusterFirst, hostNetwork, no cluster domain)
//	policy.fallback.noclusterdns    no cluster DNS address: as Default
//	base.cluster.nameservers        the cluster DNS addresses
//	base.cluster.searches           <ns>.svc.<domain>, svc.<domain>, <domain>, then the node's search list
//	base.cluster.searches.nodomain  no cluster domain: the node's search list alone
//	base.cluster.options            ndots:5
//	base.autopath.nameservers       the node-local DNS, else the cluster DNS
//	base.autopath.searches          search.<ns>.<domain>.ap.k8s.io alone
//	base.autopath.options           ndots:5
//	options.ndots.cluster-default   Node.Ndots replaces ndots:5 in a cluster DNS pod's base (after base.*.options)
//	base.host.disabled              resolvConf "": a loopback nameserver per node IP family, search "."
//	base.host.nameservers           the node's nameserver lines
//	base.host.loopback              the node's loopback nameservers are dropped (a pod in its own network namespace)
//	base.host.loopback.hostnetwork  a hostNetwork pod keeps the node's loopback nameservers
//	base.host.searches              the node's last search line
//	base.host.options               the node's options lines
//	merge.duplicates                an entry equal to an earlier one is omitted
//	dnsconfig.nameservers           the pod's dnsConfig.nameservers, appended
//	dnsconfig.searches              the pod's dnsConfig.searches, appended
//	dnsconfig.options               the pod's dnsConfig.options, merged by name
//	merge.options.colonname         a pod option named "name:value" replaces no base option
//	merge.options.normalize         a base option "name:" is written "name"
//	merge.options.override          an option replaces the earlier one of its name, in place
//	limit.nameservers               the first MaxNameservers nameservers are kept
//	limit.searches.count            the first MaxSearchPaths search domains are kept
//	limit.searches.length           search domains over MaxSearchLength characters are dropped
//	limit.searches.chars            search domains are dropped from the end to fit MaxSearchListChars
//	node.windows.options            a Windows node ignores options
//	hostname.hostnetwork            a hostNetwork pod keeps the node's hostname
//	hostname.invalid                an invalid hostname, subdomain or hostnameOverride: the sandbox fails
//	hostname.podname                the hostname is metadata.name
//	hostname.spec                   the hostname is spec.hostname
//	hostname.override               the hostname is spec.hostnameOverride
//	hostname.override.ignored       a kubelet before 1.35 ignores spec.hostnameOverride (Node.KubeletVersion)
//	hostname.truncate               a hostname over 63 characters is cut
//	fqdn.subdomain                  <hostname>.<subdomain>.<ns>.svc.<domain>
//	fqdn.none                       no subdomain, or hostnameOverride: no FQDN
//	hostname.fqdn                   setHostnameAsFQDN: the kernel hostname is the FQDN
//	hostname.fqdn.nodomain          setHostnameAsFQDN without an FQDN: no effect
//	hostname.fqdn.toolong           setHostnameAsFQDN with an FQDN over 64 characters: the sandbox fails
type Trace []Decision

// Comments is the trace for a reader, as resolv.conf comments so that
// the output stays a resolv.conf: each decision numbered, with its step,
// rule and detail, then the entries it added (+) and removed (-). It is
// "" without decisions.
func (t Trace) Comments() string {
	if len(t) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# explain\n")
	for i, d := range t {
		fmt.Fprintf(&b, "# %d. %s (%s): %s\n", i+1, d.Step, d.Rule, d.Detail)
		if len(d.Added) > 0 {
			fmt.Fprintf(&b, "#      + %s\n", strings.Join(d.Added, " "))
		}
		if len(d.Removed) > 0 {
			fmt.Fprintf(&b, "#      - %s\n", strings.Join(d.Removed, " "))
		}
	}
	return b.String()
}

// The parts of a result a Decision is about.
const (
	stepNode        = "node"
	stepPolicy      = "policy"
	stepNameservers = "nameservers"
	stepSearches    = "searches"
	stepOptions     = "options"
	stepHostname    = "hostname"
	stepFQDN        = "fqdn"
)

// add records a decision, copying the lists (the engine reuses and edits
// its slices in place). Callers check t != nil first, so that Compute
// builds no detail text; not inlined, so that Compute's frames stay small.
//
//go:noinline
func (t *Trace) add(step, rule, detail string, added, removed []string) {
	*t = append(*t, Decision{Step: step, Rule: rule, Detail: detail, Added: slices.Clone(added), Removed: slices.Clone(removed)})
}

// limit records a limit rule of fitNameservers or fitSearches: n entries
// before it, removed by it.
func (t *Trace) limit(rule string, n int, removed []string) {
	step, detail := stepSearches, ""
	switch rule {
	case "limit.nameservers":
		step, detail = stepNameservers, fmt.Sprintf("kubelet keeps the first %d of %d nameservers", MaxNameservers, n)
	case "limit.searches.count":
		detail = fmt.Sprintf("kubelet keeps the first %d of %d search domains", MaxSearchPaths, n)
	case "limit.searches.length":
		detail = fmt.Sprintf("a search domain over %d characters is dropped (glibc 2.28 aborts on it)", MaxSearchLength)
	case "limit.searches.chars":
		detail = fmt.Sprintf("whole search domains are dropped from the end until the search line is at most %d characters", MaxSearchListChars)
	}
	t.add(step, rule, detail, nil, removed)
}

// option records an option rule of mergeOptions: opt replaces old, both
// keyed by name.
func (t *Trace) option(rule, opt, old, name string) {
	detail := "an option with an empty value is written as its bare name"
	if rule == "merge.options.override" {
		detail = fmt.Sprintf("options merge by name: %q replaces the earlier option named %q in place", opt, name)
	}
	t.add(stepOptions, rule, detail, []string{opt}, []string{old})
}

// ComputeExplained is Compute that also returns the trace of its decisions,
// including the engine's own (node settings New skipped). On an error the
// trace ends with the decision that failed. Compute records nothing.
func (e *Engine) ComputeExplained(in Input, host Host) (Result, Trace, error) {
	t := slices.Clone(e.trace)
	r, err := e.compute(in, host, &t)
	return r, t, err
}

// dropped is what before lost to become after, a subsequence of it.
func dropped(before, after []string) []string {
	var out []string
	j := 0
	for _, v := range before {
		if j < len(after) && after[j] == v {
			j++
			continue
		}
		out = append(out, v)
	}
	return out
}

// lineNote is " (line 3)" or " (lines 1, 2)", naming the lines of the
// node's file a Detail speaks of; "" when they are not known.
func lineNote(lines ...int) string {
	var ns []string
	for _, l := range lines {
		if l > 0 {
			ns = append(ns, strconv.Itoa(l))
		}
	}
	switch len(ns) {
	case 0:
		return ""
	case 1:
		return " (line " + ns[0] + ")"
	}
	return " (lines " + strings.Join(ns, ", ") + ")"
}

// hostName names the node's resolver config in a Detail.
func hostName(host Host) string {
	if host.Source == "" {
		return "the node's resolver config"
	}
	return "the node's resolver config " + strconv.Quote(host.Source)
}
