package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// PodMode is how pod records (<dashed-ip>.<ns>.pod.<zone>) are answered, as
// CoreDNS's "pods" option.
type PodMode uint8

// The pod modes.
const (
	// PodsDisabled answers no pod records (NXDOMAIN).
	PodsDisabled PodMode = iota
	// PodsInsecure answers any well-formed dashed IP in an exposed namespace
	// without checking that such a pod exists (kube-dns behaviour).
	PodsInsecure
	// PodsVerified answers only IPs of pods that exist in that namespace.
	PodsVerified
)

// ParsePodMode parses "disabled", "insecure" or "verified".
func ParsePodMode(s string) (PodMode, error) {
	switch s {
	case "disabled":
		return PodsDisabled, nil
	case "insecure":
		return PodsInsecure, nil
	case "verified":
		return PodsVerified, nil
	}
	return 0, fmt.Errorf("pods mode %q: want disabled, insecure or verified", s)
}

func (m PodMode) String() string {
	switch m {
	case PodsInsecure:
		return "insecure"
	case PodsVerified:
		return "verified"
	}
	return "disabled"
}

// VersionTTL is the TTL of dns-version.<zone>, as CoreDNS.
const VersionTTL = 28800

// SchemaVersion is the version of the specification served.
const SchemaVersion = "1.1.0"

// MaxTTL is the largest --ttl accepted (CoreDNS's bound): a copy of
// v1alpha1.MaxRecordTTL that test/apidefaults ties to it.
const MaxTTL = 3600

// Options shape what a Snapshot holds. They are the CoreDNS-parity options.
type Options struct {
	// Zone is the cluster domain, e.g. "cluster.local" (case and a trailing
	// dot do not matter).
	Zone string
	// TTL of every record but dns-version, and the SOA minimum.
	TTL uint32
	// Pods is the pod record mode.
	Pods PodMode
	// Namespaces, when not empty, are the only namespaces served.
	Namespaces []string
	// IgnoreEmptyService makes Services without a ready endpoint NXDOMAIN.
	IgnoreEmptyService bool
	// EndpointPodNames names endpoints without a hostname after their pod.
	EndpointPodNames bool
	// NoEndpoints serves no endpoint records: headless Services and endpoint
	// names are NXDOMAIN.
	NoEndpoints bool
}

// ErrBadOptions is wrapped by New for invalid Options.
var ErrBadOptions = errors.New("store: bad options")

// checkOptions validates opts and returns the lowercase zone with its
// trailing dot.
func checkOptions(opts Options) (string, error) {
	if err := v1alpha1.ValidateClusterDomain(opts.Zone); err != nil {
		return "", fmt.Errorf("%w: zone: %w", ErrBadOptions, err)
	}
	zone := strings.ToLower(strings.TrimSuffix(opts.Zone, "."))
	if opts.TTL > MaxTTL {
		return "", fmt.Errorf("%w: ttl %d above %d", ErrBadOptions, opts.TTL, MaxTTL)
	}
	return zone + ".", nil
}

// exposedSet is the namespace filter of names (nil: every namespace).
func exposedSet(names []string) map[string]struct{} {
	if len(names) == 0 {
		return nil
	}
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[strings.ToLower(n)] = struct{}{}
	}
	return set
}

// namespaceExposed reports whether the filter exposed (exposedSet's) lets
// ns, lowercase, through.
func namespaceExposed(exposed map[string]struct{}, ns string) bool {
	if exposed == nil {
		return true
	}
	_, ok := exposed[ns]
	return ok
}
