package podspec

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// The bounds of a decode of an object's JSON (an admission review's, which
// anyone who can reach the webhook can send): each list and map of the
// engine's fields is counted before its elements are made, so the memory
// a decode takes stays a small multiple of the bytes it reads, whatever
// their shape. The API server's own limit for annotations (an object it
// stored never passes it). The lists are bounded far above the API
// server's limits (3 nameservers, 32 searches) and kubelet's, so that a
// pod past those still reaches the engine and gets its denial naming the
// field, but not a million entries.
const (
	// MaxAnnotationBytes is the API server's limit on an object's
	// annotations, keys and values together (TotalAnnotationSizeLimitB).
	MaxAnnotationBytes = 256 << 10
	// MaxDNSListEntries bounds each of spec.dnsConfig's nameservers,
	// searches and options.
	MaxDNSListEntries = 1000
	// MaxNodeSelector bounds spec.nodeSelector's entries (no API limit).
	MaxNodeSelector = 1000
)

// maxEscape is the most bytes JSON spends on one byte of a string
// ("\u00XX"): annotations whose JSON passes MaxAnnotationBytes times it
// cannot fit once decoded.
const maxEscape = 6

// Annotations are metadata.annotations, bounded by MaxAnnotationBytes.
type Annotations map[string]string

// UnmarshalJSON decodes annotations within MaxAnnotationBytes.
func (a *Annotations) UnmarshalJSON(b []byte) error {
	if len(b) > maxEscape*MaxAnnotationBytes+2 {
		return fmt.Errorf("metadata.annotations: %d bytes of JSON; the API server allows %d bytes of keys and values", len(b), MaxAnnotationBytes)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	if n > MaxAnnotationBytes {
		return fmt.Errorf("metadata.annotations: %d bytes of keys and values; the API server allows %d", n, MaxAnnotationBytes)
	}
	*a = m
	return nil
}

// NodeSelector is spec.nodeSelector, bounded by MaxNodeSelector entries.
type NodeSelector map[string]string

// UnmarshalJSON decodes a node selector of at most MaxNodeSelector entries.
func (s *NodeSelector) UnmarshalJSON(b []byte) error {
	if n := members(b); n > MaxNodeSelector {
		return fmt.Errorf("spec.nodeSelector: %d entries; the webhook reads at most %d", n, MaxNodeSelector)
	}
	return json.Unmarshal(b, (*map[string]string)(s))
}

// DNSConfig is spec.dnsConfig, each list bounded by MaxDNSListEntries.
type DNSConfig corev1.PodDNSConfig

// UnmarshalJSON decodes a dnsConfig whose lists are within their bound.
func (c *DNSConfig) UnmarshalJSON(b []byte) error {
	var raw struct {
		Nameservers, Searches, Options json.RawMessage
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	for _, l := range []struct {
		name  string
		raw   json.RawMessage
		limit int
	}{
		{"nameservers", raw.Nameservers, policy.MaxNameservers},
		{"searches", raw.Searches, policy.MaxSearchPaths},
		{"options", raw.Options, 0},
	} {
		if n := members(l.raw); n > MaxDNSListEntries {
			why := "the API server has no limit"
			if l.limit > 0 {
				why = fmt.Sprintf("the API server allows %d", l.limit)
			}
			return fmt.Errorf("spec.dnsConfig.%s: %d entries; the webhook reads at most %d (%s)", l.name, n, MaxDNSListEntries, why)
		}
	}
	return json.Unmarshal(b, (*corev1.PodDNSConfig)(c))
}

// members counts the elements of a JSON array or the members of a JSON
// object b, which encoding/json has already checked is valid JSON; 0 for
// anything else. It allocates nothing.
func members(b []byte) int {
	depth, n, inString, empty := 0, 0, false, true
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			if depth == 1 {
				empty = false
			}
		case '[', '{':
			if depth == 1 {
				empty = false
			}
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				n++
			}
		case ' ', '\t', '\n', '\r':
		default:
			if depth == 1 {
				empty = false
			}
		}
	}
	if empty {
		return 0
	}
	return n + 1
}
