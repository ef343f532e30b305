package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/fqdn"
)

// FieldError is one violation, with the field path in the API server's form.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// Validation is the outcome of validating a pod.
type Validation struct {
	Errors   []FieldError
	Warnings []string
	// Trims are the node-level predictions of what kubelet would silently
	// trim (ValidateNode only). validate --strict counts them as errors; the
	// webhook returns them as warnings unless configured to deny.
	Trims []FieldError
}

// Allowed reports that there are no errors.
func (v Validation) Allowed() bool { return len(v.Errors) == 0 }

func (v *Validation) add(field, format string, args ...any) {
	v.Errors = append(v.Errors, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *Validation) trim(field, format string, args ...any) {
	v.Trims = append(v.Trims, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

var supportedPolicies = []Policy{ClusterFirstWithHostNet, ClusterFirst, Default, None}

// ValidateAPI checks the pod's naming and DNS fields as the Kubernetes API
// server of the newest release this package mirrors (v1.37; v1.36 checks
// these fields the same way) does on create, after defaulting: dnsPolicy,
// dnsConfig, hostname, subdomain, hostnameOverride, and the pod name and
// namespace. It reports every violation, and the API server's warnings.
func ValidateAPI(in Input) Validation { return ValidateAPIFor(in, Release{}) }

// ValidateAPIFor is ValidateAPI as the API server of release apiServer
// (default feature gates) checks the pod: before 1.36 nameservers with
// leading zeros or in IPv4-mapped form only draw a warning, and before
// 1.35 spec.hostnameOverride is dropped unchecked.
func ValidateAPIFor(in Input, apiServer Release) Validation {
	var v Validation
	switch {
	case in.Name == "":
		v.add("metadata.name", "Required value: name or generateName is required")
	default:
		if msgs := fqdn.Subdomain(in.Name); len(msgs) > 0 {
			v.add("metadata.name", "Invalid value: %q: %s", in.Name, strings.Join(msgs, "; "))
		} else if msgs := fqdn.Label(in.Name); len(msgs) > 0 {
			// podStrategy.WarningsOnCreate warns whatever the hostname's
			// source.
			v.Warnings = append(v.Warnings, fmt.Sprintf("metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [%s]", strings.Join(msgs, ", ")))
		}
	}
	if in.Namespace != "" {
		if msgs := fqdn.Label(in.Namespace); len(msgs) > 0 {
			v.add("metadata.namespace", "Invalid value: %q: %s", in.Namespace, strings.Join(msgs, "; "))
		}
	}
	validatePolicy(in.Policy, &v)
	validateDNSConfig(in.Policy, in.DNSConfig, apiServer, &v)
	if in.Hostname != "" {
		if msgs := fqdn.Label(in.Hostname); len(msgs) > 0 {
			v.add("spec.hostname", "Invalid value: %q: %s", in.Hostname, strings.Join(msgs, "; "))
		}
	}
	if in.Subdomain != "" {
		if msgs := fqdn.Label(in.Subdomain); len(msgs) > 0 {
			v.add("spec.subdomain", "Invalid value: %q: %s", in.Subdomain, strings.Join(msgs, "; "))
		}
	}
	if in.HostnameOverride != nil && apiServer.hostnameOverride() {
		h := *in.HostnameOverride
		if in.SetHostnameAsFQDN {
			v.add("spec.hostnameOverride", "Forbidden: may not be specified when setHostnameAsFQDN is true")
		}
		if in.HostNetwork {
			v.add("spec.hostnameOverride", "Forbidden: may not be specified when hostNetwork is true")
		}
		if len(h) > fqdn.MaxKernelHostname {
			v.add("spec.hostnameOverride", "Too long: may not be more than 64 bytes")
		}
		if msgs := fqdn.Subdomain(h); len(msgs) > 0 {
			v.add("spec.hostnameOverride", "Invalid value: %q: %s", h, strings.Join(msgs, "; "))
		}
	}
	return v
}

func validatePolicy(p Policy, v *Validation) {
	for _, s := range supportedPolicies {
		if p == s {
			return
		}
	}
	if p == "" {
		v.add("spec.dnsPolicy", "Required value")
		return
	}
	v.add("spec.dnsPolicy", `Unsupported value: %q: supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"`, string(p))
}

// validateDNSConfig is validatePodDNSConfig, in its order and with its
// early returns.
func validateDNSConfig(p Policy, c *DNSConfig, apiServer Release, v *Validation) {
	if p == None {
		if c == nil {
			v.add("spec.dnsConfig", "Required value: must provide `dnsConfig` when `dnsPolicy` is None")
			return
		}
		if len(c.Nameservers) == 0 {
			v.add("spec.dnsConfig.nameservers", "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None")
			return
		}
	}
	if c == nil {
		return
	}
	if len(c.Nameservers) > MaxNameservers {
		v.add("spec.dnsConfig.nameservers", "Invalid value: %s: must not have more than %d nameservers", quoteList(c.Nameservers), MaxNameservers)
	}
	for i, ns := range c.Nameservers {
		field := fmt.Sprintf("spec.dnsConfig.nameservers[%d]", i)
		msg, warn := checkIP(ns, apiServer.strictIP())
		if msg != "" {
			v.add(field, "Invalid value: %q: %s", ns, msg)
		}
		if warn != "" {
			v.Warnings = append(v.Warnings, field+": "+warn)
		}
	}
	if len(c.Searches) > MaxSearchPaths {
		v.add("spec.dnsConfig.searches", "Invalid value: %s: must not have more than %d search paths", quoteList(c.Searches), MaxSearchPaths)
	}
	if n := joinedLen(c.Searches); n > MaxSearchListChars {
		v.add("spec.dnsConfig.searches", "Invalid value: %s: must not have more than %d characters (including spaces) in the search list", quoteList(c.Searches), MaxSearchListChars)
	}
	for i, s := range c.Searches {
		if checked, msgs := fqdn.SearchDomain(s); len(msgs) > 0 {
			v.add(fmt.Sprintf("spec.dnsConfig.searches[%d]", i), "Invalid value: %q: %s", checked, strings.Join(msgs, "; "))
		}
	}
	for i, o := range c.Options {
		if o.Name == "" {
			v.add(fmt.Sprintf("spec.dnsConfig.options[%d]", i), "Required value: must not be empty")
		}
	}
}

// checkIP is IsValidIPForLegacyField, strict with StrictIPCIDRValidation
// (Release.strictIP), plus the API server's warnings for non-canonical
// spellings (GetWarningsForIP), which come whether or not the value is
// rejected.
func checkIP(s string, strict bool) (msg, warning string) {
	const invalid = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
	ip, err := netip.ParseAddr(s)
	if err != nil {
		sloppy := parseIPSloppy(s)
		if sloppy == nil || strings.Contains(s, "%") {
			return invalid, ""
		}
		return strictOnly(strict, "must not have leading 0s"), nonStandardIP(s, sloppy.String(), strict)
	}
	if ip.Zone() != "" {
		return invalid, ""
	}
	if ip.Is4In6() {
		return strictOnly(strict, "must not be an IPv4-mapped IPv6 address"), nonStandardIP(s, ip.Unmap().String(), strict)
	}
	if ip.Is6() && ip.String() != s {
		return "", fmt.Sprintf("IPv6 address %q should be in RFC 5952 canonical format (%q)", s, ip.String())
	}
	return "", ""
}

func strictOnly(strict bool, msg string) string {
	if strict {
		return msg
	}
	return ""
}

// nonStandardIP is GetWarningsForIP's warning for a spelling that parses
// only sloppily; its text changed when StrictIPCIDRValidation turned on.
func nonStandardIP(s, canon string, strict bool) string {
	if strict {
		return fmt.Sprintf("non-standard IP address %q is invalid: use %q", s, canon)
	}
	return fmt.Sprintf("non-standard IP address %q will be considered invalid in a future Kubernetes release: use %q", s, canon)
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// ValidateNode adds to ValidateAPI the checks that pass the API server but
// fail or silently change on the node (validate --strict, the webhook): a
// setHostnameAsFQDN FQDN over 64 characters, a merged search list or
// nameserver list over kubelet's limits, and an autopath annotation the pod's
// policy cannot use. host is the node resolver config assumed for the
// prediction.
func (e *Engine) ValidateNode(in Input, host Host) Validation {
	v := ValidateAPI(in)
	apiErrors := len(v.Errors)
	annField := "metadata.annotations[" + AnnotationDNSPolicy + "]"
	switch in.PolicyAnnotation {
	case "", string(ClusterFirst):
	case string(ClusterFirstWithAutopath):
		if msg := autopathUnusable(in); msg != "" {
			v.add(annField, "Invalid value: %q: %s", in.PolicyAnnotation, strings.TrimPrefix(msg, "annotation "+AnnotationDNSPolicy+": "))
		}
	default:
		v.add(annField, "Unsupported value: %q: supported values: %q, %q", in.PolicyAnnotation, string(ClusterFirstWithAutopath), string(ClusterFirst))
	}
	// The prediction assumes an API-valid pod; annotation problems do not
	// stop it, so that every node-level violation is reported at once.
	if apiErrors > 0 {
		return v
	}
	r, err := e.Compute(in, host)
	if err != nil {
		var tl *fqdn.TooLongError
		if errors.As(err, &tl) {
			v.add("spec.setHostnameAsFQDN", "Invalid value: true: the pod's FQDN %q is %d characters and the kernel hostname holds at most %d, so the node cannot start the pod; shorten spec.hostname (or the pod name), spec.subdomain or the namespace by %d characters, or set setHostnameAsFQDN to false",
				tl.FQDN, len(tl.FQDN), fqdn.MaxKernelHostname, len(tl.FQDN)-fqdn.MaxKernelHostname)
		} else {
			v.add("spec", "Invalid value: the node cannot start the pod: %v", err)
			return v
		}
	}
	for _, w := range r.Warnings {
		switch w.Limit {
		case LimitNameservers:
			v.trim("spec.dnsConfig.nameservers", "Invalid value: %s: after merging with the node's DNS the pod has %d nameservers and the node keeps only the first %d, dropping %s; remove %d nameserver(s) from spec.dnsConfig.nameservers",
				quoteList(append(append([]string(nil), r.Nameservers...), w.Omitted...)), w.Before, MaxNameservers, quoteList(w.Omitted), len(w.Omitted))
		case LimitSearches:
			own := searchesOf(in)
			if len(own) == 0 {
				v.trim("spec.dnsConfig.searches", "the search list has %d entries from the cluster domains and the node's resolv.conf alone, and the node keeps %d (limits: %d entries, %d characters, %d characters per entry), dropping %s; the pod adds no searches, so this comes from the node's configuration",
					w.Before, len(r.Searches), MaxSearchPaths, MaxSearchListChars, MaxSearchLength, quoteList(w.Omitted))
				continue
			}
			v.trim("spec.dnsConfig.searches", "Invalid value: %s: after merging with the node's DNS the search list has %d entries and the node keeps %d (limits: %d entries, %d characters, %d characters per entry), dropping %s",
				quoteList(own), w.Before, len(r.Searches), MaxSearchPaths, MaxSearchListChars, MaxSearchLength, quoteList(w.Omitted))
		}
	}
	return v
}

func searchesOf(in Input) []string {
	if in.DNSConfig == nil {
		return nil
	}
	return in.DNSConfig.Searches
}
