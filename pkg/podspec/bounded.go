package podspec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// The bounds of a decode of an object's JSON (an admission review's, which
// anyone who can reach the webhook can send). Every decode goes through
// Unmarshal, which refuses a repeated key. Each list and map of the
// engine's fields is counted on the bytes its own decode reads, before
// its elements are made, and made anew each time: the copies of a
// repeated key cost no more than their bytes until the refusal. The
// memory a decode takes stays a small multiple of the bytes it reads,
// whatever their shape.
// The lists are bounded far above the API server's limits (3 nameservers,
// 32 searches) and kubelet's, so that a pod past those still reaches the
// engine and gets its denial naming the field, but not a million entries.
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

// DuplicateKeyError is a key repeated within one JSON object.
type DuplicateKeyError struct {
	// Field is the key's path, such as "spec.dnsConfig.options".
	Field string
}

func (e *DuplicateKeyError) Error() string { return e.Field + ": duplicate key" }

// Unmarshal decodes JSON data into v as the API server reads an object
// (sigs.k8s.io/json, strict). Keys match field names case-sensitively:
// "Options" is an unknown field, skipped, not a second "options". A key
// repeated within one object is a *DuplicateKeyError. The API server
// never sends either; encoding/json would decode every copy of a key,
// while a bound counts one.
func Unmarshal(data []byte, v any) error { return unmarshalAt("", data, v) }

// unmarshalAt is Unmarshal for the value at path at ("" for the root):
// a duplicate key's Field starts with it.
func unmarshalAt(at string, data []byte, v any) error {
	strict, err := kjson.UnmarshalStrict(data, v, kjson.DisallowDuplicateFields)
	if err != nil || len(strict) == 0 {
		return err
	}
	field := strict[0].Error()
	if fe, ok := strict[0].(kjson.FieldError); ok {
		field = fe.FieldPath()
	}
	if at != "" {
		field = at + "." + field
	}
	return &DuplicateKeyError{Field: field}
}

// RawJSON is a JSON value left undecoded, as json.RawMessage, but not
// copied: it is the part of the input Unmarshal was given, and valid as
// long as that is (a json.Decoder, which reuses its buffer, must not
// decode one). A 6 MB review's object is then not held twice.
type RawJSON []byte

// UnmarshalJSON keeps b; null is no value.
func (r *RawJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
	} else {
		*r = b
	}
	return nil
}

// Annotations are metadata.annotations, bounded by MaxAnnotationBytes.
type Annotations map[string]string

// UnmarshalJSON decodes annotations within MaxAnnotationBytes.
func (a *Annotations) UnmarshalJSON(b []byte) error {
	if len(b) > maxEscape*MaxAnnotationBytes+2 {
		return fmt.Errorf("metadata.annotations: %d bytes of JSON; the API server allows %d bytes of keys and values", len(b), MaxAnnotationBytes)
	}
	m, err := decodeMap("metadata.annotations", b)
	if err != nil {
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

// UnmarshalJSON decodes a node selector of at most MaxNodeSelector
// entries, into a new map: a map reused across decodes would add up.
func (s *NodeSelector) UnmarshalJSON(b []byte) error {
	if n := members(b); n > MaxNodeSelector {
		return fmt.Errorf("spec.nodeSelector: %d entries; the webhook reads at most %d", n, MaxNodeSelector)
	}
	m, err := decodeMap("spec.nodeSelector", b)
	if err != nil {
		return err
	}
	*s = m
	return nil
}

// decodeMap decodes the JSON object b at path at into a new map, made
// for b's members at once rather than grown. A key repeated in b is a
// *DuplicateKeyError, found by counting: the map then has fewer entries
// than b has members. Strict decoding keeps a second map of the keys
// seen: with it, and the map grown, repeated node selectors took 25 bytes
// per byte of their JSON, 9 without (TestReviewMemoryShapes).
func decodeMap(at string, b []byte) (map[string]string, error) {
	if string(b) == "null" {
		return nil, nil
	}
	n := members(b)
	m := make(map[string]string, n)
	if err := kjson.UnmarshalCaseSensitivePreserveInts(b, &m); err != nil {
		return nil, err
	}
	if len(m) == n {
		return m, nil
	}
	var again map[string]string // strictly, to name the key
	if err := unmarshalAt(at, b, &again); err != nil {
		return nil, err
	}
	return nil, &DuplicateKeyError{Field: at}
}

// DNSConfig is spec.dnsConfig, each list bounded by MaxDNSListEntries.
type DNSConfig corev1.PodDNSConfig

// UnmarshalJSON decodes a dnsConfig whose lists are within their bound.
// The lists are counted on the same keys the decode then reads: a repeated
// key is refused and a case variant is not read.
func (c *DNSConfig) UnmarshalJSON(b []byte) error {
	var lens struct {
		Nameservers entries `json:"nameservers"`
		Searches    entries `json:"searches"`
		Options     entries `json:"options"`
	}
	if err := unmarshalAt("spec.dnsConfig", b, &lens); err != nil {
		return err
	}
	for _, l := range []struct {
		name  string
		n     entries
		limit int
	}{
		{"nameservers", lens.Nameservers, policy.MaxNameservers},
		{"searches", lens.Searches, policy.MaxSearchPaths},
		{"options", lens.Options, 0},
	} {
		if n := int(l.n); n > MaxDNSListEntries {
			why := "the API server has no limit"
			if l.limit > 0 {
				why = fmt.Sprintf("the API server allows %d", l.limit)
			}
			return fmt.Errorf("spec.dnsConfig.%s: %d entries; the webhook reads at most %d (%s)", l.name, n, MaxDNSListEntries, why)
		}
	}
	var d corev1.PodDNSConfig
	if err := unmarshalAt("spec.dnsConfig", b, &d); err != nil {
		return err
	}
	*c = DNSConfig(d)
	return nil
}

// entries is the length of a JSON list or object, counted in place
// (members) without copying or decoding its elements.
type entries int

func (n *entries) UnmarshalJSON(b []byte) error {
	*n = entries(members(b))
	return nil
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
