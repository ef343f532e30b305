package v1alpha1

import (
	"fmt"
	"strings"
)

// Name limits of RFC 1123, as Kubernetes applies them.
const (
	// MaxLabelLength is the longest DNS label.
	MaxLabelLength = 63
	// MaxSubdomainLength is the longest DNS subdomain, without a trailing dot.
	MaxSubdomainLength = 253
)

// ValidateClusterDomain reports why s cannot be a cluster domain, or nil.
// Every component checks a cluster domain, from a flag or a file, here.
//
// kubelet does not check its clusterDomain. kubeadm's dnsDomain, which
// becomes that clusterDomain, must be a DNS-1123 subdomain: at most 253
// characters; labels of 1 to 63 letters, digits and '-', starting and
// ending with a letter or digit. That is the rule, with three spellings
// that kubelet and CoreDNS serve accepted too. '_' counts as a letter:
// DNS allows it (RFC 2181), kubelet writes it into search lists, and
// CoreDNS serves such a zone (test/convert/corpus/27 runs in CoreDNS
// 1.15). Upper case is allowed: DNS names are
// case-insensitive (RFC 4343), and the zone is kept in lower case. One
// trailing dot is allowed: it is a zone's fully qualified spelling, as
// in a Corefile. It does not count in the 253 characters.
//
// The root (".") and "" are refused. Where "" means no cluster domain
// (the node agents), the caller checks that first.
func ValidateClusterDomain(s string) error {
	if s == "" {
		return fmt.Errorf("empty: want a domain such as %q", DefaultClusterDomain)
	}
	if why := subdomainProblem(strings.TrimSuffix(s, ".")); why != "" {
		return fmt.Errorf("%q is not a domain such as %q: %s", s, DefaultClusterDomain, why)
	}
	return nil
}

// subdomainProblem says why s is not a DNS-1123 subdomain in any case,
// '_' taken for a letter, or returns "".
func subdomainProblem(s string) string {
	if s == "" {
		return "the root has no cluster names"
	}
	if len(s) > MaxSubdomainLength {
		return fmt.Sprintf("longer than %d characters", MaxSubdomainLength)
	}
	for _, label := range strings.Split(s, ".") {
		switch {
		case label == "":
			return "has an empty label"
		case len(label) > MaxLabelLength:
			return fmt.Sprintf("label %q is longer than %d characters", label, MaxLabelLength)
		case !IsDNSLabel(strings.ToLower(strings.ReplaceAll(label, "_", "a"))):
			return fmt.Sprintf("label %q must be letters, digits, '_' and '-', starting and ending with a letter, digit or '_'", label)
		}
	}
	return ""
}

// IsDNSLabel reports an RFC 1123 label as Kubernetes checks it: 1 to 63
// lowercase letters, digits and '-', starting and ending alphanumeric.
func IsDNSLabel(s string) bool {
	if s == "" || len(s) > MaxLabelLength || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
