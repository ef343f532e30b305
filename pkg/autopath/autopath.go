package autopath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// Suffix is the autopath zone (policy.AutopathZone), as a lowercase FQDN.
const Suffix = policy.AutopathZone + "."

// DefaultOptionCode is the EDNS0 local option code that carries the search
// list, the first of the local/experimental range (RFC 6891 9:
// MinOptionCode-MaxOptionCode) a code must come from. They are copies of
// api/v1alpha1's, which this pure package may not import;
// test/apidefaults ties them.
const (
	DefaultOptionCode = MinOptionCode
	MinOptionCode     = 65001
	MaxOptionCode     = 65534
)

// CheckOptionCode reports a code outside the local/experimental range.
func CheckOptionCode(code uint) error {
	if code < MinOptionCode || code > MaxOptionCode {
		return fmt.Errorf("%d is not a local option code (%d-%d)", code, MinOptionCode, MaxOptionCode)
	}
	return nil
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// OptionValue is the EDNS0 option payload for a pod in ns: the search
// list kubelet would give it under ClusterFirst (policy.ClusterSearches:
// the cluster searches, then the node's host searches as parsed from its
// resolv.conf, duplicates omitted, kubelet's limits applied),
// comma-separated.
func OptionValue(ns, zone string, hostSearches []string) string {
	return strings.Join(policy.ClusterSearches(ns, strings.TrimSuffix(zone, "."), hostSearches), ",")
}

// Errors of ParseOption.
var (
	ErrOptionTooLong = fmt.Errorf("autopath: search list option longer than %d characters", policy.MaxSearchListChars)
	ErrOptionTooMany = fmt.Errorf("autopath: search list option has more than %d entries", policy.MaxSearchPaths)
)

// ParseOption validates an option payload and returns its search domains
// (without trailing dots). The list must fit kubelet's limits on a search
// line and every entry must be a domain name: labels of 1-63 characters
// from letters, digits, '-' and '_', at most policy.MaxSearchLength
// characters; an empty payload is an empty list.
func ParseOption(data []byte) ([]string, error) {
	if len(data) > policy.MaxSearchListChars {
		return nil, ErrOptionTooLong
	}
	if len(data) == 0 {
		return nil, nil
	}
	parts := strings.Split(string(data), ",")
	if len(parts) > policy.MaxSearchPaths {
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
	if len(s) > policy.MaxSearchLength {
		return fmt.Errorf("longer than %d characters", policy.MaxSearchLength)
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
