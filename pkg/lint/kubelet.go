package lint

import (
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// WithKubelet adds to check the warnings kubelet gives the pod on the node
// of eng and host: what render prints, each a finding of rule warning.
// The engine's own warnings (node settings it skipped) come first. With
// trims, kubelet's trimming is left out: check reports it (NodeCheck).
func WithKubelet(check Check, eng *policy.Engine, host policy.Host, trims bool) Check {
	return func(in policy.Input) []Finding {
		out := check(in)
		res, _ := eng.Compute(in, host) // an error is check's (NodeCheck) or the node's
		for _, w := range append(append([]policy.Warning(nil), eng.Warnings()...), res.Warnings...) {
			if trims && w.Limit != "" {
				continue
			}
			f := Finding{Rule: RuleWarning, Message: w.Reason + ": " + w.Message}
			f.Field, f.alt = kubeletField(in, w)
			out = append(out, f)
		}
		return out
	}
}

// kubeletField is the field a kubelet warning is about, and where its
// line is when that field is defaulted rather than written: the
// ClusterFirst of a hostNetwork pod is often no line of its own.
func kubeletField(in policy.Input, w policy.Warning) (field, alt string) {
	switch w.Reason {
	case policy.ReasonClusterFirstOnHostNetwork:
		return "spec.dnsPolicy", "spec.hostNetwork"
	case policy.ReasonDNSConfigForming:
		return limitFields[w.Limit], ""
	case policy.ReasonHostnameTruncated:
		if in.Hostname != "" {
			return "spec.hostname", ""
		}
		return "metadata.name", ""
	case policy.ReasonAutopathIgnored:
		if in.PolicyAnnotation != "" {
			return "metadata.annotations[" + policy.AnnotationDNSPolicy + "]", ""
		}
		return "", ""
	}
	return reasonFields[w.Reason], ""
}

// reasonFields are the fields of the warnings that always name one, by
// reason, and limitFields those of kubelet's limits (DNSConfigForming);
// any other is about the node's settings or resolver file ("").
var (
	reasonFields = map[string]string{
		policy.ReasonInvalidDNSPolicy:        "spec.dnsPolicy",
		policy.ReasonWindowsOptionsIgnored:   "spec.dnsConfig.options",
		policy.ReasonHostnameOverrideIgnored: "spec.hostnameOverride",
	}
	limitFields = map[string]string{
		policy.LimitNameservers: "spec.dnsConfig.nameservers",
		policy.LimitSearches:    "spec.dnsConfig.searches",
	}
)
