package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Release is a Kubernetes minor release, such as 1.34. The zero Release
// is the newest this package mirrors (1.37), so a caller that does not know
// its kubelet or API server gets the current behaviour.
type Release struct {
	Major, Minor int
}

// ParseRelease reads a Kubernetes version as kubelet and the API server
// report it: "v1.34.4", "1.34", "v1.35.0-rc.1" or "v1.34.4+k3s1". Only the
// major and minor numbers count; the empty string is the zero Release.
func ParseRelease(s string) (Release, error) {
	if s == "" {
		return Release{}, nil
	}
	v := strings.TrimPrefix(s, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Release{}, fmt.Errorf("version %q: must be v<major>.<minor>[.<patch>], such as v1.34.4", s)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || p != strconv.Itoa(x) {
			return Release{}, fmt.Errorf("version %q: must be v<major>.<minor>[.<patch>], such as v1.34.4", s)
		}
		n[i] = x
	}
	if n[0] < 1 {
		return Release{}, fmt.Errorf("version %q: major version must be at least 1", s)
	}
	return Release{Major: n[0], Minor: n[1]}, nil
}

// String is "1.34", or "newest" for the zero Release.
func (r Release) String() string {
	if r == (Release{}) {
		return "newest"
	}
	return fmt.Sprintf("%d.%d", r.Major, r.Minor)
}

// atLeast reports that r is major.minor or newer; the zero Release is
// newer than any.
func (r Release) atLeast(major, minor int) bool {
	if r == (Release{}) {
		return true
	}
	return r.Major > major || r.Major == major && r.Minor >= minor
}

// The rules that differ between the releases this package mirrors
// (1.34 to 1.37, default feature gates), each in one place. docs/
// compatibility.md ("Kubernetes 1.34 → 1.37: what changed for pod DNS")
// lists them with the golden cases that prove them.

// hostnameOverride reports that spec.hostnameOverride is in use: kubelet's
// GeneratePodHostNameAndDomain (pkg/kubelet/kubelet_pods.go) reads it, and
// the API server keeps and validates it (pkg/api/pod/util.go
// dropDisabledFields drops it otherwise). Feature gate HostnameOverride:
// alpha and off in 1.34, beta and on in 1.35, GA and locked in 1.37.
// Kubelets before 1.34 have no such field and ignore it too.
func (r Release) hostnameOverride() bool { return r.atLeast(1, 35) }

// strictIP reports that the API server rejects dnsConfig.nameservers with
// leading zeros or in IPv4-mapped IPv6 form, rather than only warning
// (IsValidIPForLegacyField; feature gate StrictIPCIDRValidation: alpha and
// off in 1.33 to 1.35, beta and on in 1.36). The warning's text changed in
// the same release (k8s.io/apimachinery GetWarningsForIP).
func (r Release) strictIP() bool { return r.atLeast(1, 36) }
