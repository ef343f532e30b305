package policy

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
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
	release      Release // the node's kubelet (Node.KubeletVersion)
	ndots        string  // the base option of cluster DNS pods: ndots5, or Node.Ndots's
	kubelet      *Engine // this engine as kubelet: no cluster policy, no loopback rule (Recover)
	keepLoopback bool    // the loopback rule is off (kubelet's own output)
	warnings     []Warning
	trace        Trace // the node decisions of every ComputeExplained
}

// New prepares an engine for node. Unparsable clusterDNS or nodeLocalDNS
// entries are skipped and reported as warnings (kubelet logs "Invalid
// clusterDNS IP"); an unknown OS or kubelet version is an error.
func New(node Node) (*Engine, error) {
	e := &Engine{node: node}
	switch node.OS {
	case "", "linux":
	case "windows":
		e.windows = true
	default:
		return nil, fmt.Errorf("node os %q: must be \"linux\" or \"windows\"", node.OS)
	}
	rel, err := ParseRelease(node.KubeletVersion)
	if err != nil {
		return nil, fmt.Errorf("node kubelet %w", err)
	}
	e.release = rel
	e.clusterDNS = e.parseIPs(node.ClusterDNS, "clusterDNS")
	e.nodeLocalDNS = e.parseIPs(node.NodeLocalDNS, "nodeLocalDNS")
	for _, s := range node.NodeIPs {
		ip := parseIPSloppy(s)
		if ip == nil {
			e.skip(Warning{Reason: ReasonInvalidClusterDNS, Message: fmt.Sprintf("invalid node IP %q skipped", s)}, s)
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
	switch node.DefaultPolicy {
	case "", ClusterFirst, ClusterFirstWithAutopath:
	default:
		return nil, fmt.Errorf("default policy %q: must be %q or %q", node.DefaultPolicy, ClusterFirst, ClusterFirstWithAutopath)
	}
	e.ndots = ndots5
	if node.Ndots != nil {
		if err := v1alpha1.ValidateNdots(*node.Ndots); err != nil {
			return nil, fmt.Errorf("ndots: %w", err)
		}
		e.ndots = "ndots:" + strconv.Itoa(*node.Ndots)
	}
	k := *e
	k.ndots, k.node.DefaultPolicy, k.node.Ndots, k.keepLoopback = ndots5, "", nil, true
	k.kubelet = &k
	e.kubelet = &k
	return e, nil
}

func (e *Engine) parseIPs(in []string, what string) []string {
	var out []string
	for _, s := range in {
		ip := parseIPSloppy(s)
		if ip == nil {
			e.skip(Warning{Reason: ReasonInvalidClusterDNS, Message: fmt.Sprintf("Invalid %s IP %q skipped", what, s)}, s)
			continue
		}
		out = append(out, ip.String())
	}
	return out
}

// skip records a node setting New could not use.
func (e *Engine) skip(w Warning, entry string) {
	e.warnings = append(e.warnings, w)
	e.trace.add(stepNode, "node.ip.invalid", w.Message, nil, []string{entry})
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
	return e.compute(in, host, nil)
}

// compute is Compute, recording its decisions in t unless t is nil.
func (e *Engine) compute(in Input, host Host, t *Trace) (Result, error) {
	// kubelet reads the node file before it looks at the policy.
	if host.Err != nil {
		err := fmt.Errorf("%w: %w", ErrHostConfig, host.Err)
		if t != nil {
			t.add(stepNode, "node.resolvconf.unusable", "kubelet fails the sandbox of every pod, whatever its policy: "+err.Error(), nil, nil)
		}
		return Result{}, err
	}
	r := e.resolver(in, host, t)
	if in.HostNetwork {
		if t != nil {
			t.add(stepHostname, "hostname.hostnetwork", "a hostNetwork pod keeps the node's hostname and has no FQDN", nil, nil)
		}
		return r, nil
	}
	return r, e.names(in, &r, t)
}

// resolver is the resolver half of Compute (nameservers, searches,
// options, type and their warnings) for a usable host config.
func (e *Engine) resolver(in Input, host Host, t *Trace) Result {
	var r Result
	r.Type = e.baseType(in, &r.Warnings, t)
	switch r.Type {
	case TypeCluster:
		if len(e.clusterDNS) == 0 {
			e.noClusterDNS(&r, t)
			break
		}
		ns, sr, op := carve(len(e.clusterDNS)+podLen(in, 0), 3+len(host.Searches)+podLen(in, 1), 1+optLen(in))
		r.Nameservers = append(ns, e.clusterDNS...)
		r.Searches = e.shape.cluster(sr, in.Namespace, host.Searches)
		r.Options = append(op, e.ndots)
		if t != nil {
			e.traceCluster(t, in, host, r.Searches)
		}
	case TypeAutopath:
		servers := e.nodeLocalDNS
		if len(servers) == 0 {
			servers = e.clusterDNS
		}
		if len(servers) == 0 {
			e.noClusterDNS(&r, t)
			break
		}
		ns, sr, op := carve(len(servers)+podLen(in, 0), 1+podLen(in, 1), 1+optLen(in))
		r.Nameservers = append(ns, servers...)
		r.Searches = append(sr, e.shape.autopath(in.Namespace))
		r.Options = append(op, e.ndots)
		if t != nil {
			e.traceAutopath(t, r)
		}
	}
	if r.Type == TypeHost {
		e.hostBase(&r, host, in.HostNetwork, t)
	}
	if in.DNSConfig != nil {
		r.Nameservers = appendPod(r.Nameservers, in.DNSConfig.Nameservers, t, stepNameservers, "dnsconfig.nameservers")
		r.Searches = appendPod(r.Searches, in.DNSConfig.Searches, t, stepSearches, "dnsconfig.searches")
		r.Options = mergeOptions(r.Options, in.DNSConfig.Options, t)
	}
	r.Nameservers = fitNameservers(r.Nameservers, &r.Warnings, t)
	r.Searches = fitSearches(r.Searches, &r.Warnings, t)
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
		w := Warning{Reason: ReasonWindowsOptionsIgnored,
			Message: fmt.Sprintf("Windows nodes apply only nameservers and search suffixes; options %q have no effect", strings.Join(r.Options, " "))}
		r.Warnings = append(r.Warnings, w)
		if t != nil {
			t.add(stepOptions, "node.windows.options", w.Message, nil, nil)
		}
	}
	return r
}

// noClusterDNS turns a cluster-type result into a host-type one, as kubelet
// does without a cluster DNS address.
func (e *Engine) noClusterDNS(r *Result, t *Trace) {
	w := missingClusterDNS()
	r.Warnings = append(r.Warnings, w)
	r.Type = TypeHost
	if t != nil {
		t.add(stepPolicy, "policy.fallback.noclusterdns", w.Message, nil, nil)
	}
}

// traceCluster records the base of a cluster-type pod (searches: the
// result's search list so far).
func (e *Engine) traceCluster(t *Trace, in Input, host Host, searches []string) {
	t.add(stepNameservers, "base.cluster.nameservers", "the cluster DNS (kubelet's clusterDNS)", e.clusterDNS, nil)
	if e.shape.domain == "" {
		t.add(stepSearches, "base.cluster.searches.nodomain", "no cluster domain: only the search list of "+hostName(host)+lineNote(host.Lines.Search), host.Searches, nil)
	} else {
		all := append(e.shape.clusterDomains(nil, in.Namespace), host.Searches...)
		t.add(stepSearches, "base.cluster.searches", fmt.Sprintf("the namespace, service and cluster domains of namespace %q, then the search list of %s%s", in.Namespace, hostName(host), lineNote(host.Lines.Search)), all, nil)
		traceDuplicates(t, stepSearches, all, searches)
	}
	t.add(stepOptions, "base.cluster.options", "kubelet's option for cluster DNS: a name with fewer than 5 dots is tried with the search list first", []string{ndots5}, nil)
	e.traceNdots(t)
}

// traceNdots records the cluster default replacing ndots:5.
func (e *Engine) traceNdots(t *Trace) {
	if e.ndots != ndots5 {
		t.add(stepOptions, "options.ndots.cluster-default", "the cluster's ndots default replaces kubelet's ndots:5 (a pod's own dnsConfig.options ndots still wins)", []string{e.ndots}, []string{ndots5})
	}
}

// traceAutopath records the base of an autopath pod.
func (e *Engine) traceAutopath(t *Trace, r Result) {
	if len(e.nodeLocalDNS) > 0 {
		t.add(stepNameservers, "base.autopath.nameservers", "the node-local DNS, which expands the autopath search domain", r.Nameservers, nil)
	} else {
		t.add(stepNameservers, "base.autopath.nameservers", "the cluster DNS (kubelet's clusterDNS; no node-local DNS is set), which expands the autopath search domain", r.Nameservers, nil)
	}
	t.add(stepSearches, "base.autopath.searches", "the autopath search domain alone, in place of the ClusterFirst search list: the DNS server walks that list for the pod", r.Searches, nil)
	t.add(stepOptions, "base.autopath.options", "the ClusterFirst option: a name with fewer than 5 dots is tried with the search domain first", []string{ndots5}, nil)
	e.traceNdots(t)
}

// appendPod appends a pod's dnsConfig entries to the base, duplicates
// omitted (kubelet's appendDNSConfig); step and rule name them in t.
func appendPod(base, pod []string, t *Trace, step, rule string) []string {
	all := append(base, pod...)
	if t == nil {
		return omitDuplicates(all)
	}
	before := slices.Clone(all)
	if len(pod) > 0 {
		t.add(step, rule, "the pod's dnsConfig."+step+", appended to the base", pod, nil)
	}
	out := omitDuplicates(all)
	traceDuplicates(t, step, before, out)
	return out
}

// traceDuplicates records the entries omitDuplicates removed from before.
func traceDuplicates(t *Trace, step string, before, after []string) {
	if d := dropped(before, after); len(d) > 0 {
		t.add(step, "merge.duplicates", "an entry equal to an earlier one is omitted (exact, case-sensitive)", nil, d)
	}
}

// hostBase is the base of a host-type pod: kubelet's loopback servers and
// "." when the resolver config is switched off, else the node's config.
// The loopback rule (resolvconf.WithoutLoopback) applies to a pod in its
// own network namespace only: a hostNetwork pod shares the node's, where a
// loopback stub answers it, and keeps the servers as kubelet hands them.
func (e *Engine) hostBase(r *Result, host Host, hostNetwork bool, t *Trace) {
	if host.Disabled {
		r.Nameservers = append([]string(nil), e.hostOffline...)
		r.Searches = []string{"."}
		if t != nil {
			t.add(stepNameservers, "base.host.disabled", "kubelet's resolvConf is \"\": a loopback nameserver per node IP family", r.Nameservers, nil)
			t.add(stepSearches, "base.host.disabled", "kubelet's resolvConf is \"\": the search list \".\"", r.Searches, nil)
		}
		return
	}
	cfg, loopback := resolvconf.WithoutLoopback(resolvconf.Config{Nameservers: host.Nameservers})
	if t != nil {
		t.add(stepNameservers, "base.host.nameservers", "the nameserver lines of "+hostName(host)+lineNote(host.Lines.Nameservers...), host.Nameservers, nil)
	}
	switch {
	case loopback == nil:
	case hostNetwork || e.keepLoopback:
		cfg.Nameservers = host.Nameservers
		if t != nil {
			t.add(stepNameservers, "base.host.loopback.hostnetwork", fmt.Sprintf("loopback nameservers %q are kept: a hostNetwork pod shares the node's network namespace, where they answer", loopback), nil, nil)
		}
	default:
		w := Warning{Reason: ReasonLoopbackNameserver,
			Message: fmt.Sprintf("loopback nameservers %q of the node's resolver config are not handed to the pod: a stub on the node's loopback cannot answer inside the pod's network namespace (on a systemd-resolved node, point kubelet's resolvConf at /run/systemd/resolve/resolv.conf)", loopback)}
		r.Warnings = append(r.Warnings, w)
		if t != nil {
			t.add(stepNameservers, "base.host.loopback", w.Message, nil, loopback)
		}
	}
	r.Nameservers = append([]string(nil), cfg.Nameservers...)
	r.Searches = append([]string(nil), host.Searches...)
	r.Options = append([]string(nil), host.Options...)
	if t != nil {
		t.add(stepSearches, "base.host.searches", "the last search line of "+hostName(host)+lineNote(host.Lines.Search), host.Searches, nil)
		t.add(stepOptions, "base.host.options", "the options lines of "+hostName(host)+lineNote(host.Lines.Options...), host.Options, nil)
	}
}

// names sets the pod's hostname and FQDN (non-hostNetwork pods only).
func (e *Engine) names(in Input, r *Result, t *Trace) error {
	override := in.HostnameOverride
	if override != nil && !e.release.hostnameOverride() {
		w := Warning{Reason: ReasonHostnameOverrideIgnored,
			Message: fmt.Sprintf("kubelet %s ignores spec.hostnameOverride %q (feature gate HostnameOverride is off before 1.35): the hostname comes from spec.hostname or the pod name, the domain from spec.subdomain", e.release, *override)}
		r.Warnings = append(r.Warnings, w)
		if t != nil {
			t.add(stepHostname, "hostname.override.ignored", w.Message, nil, []string{*override})
		}
		override = nil
	}
	names, err := fqdn.ForPod(fqdn.Pod{Name: in.Name, Namespace: in.Namespace, Hostname: in.Hostname,
		Subdomain: in.Subdomain, HostnameOverride: override}, e.node.ClusterDomain)
	if t != nil {
		traceNames(t, in, names, err)
	}
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

// hostnameRules are the trace rules of fqdn.Names.From.
var hostnameRules = map[string]string{
	"metadata.name":         "hostname.podname",
	"spec.hostname":         "hostname.spec",
	"spec.hostnameOverride": "hostname.override",
}

// traceNames records how names (or err) came from the pod: the hostname's
// source and truncation, the FQDN, and what setHostnameAsFQDN made of them.
func traceNames(t *Trace, in Input, names fqdn.Names, err error) {
	if err != nil {
		t.add(stepHostname, "hostname.invalid", "kubelet fails the sandbox: "+err.Error(), nil, nil)
		return
	}
	t.add(stepHostname, hostnameRules[names.From], "the hostname is the pod's "+names.From, []string{names.Original}, nil)
	if names.Truncated {
		t.add(stepHostname, "hostname.truncate", fmt.Sprintf("a hostname is at most %d characters: cut, then trailing '-' and '.' trimmed", fqdn.MaxLabelLength), []string{names.Hostname}, []string{names.Original})
	}
	f := names.FQDN()
	switch {
	case f != "":
		t.add(stepFQDN, "fqdn.subdomain", "spec.subdomain: the FQDN is hostname.subdomain.namespace.svc.cluster-domain", []string{f}, nil)
	case names.From == "spec.hostnameOverride":
		t.add(stepFQDN, "fqdn.none", "spec.hostnameOverride: no FQDN", nil, nil)
	default:
		t.add(stepFQDN, "fqdn.none", "no spec.subdomain: no FQDN", nil, nil)
	}
	if !in.SetHostnameAsFQDN {
		return
	}
	switch h, err := fqdn.KernelHostname(names, true); {
	case err != nil:
		t.add(stepHostname, "hostname.fqdn.toolong", fmt.Sprintf("setHostnameAsFQDN: the FQDN is %d characters and the kernel hostname holds at most %d, so kubelet fails the sandbox (it never truncates the FQDN)", len(f), fqdn.MaxKernelHostname), nil, []string{names.Hostname})
	case h == names.Hostname:
		t.add(stepHostname, "hostname.fqdn.nodomain", "setHostnameAsFQDN without an FQDN: the hostname stays short", nil, nil)
	default:
		t.add(stepHostname, "hostname.fqdn", fmt.Sprintf("setHostnameAsFQDN: the kernel hostname is the FQDN (%d characters, at most %d)", len(h), fqdn.MaxKernelHostname), []string{h}, []string{names.Hostname})
	}
}

// baseType maps the policy to a base type as getPodDNSType does, adding the
// autopath policy, and records what kubelet tolerates silently.
func (e *Engine) baseType(in Input, w *[]Warning, tr *Trace) Type {
	var t Type
	before := len(*w)
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
	choice, source := e.chosen(in, w)
	skipped := ""
	switch {
	case choice != ClusterFirstWithAutopath:
	case source == sourceAnnotation && t != TypeCluster:
		*w = append(*w, Warning{Reason: ReasonAutopathIgnored, Message: autopathUnusable(in)})
	case source == sourceAnnotation && e.shape.domain == "":
		*w = append(*w, Warning{Reason: ReasonAutopathIgnored,
			Message: "annotation " + AnnotationDNSPolicy + ": ClusterFirstWithAutopath needs a cluster domain; using ClusterFirst"})
	case source == sourceAnnotation:
		t = TypeAutopath
	default:
		if skipped = e.defaultUnusable(in, t); skipped == "" {
			t = TypeAutopath
		}
	}
	if tr != nil {
		tracePolicy(tr, in, t, (*w)[before:])
		traceChoice(tr, in, t, choice, source, skipped)
	}
	return t
}

// Where a pod's autopath choice came from (chosen), as the trace names
// them: autopath.source.<source>.
const (
	sourceAnnotation = "annotation"
	sourceLabel      = "namespace-label"
	sourceDefault    = "cluster-default"
)

// chosen is the pod's policy choice, ClusterFirstWithAutopath or
// ClusterFirst, and its source: the pod's annotation, else its namespace's
// label, else the cluster default (Node.DefaultPolicy). An unsupported
// annotation or label value is ignored with a warning, as if absent.
func (e *Engine) chosen(in Input, w *[]Warning) (Policy, string) {
	switch Policy(in.PolicyAnnotation) {
	case ClusterFirst, ClusterFirstWithAutopath:
		return Policy(in.PolicyAnnotation), sourceAnnotation
	case "":
	default:
		*w = append(*w, Warning{Reason: ReasonAutopathIgnored,
			Message: fmt.Sprintf("annotation %s: unsupported value %q ignored: the supported values are %q and %q", AnnotationDNSPolicy, in.PolicyAnnotation, ClusterFirstWithAutopath, ClusterFirst)})
	}
	switch Policy(in.NamespacePolicy) {
	case ClusterFirst, ClusterFirstWithAutopath:
		return Policy(in.NamespacePolicy), sourceLabel
	case "":
	default:
		*w = append(*w, Warning{Reason: ReasonAutopathIgnored,
			Message: fmt.Sprintf("label %s of namespace %q: unsupported value %q ignored: the supported values are %q and %q", AnnotationDNSPolicy, in.Namespace, in.NamespacePolicy, ClusterFirstWithAutopath, ClusterFirst)})
	}
	if e.node.DefaultPolicy != "" {
		return e.node.DefaultPolicy, sourceDefault
	}
	return "", ""
}

// defaultUnusable says why a namespace label's or the cluster default's
// ClusterFirstWithAutopath does not apply to a pod of type t, or returns ""
// when it does. Only pods whose effective policy is ClusterFirst are
// upgraded: dnsPolicy ClusterFirst, or ClusterFirstWithHostNet (which is
// ClusterFirst off the host network), on the pod network. A hostNetwork
// pod shares the node's IP, so the DNS server cannot tell its namespace;
// Default and None pods chose not to use the cluster DNS. The pod's own
// annotation can still select autopath for ClusterFirstWithHostNet.
func (e *Engine) defaultUnusable(in Input, t Type) string {
	switch {
	case in.HostNetwork:
		return fmt.Sprintf("a hostNetwork pod (dnsPolicy %q) is not upgraded to ClusterFirstWithAutopath; only the pod's annotation can select it", in.Policy)
	case t != TypeCluster || (in.Policy != ClusterFirst && in.Policy != ClusterFirstWithHostNet):
		return fmt.Sprintf("dnsPolicy %q is not upgraded to ClusterFirstWithAutopath: only ClusterFirst pods are", in.Policy)
	case e.shape.domain == "":
		return "ClusterFirstWithAutopath needs a cluster domain: the pod stays ClusterFirst"
	}
	return ""
}

// traceChoice records where the pod's autopath choice came from, an
// opt-out, or why a label's or the cluster default's choice did not apply.
func traceChoice(tr *Trace, in Input, t Type, choice Policy, source, skipped string) {
	var from string
	switch source {
	case "":
		return
	case sourceAnnotation:
		from = fmt.Sprintf("the pod's annotation %s=%s", AnnotationDNSPolicy, choice)
	case sourceLabel:
		from = fmt.Sprintf("the label %s=%s of namespace %q (the pod has no annotation)", AnnotationDNSPolicy, choice, in.Namespace)
	case sourceDefault:
		from = fmt.Sprintf("the cluster default policy %s (neither the pod's annotation nor its namespace's label choose)", choice)
	}
	switch {
	case t == TypeAutopath:
		tr.add(stepPolicy, "autopath.source."+source, "ClusterFirstWithAutopath is chosen by "+from, nil, nil)
	case skipped != "":
		tr.add(stepPolicy, "autopath.default.notapplicable", "ClusterFirstWithAutopath chosen by "+from+" does not apply: "+skipped, nil, nil)
	case choice == ClusterFirst && source != sourceDefault:
		tr.add(stepPolicy, "autopath.optout."+source, "ClusterFirst is chosen by "+from+": no namespace label or cluster default applies", nil, nil)
	}
}

// tracePolicy records the policy decision of baseType: the policy, then the
// autopath annotation; t is the type chosen, warns the warnings added.
func tracePolicy(tr *Trace, in Input, t Type, warns []Warning) {
	var rule, detail string
	switch in.Policy {
	case None:
		rule, detail = "policy.none", `dnsPolicy "None": no base config, only the pod's dnsConfig`
	case Default:
		rule, detail = "policy.default", `dnsPolicy "Default": the node's resolver config`
	case ClusterFirstWithHostNet:
		rule, detail = "policy.clusterfirstwithhostnet", `dnsPolicy "ClusterFirstWithHostNet": the cluster DNS, on the host network too`
	case ClusterFirst:
		rule, detail = "policy.clusterfirst", `dnsPolicy "ClusterFirst": the cluster DNS`
	}
	for _, w := range warns {
		switch w.Reason {
		case ReasonClusterFirstOnHostNetwork:
			rule, detail = "policy.fallback.hostnetwork", w.Message
		case ReasonInvalidDNSPolicy:
			rule, detail = "policy.fallback.invalid", w.Message
		}
	}
	tr.add(stepPolicy, rule, detail, nil, nil)
	if t == TypeAutopath {
		tr.add(stepPolicy, "policy.autopath", "ClusterFirstWithAutopath: the cluster DNS with one autopath search domain", nil, nil)
	}
	for _, w := range warns {
		if w.Reason == ReasonAutopathIgnored {
			tr.add(stepPolicy, "policy.autopath.ignored", w.Message, nil, nil)
		}
	}
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
func mergeOptions(base []string, pod []Option, t *Trace) []string {
	var small [8]string // keys of a usual merge, without a heap allocation
	keys := small[:0]
	out := make([]string, 0, len(base)+len(pod))
	if t != nil && len(pod) > 0 {
		traceOptions(t, base, pod)
	}
	for i := 0; i < len(base)+len(pod); i++ {
		var key, opt string
		if i < len(base) {
			key, opt = resolvconf.OptionName(base[i]), resolvconf.NormalizeOption(base[i])
			if t != nil && opt != base[i] {
				t.option("merge.options.normalize", opt, base[i], key)
			}
		} else {
			o := pod[i-len(base)]
			key, opt = o.Name, o.format()
		}
		if k := slices.Index(keys, key); k >= 0 {
			if t != nil {
				t.option("merge.options.override", opt, out[k], key)
			}
			out[k] = opt
			continue
		}
		keys = append(keys, key)
		out = append(out, opt)
	}
	return out
}

// traceOptions records the pod's dnsConfig.options, and a pod option whose
// name carries a value: kubelet keys it by the whole name, so it overrides
// nothing.
func traceOptions(t *Trace, base []string, pod []Option) {
	added := make([]string, len(pod))
	for i, o := range pod {
		added[i] = o.format()
	}
	t.add(stepOptions, "dnsconfig.options", "the pod's dnsConfig.options, merged over the base by name", added, nil)
	for _, o := range pod {
		name := resolvconf.OptionName(o.Name)
		if name == o.Name {
			continue
		}
		for _, b := range base {
			if resolvconf.OptionName(b) == name {
				t.add(stepOptions, "merge.options.colonname", fmt.Sprintf("dnsConfig option name %q holds a ':': options merge by the whole name, so it does not replace %q and both are kept", o.Name, b), nil, nil)
				break
			}
		}
	}
}

// fitNameservers keeps the first MaxNameservers entries (w may be nil: no
// warning; t may be nil: no trace).
func fitNameservers(ns []string, w *[]Warning, t *Trace) []string {
	if len(ns) <= MaxNameservers {
		return ns
	}
	kept := ns[:MaxNameservers:MaxNameservers]
	if t != nil {
		t.limit("limit.nameservers", len(ns), ns[MaxNameservers:])
	}
	if w == nil {
		return kept
	}
	*w = append(*w, Warning{Reason: ReasonDNSConfigForming, Limit: LimitNameservers, Before: len(ns),
		Omitted: append([]string(nil), ns[MaxNameservers:]...),
		Message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(kept, " ")})
	return kept
}

// fitSearches (w may be nil: no warning; t may be nil: no trace) applies
// kubelet's three search steps in order: keep the first 32 entries, drop
// entries over 253 characters, then remove whole entries from the end until
// the space-joined line is at most 2048 characters.
func fitSearches(s []string, w *[]Warning, t *Trace) []string {
	before := len(s)
	var omitted []string
	if len(s) > MaxSearchPaths {
		if t != nil {
			t.limit("limit.searches.count", len(s), s[MaxSearchPaths:])
		}
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
		n := len(omitted)
		for _, v := range s {
			if len(v) > MaxSearchLength {
				omitted = append(omitted, v)
				continue
			}
			kept = append(kept, v)
		}
		if t != nil {
			t.limit("limit.searches.length", len(s), omitted[n:])
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
		if t != nil {
			t.limit("limit.searches.chars", len(s), s[i:])
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
