package fqdn

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestForPod(t *testing.T) {
	s := func(v string) *string { return &v }
	tests := []struct {
		name              string
		pod               Pod
		domain            string
		wantHost, wantDom string
		wantTrunc         bool
		wantFrom          string // "metadata.name" when empty
		wantErr           string
	}{
		{name: "pod name", pod: Pod{Name: "web-0", Namespace: "ns"}, domain: "cluster.local", wantHost: "web-0"},
		{name: "spec.hostname and subdomain", pod: Pod{Name: "p", Namespace: "ns", Hostname: "h", Subdomain: "s"}, domain: "cluster.local", wantHost: "h", wantDom: "s.ns.svc.cluster.local", wantFrom: "spec.hostname"},
		{name: "empty cluster domain leaves a trailing dot", pod: Pod{Name: "p", Namespace: "ns", Subdomain: "s"}, wantHost: "p", wantDom: "s.ns.svc."},
		{name: "dotted pod name is used as is", pod: Pod{Name: "a.b", Namespace: "ns"}, wantHost: "a.b"},
		{name: "63 characters kept", pod: Pod{Name: strings.Repeat("a", 63)}, wantHost: strings.Repeat("a", 63)},
		{name: "64 characters cut to 63", pod: Pod{Name: strings.Repeat("a", 64)}, wantHost: strings.Repeat("a", 63), wantTrunc: true},
		{name: "cut then trailing - and . trimmed", pod: Pod{Name: strings.Repeat("a", 60) + ".-.-x"}, wantHost: strings.Repeat("a", 60), wantTrunc: true},
		{name: "nothing left after trimming", pod: Pod{Name: strings.Repeat("-", 70)}, wantErr: "hostname for pod"},
		{name: "invalid hostname", pod: Pod{Name: "p", Hostname: "UP"}, wantErr: `pod Hostname "UP" is not a valid DNS label`},
		{name: "invalid subdomain", pod: Pod{Name: "p", Subdomain: "a.b"}, wantErr: `pod Subdomain "a.b" is not a valid DNS label: must not contain dots`},
		{name: "override drops the domain", pod: Pod{Name: "p", Namespace: "ns", Subdomain: "s", HostnameOverride: s("over.ride")}, domain: "cluster.local", wantHost: "over.ride", wantFrom: "spec.hostnameOverride"},
		{name: "64-character override truncated", pod: Pod{Name: "p", HostnameOverride: s(strings.Repeat("o", 64))}, wantHost: strings.Repeat("o", 63), wantTrunc: true, wantFrom: "spec.hostnameOverride"},
		{name: "invalid override", pod: Pod{Name: "p", HostnameOverride: s("Bad")}, wantErr: `pod HostnameOverride "Bad" is not a valid DNS subdomain`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ForPod(tc.pod, tc.domain)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantFrom == "" {
				tc.wantFrom = "metadata.name"
			}
			if n.Hostname != tc.wantHost || n.Domain != tc.wantDom || n.Truncated != tc.wantTrunc || n.From != tc.wantFrom {
				t.Errorf("got %+v, want host %q domain %q truncated %v from %q", n, tc.wantHost, tc.wantDom, tc.wantTrunc, tc.wantFrom)
			}
		})
	}
}

func TestKernelHostname(t *testing.T) {
	dom := "s.ns.svc.cluster.local" // 22 characters
	tests := []struct {
		name    string
		n       Names
		asFQDN  bool
		want    string
		tooLong bool
	}{
		{name: "flag off", n: Names{Hostname: "h", Domain: dom}, want: "h"},
		{name: "no domain: flag has no effect", n: Names{Hostname: strings.Repeat("h", 63)}, asFQDN: true, want: strings.Repeat("h", 63)},
		{name: "exactly 64", n: Names{Hostname: strings.Repeat("h", 41), Domain: dom}, asFQDN: true, want: strings.Repeat("h", 41) + "." + dom},
		{name: "65 fails", n: Names{Hostname: strings.Repeat("h", 42), Domain: dom}, asFQDN: true, tooLong: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KernelHostname(tc.n, tc.asFQDN)
			var tl *TooLongError
			if tc.tooLong {
				if !errors.As(err, &tl) || len(tl.FQDN) != 65 ||
					!strings.Contains(err.Error(), "is too long (64 characters is the max, 65 characters requested)") {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNameChecks(t *testing.T) {
	for _, s := range []string{"a", "a-b", "0", strings.Repeat("a", 63)} {
		if m := Label(s); m != nil {
			t.Errorf("Label(%q) = %v", s, m)
		}
	}
	for _, s := range []string{"", "-a", "a-", "A", "a_b", "a.b", strings.Repeat("a", 64)} {
		if m := Label(s); m == nil {
			t.Errorf("Label(%q) accepted", s)
		}
	}
	for _, s := range []string{"a.b", "a-1.b-2.c", strings.Repeat("a", 253)} {
		if m := Subdomain(s); m != nil {
			t.Errorf("Subdomain(%q) = %v", s, m)
		}
	}
	for _, s := range []string{"", "a.", ".a", "a..b", "_a.b", strings.Repeat("a", 254)} {
		if m := Subdomain(s); m == nil {
			t.Errorf("Subdomain(%q) accepted", s)
		}
	}
}

// TestChecksAgreeWithAPIServer: Label and Subdomain accept exactly what the
// API server's checks (k8s.io/apimachinery validation) accept, on random
// strings of the characters that matter, short and at the length limits.
func TestChecksAgreeWithAPIServer(t *testing.T) {
	const chars = "ab09-._A"
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		var n int
		switch rng.IntN(4) {
		case 0:
			n = MaxLabelLength - 1 + rng.IntN(3)
		case 1:
			n = MaxSubdomainLength - 1 + rng.IntN(3)
		default:
			n = rng.IntN(8)
		}
		b := make([]byte, n)
		for i := range b {
			// Mostly letters, so that long strings are valid often.
			if rng.IntN(4) == 0 {
				b[i] = chars[rng.IntN(len(chars))]
			} else {
				b[i] = 'a' + byte(rng.IntN(26))
			}
		}
		return string(b)
	}
	valid := [2]int{}
	for range 200000 {
		s := gen()
		if got, want := Label(s) == nil, validation.IsDNS1123Label(s) == nil; got != want {
			t.Fatalf("Label(%q) valid %v, the API server's %v", s, got, want)
		} else if got {
			valid[0]++
		}
		if got, want := Subdomain(s) == nil, validation.IsDNS1123Subdomain(s) == nil; got != want {
			t.Fatalf("Subdomain(%q) valid %v, the API server's %v", s, got, want)
		} else if got {
			valid[1]++
		}
	}
	// Both sides are tried: many strings of each check are valid.
	if valid[0] < 10000 || valid[1] < 10000 {
		t.Errorf("valid labels %d, subdomains %d of 200,000: too few to compare", valid[0], valid[1])
	}
}
