package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Duration is a Go duration as a string ("500ms", "5s", "1h"), kept as
// written; Validate checks it and Duration returns it parsed.
type Duration string

// Duration is d parsed; 0 when d is empty or invalid (Validate reports
// that).
func (d Duration) Duration() time.Duration {
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0
	}
	return v
}

// check adds an error at path unless d is a duration in [lo, hi]; it
// returns d parsed, or 0 when it is invalid.
func (d Duration) check(e *fieldErrors, path string, lo, hi time.Duration) time.Duration {
	v, err := d.within(lo, hi)
	if err != nil {
		e.add(path, "%v", err)
	}
	return v
}

// within returns d parsed, or an error unless it is a duration in
// [lo, hi]: the one rule of every duration field.
func (d Duration) within(lo, hi time.Duration) (time.Duration, error) {
	v, err := time.ParseDuration(string(d))
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q: not a duration such as \"5s\" or \"500ms\"", d)
	case v < lo || v > hi:
		return 0, fmt.Errorf("%q: must be between %v and %v", d, lo, hi)
	}
	return v, nil
}

// ByteSize is a size in bytes: an integer (33554432) or a Kubernetes-style
// quantity string ("32Mi", "64M", "1.5Gi"), kept as written; Validate
// checks it and Bytes returns it parsed. The quantity suffixes are k, M, G,
// T, P, E (powers of 1000) and Ki, Mi, Gi, Ti, Pi, Ei (powers of 1024); the
// value must be a whole number of bytes.
type ByteSize string

// UnmarshalJSON accepts a JSON number or string; the value is checked by
// Validate, so that its error names the field.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*b = ByteSize(s)
		return nil
	case json.Valid(data) && (data[0] == '-' || data[0] >= '0' && data[0] <= '9'):
		*b = ByteSize(data)
		return nil
	}
	return fmt.Errorf("byte size %s: want an integer or a quantity such as \"32Mi\"", data)
}

// Bytes is b parsed; 0 when b is empty or invalid (Validate reports that).
func (b ByteSize) Bytes() int64 {
	n, err := parseBytes(string(b))
	if err != nil {
		return 0
	}
	return n
}

func (b ByteSize) check(e *fieldErrors, path string) {
	if _, err := parseBytes(string(b)); err != nil {
		e.add(path, "%q: %v", b, err)
	}
}

var byteSuffixes = map[string]int64{
	"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
}

// parseBytes reads a positive ByteSize.
func parseBytes(s string) (int64, error) {
	if strings.HasPrefix(s, "-") {
		return 0, errors.New("must be > 0")
	}
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	num, suffix := s[:i], s[i:]
	mult, ok := byteSuffixes[suffix]
	r, okNum := new(big.Rat).SetString(num)
	if !ok || !okNum || strings.Count(num, ".") > 1 || strings.HasPrefix(num, ".") || strings.HasSuffix(num, ".") {
		return 0, errors.New("not a size such as 33554432 or \"32Mi\"")
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	switch {
	case r.Sign() <= 0:
		return 0, errors.New("must be > 0")
	case !r.IsInt():
		return 0, errors.New("not a whole number of bytes")
	case !r.Num().IsInt64():
		return 0, errors.New("too large")
	}
	return r.Num().Int64(), nil
}

// fieldErrors collects "path: message" errors.
type fieldErrors []error

func (e *fieldErrors) add(path, format string, args ...any) {
	*e = append(*e, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

func (e fieldErrors) join() error { return errors.Join(e...) }
