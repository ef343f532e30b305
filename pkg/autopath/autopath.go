package autopath

import (
	"errors"
	"fmt"
	"strings"
)

// Suffix is the autopath zone, as a lowercase FQDN.
const Suffix = "ap.k8s.io."

// DefaultOptionCode is the EDNS0 local option code that carries the search
// list (from the local/experimental range 65001-65534).
const DefaultOptionCode = 65001

// Limits on the option's search list: kubelet's limits on a pod's search line.
const (
	MaxListChars = 2048
	MaxEntries   = 32
)

// Name is a parsed autopath query name.
type Name struct {
	// Base is the name the application asked for, as an FQDN, in the case
	// the question used.
	Base string
	// Namespace is the pod's namespace (lowercase).
	Namespace string
}

// Parse recognises qname (an FQDN, any case) of the form
// "<base>.search.<namespace>.<zone>.ap.k8s.io." for the cluster zone zone
// (e.g. "cluster.local", with or without trailing dot). It works from the
// right, so a base that itself contains a "search" label is kept whole. ok
// is false for any other name, and for a base that already carries the
// autopath suffix (never expand twice).
func Parse(qname, zone string) (n Name, ok bool) {
	zone = strings.TrimSuffix(strings.ToLower(zone), ".")
	if zone == "" || !hasSuffixFold(qname, "."+Suffix) {
		return Name{}, false
	}
	rest := qname[:len(qname)-len(Suffix)-1] // "<base>.search.<ns>.<zone>"
	if !hasSuffixFold(rest, "."+zone) {
		return Name{}, false
	}
	rest = rest[:len(rest)-len(zone)-1] // "<base>.search.<ns>"
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return Name{}, false
	}
	ns := strings.ToLower(rest[i+1:])
	rest = rest[:i] // "<base>.search"
	j := strings.LastIndexByte(rest, '.')
	if j <= 0 || !strings.EqualFold(rest[j+1:], "search") || ns == "" {
		return Name{}, false
	}
	base := rest[:j] + "."
	if hasSuffixFold(base, "."+Suffix) || strings.EqualFold(base, Suffix) {
		return Name{}, false
	}
	return Name{Base: base, Namespace: ns}, true
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// PodSearches is the search list a ClusterFirst pod in ns would have, before
// the node's host searches: "<ns>.svc.<zone>", "svc.<zone>", "<zone>".
func PodSearches(ns, zone string) []string {
	zone = strings.TrimSuffix(zone, ".")
	return []string{ns + ".svc." + zone, "svc." + zone, zone}
}

// OptionValue is the EDNS0 option payload for a pod in ns: the pod search
// list followed by the node's host searches, comma-separated, duplicates
// omitted, trailing dots dropped.
func OptionValue(ns, zone string, hostSearches []string) string {
	list := PodSearches(ns, zone)
	for _, s := range hostSearches {
		s = strings.TrimSuffix(s, ".")
		if s == "" {
			continue
		}
		dup := false
		for _, have := range list {
			if strings.EqualFold(have, s) {
				dup = true
				break
			}
		}
		if !dup {
			list = append(list, s)
		}
	}
	return strings.Join(list, ",")
}

// Errors of ParseOption.
var (
	ErrOptionTooLong = errors.New("autopath: search list option longer than 2048 characters")
	ErrOptionTooMany = errors.New("autopath: search list option has more than 32 entries")
)

// ParseOption validates an option payload and returns its search domains
// (without trailing dots). Every entry must be a domain name: labels of 1-63
// characters from letters, digits, '-' and '_', at most 253 characters; an
// empty payload is an empty list.
func ParseOption(data []byte) ([]string, error) {
	if len(data) > MaxListChars {
		return nil, ErrOptionTooLong
	}
	if len(data) == 0 {
		return nil, nil
	}
	parts := strings.Split(string(data), ",")
	if len(parts) > MaxEntries {
		return nil, ErrOptionTooMany
	}
	for i, p := range parts {
		p = strings.TrimSuffix(p, ".")
		if err := checkDomain(p); err != nil {
			return nil, fmt.Errorf("autopath: search list option entry %d %q: %w", i, p, err)
		}
		parts[i] = p
	}
	return parts, nil
}

func checkDomain(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > 253 {
		return errors.New("longer than 253 characters")
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("labels must be 1-63 characters")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("character %q not allowed", c)
			}
		}
	}
	return nil
}

// Candidates lists the names to try for base, in order: base under each
// search domain, then base itself. Names that would carry the autopath
// suffix are skipped, so expansion never loops.
func Candidates(base string, searches []string) []string {
	base = strings.TrimSuffix(base, ".")
	out := make([]string, 0, len(searches)+1)
	for _, s := range searches {
		c := base + "." + strings.TrimSuffix(s, ".") + "."
		if hasSuffixFold(c, "."+Suffix) {
			continue
		}
		out = append(out, c)
	}
	return append(out, base+".")
}
