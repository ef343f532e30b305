package policy

import (
	"reflect"
	"strings"
	"testing"
)

func TestValidateAPI(t *testing.T) {
	base := func(mod func(*Input)) Input {
		in := Input{Name: "web", Namespace: "ns", Policy: ClusterFirst}
		if mod != nil {
			mod(&in)
		}
		return in
	}
	tests := []struct {
		name     string
		in       Input
		errs     []string // "field: message prefix"
		warnings []string // substrings
	}{
		{name: "plain ClusterFirst pod", in: base(nil)},
		{name: "every supported policy", in: base(func(in *Input) { in.Policy = ClusterFirstWithHostNet })},
		{name: "unsupported policy", in: base(func(in *Input) { in.Policy = "clusterfirst" }),
			errs: []string{`spec.dnsPolicy: Unsupported value: "clusterfirst": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"`}},
		{name: "the autopath policy is not a dnsPolicy value", in: base(func(in *Input) { in.Policy = ClusterFirstWithAutopath }),
			errs: []string{`spec.dnsPolicy: Unsupported value: "ClusterFirstWithAutopath"`}},
		{name: "None needs dnsConfig", in: base(func(in *Input) { in.Policy = None }),
			errs: []string{"spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"}},
		{name: "None needs a nameserver and stops there", in: base(func(in *Input) {
			in.Policy = None
			in.DNSConfig = &DNSConfig{Searches: []string{"Bad"}}
		}), errs: []string{"spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver when `dnsPolicy` is None"}},
		{name: "3 nameservers accepted", in: base(func(in *Input) {
			in.DNSConfig = &DNSConfig{Nameservers: []string{"1.1.1.1", "2001:db8::1", "8.8.8.8"}}
		})},
		{name: "4 nameservers rejected", in: base(func(in *Input) {
			in.DNSConfig = &DNSConfig{Nameservers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"}}
		}), errs: []string{"spec.dnsConfig.nameservers: Invalid value: [\"1.1.1.1\",\"1.1.1.2\",\"1.1.1.3\",\"1.1.1.4\"]: must not have more than 3 nameservers"}},
		{name: "nameserver spellings", in: base(func(in *Input) {
			in.DNSConfig = &DNSConfig{Nameservers: []string{"dns.example", "010.0.0.1", "::ffff:1.2.3.4"}}
		}), errs: []string{
			`spec.dnsConfig.nameservers[0]: Invalid value: "dns.example": must be a valid IP address`,
			`spec.dnsConfig.nameservers[1]: Invalid value: "010.0.0.1": must not have leading 0s`,
			`spec.dnsConfig.nameservers[2]: Invalid value: "::ffff:1.2.3.4": must not be an IPv4-mapped IPv6 address`,
		}, warnings: []string{`non-standard IP address "010.0.0.1" is invalid: use "10.0.0.1"`, `use "1.2.3.4"`}},
		{name: "non-canonical IPv6 is a warning only", in: base(func(in *Input) {
			in.DNSConfig = &DNSConfig{Nameservers: []string{"2001:DB8:0::1"}}
		}), warnings: []string{`IPv6 address "2001:DB8:0::1" should be in RFC 5952 canonical format ("2001:db8::1")`}},
		{name: "32 searches accepted, 33 rejected", in: base(func(in *Input) { in.DNSConfig = &DNSConfig{Searches: domains(33, 6)} }),
			errs: []string{"spec.dnsConfig.searches: Invalid value: "}},
		{name: "2048 characters accepted", in: base(func(in *Input) { in.DNSConfig = &DNSConfig{Searches: exact2048()} })},
		{name: "2049 characters rejected", in: base(func(in *Input) {
			s := exact2048()
			s[len(s)-1] += "y"
			in.DNSConfig = &DNSConfig{Searches: s}
		}), errs: []string{"spec.dnsConfig.searches: Invalid value: "}},
		{name: "relaxed search syntax", in: base(func(in *Input) {
			in.DNSConfig = &DNSConfig{Searches: []string{".", "_tcp.example.com", "a.", "x_y.example", strings.Repeat("q", 64) + ".example"}}
		})},
		{name: "bad searches", in: base(func(in *Input) {
			in.DNSConfig = &DNSConfig{Searches: []string{"Upper.example", "", "..", "_.example", "__", "a..b", "ü.example", strings.Repeat("a", 254)}}
		}), errs: []string{
			`spec.dnsConfig.searches[0]: Invalid value: "Upper.example"`,
			`spec.dnsConfig.searches[1]: Invalid value: ""`,
			`spec.dnsConfig.searches[2]: Invalid value: "."`,
			`spec.dnsConfig.searches[3]: Invalid value: "_.example"`,
			`spec.dnsConfig.searches[4]: Invalid value: "__"`,
			`spec.dnsConfig.searches[5]: Invalid value: "a..b"`,
			`spec.dnsConfig.searches[6]: Invalid value: "ü.example"`,
			`spec.dnsConfig.searches[7]: Invalid value: "aaaa`,
		}},
		{name: "empty option name", in: base(func(in *Input) { in.DNSConfig = &DNSConfig{Options: []Option{{Name: "ndots"}, {Name: ""}}} }),
			errs: []string{"spec.dnsConfig.options[1]: Required value: must not be empty"}},
		{name: "hostname and subdomain must be labels", in: base(func(in *Input) { in.Hostname, in.Subdomain = "a.b", strings.Repeat("s", 64) }),
			errs: []string{`spec.hostname: Invalid value: "a.b": must not contain dots`, `spec.subdomain: Invalid value: "sssss`}},
		{name: "63-character hostname accepted", in: base(func(in *Input) { in.Hostname = strings.Repeat("h", 63) })},
		{name: "hostnameOverride rules", in: base(func(in *Input) {
			in.HostnameOverride = ptr(strings.Repeat("o", 65))
			in.SetHostnameAsFQDN = true
			in.HostNetwork = true
		}), errs: []string{"spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true", "spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true", "spec.hostnameOverride: Too long: may not be more than 64 bytes"}},
		{name: "invalid hostnameOverride", in: base(func(in *Input) { in.HostnameOverride = ptr("Bad_Name") }),
			errs: []string{`spec.hostnameOverride: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain`}},
		{name: "64-character hostnameOverride accepted", in: base(func(in *Input) { in.HostnameOverride = ptr(strings.Repeat("o", 64)) })},
		{name: "dotted pod name warns", in: base(func(in *Input) { in.Name = "web.v1" }),
			warnings: []string{"metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]"}},
		{name: "dotted pod name warns whatever the hostname", in: base(func(in *Input) { in.Name, in.Hostname, in.HostnameOverride = "web.v1", "web", ptr("web") }),
			warnings: []string{"metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]"}},
		{name: "missing name", in: base(func(in *Input) { in.Name = "" }), errs: []string{"metadata.name: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := ValidateAPI(tc.in)
			checkErrors(t, v.Errors, tc.errs)
			checkWarnings(t, v.Warnings, tc.warnings)
		})
	}
}

// TestValidateAPIFor: the API server's checks that changed between 1.34
// and 1.37 (default feature gates), release by release. The zero Release
// is the newest.
func TestValidateAPIFor(t *testing.T) {
	sloppy := Input{Name: "web", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Nameservers: []string{"010.0.0.1", "::ffff:1.2.3.4"}}}
	override := Input{Name: "web", Namespace: "ns", Policy: ClusterFirst, HostNetwork: true, SetHostnameAsFQDN: true, HostnameOverride: ptr("Bad_Name")}
	lenient := []string{
		`spec.dnsConfig.nameservers[0]: non-standard IP address "010.0.0.1" will be considered invalid in a future Kubernetes release: use "10.0.0.1"`,
		`spec.dnsConfig.nameservers[1]: non-standard IP address "::ffff:1.2.3.4" will be considered invalid in a future Kubernetes release: use "1.2.3.4"`,
	}
	strictErrs := []string{
		`spec.dnsConfig.nameservers[0]: Invalid value: "010.0.0.1": must not have leading 0s`,
		`spec.dnsConfig.nameservers[1]: Invalid value: "::ffff:1.2.3.4": must not be an IPv4-mapped IPv6 address`,
	}
	strictWarns := []string{
		`spec.dnsConfig.nameservers[0]: non-standard IP address "010.0.0.1" is invalid: use "10.0.0.1"`,
		`spec.dnsConfig.nameservers[1]: non-standard IP address "::ffff:1.2.3.4" is invalid: use "1.2.3.4"`,
	}
	overrideErrs := []string{
		"spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true",
		"spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true",
		`spec.hostnameOverride: Invalid value: "Bad_Name"`,
	}
	tests := []struct {
		name     string
		release  Release
		in       Input
		errs     []string
		warnings []string
	}{
		// StrictIPCIDRValidation: alpha (off) until 1.35, beta (on) in 1.36.
		{name: "1.34 warns about sloppy nameservers", release: Release{1, 34}, in: sloppy, warnings: lenient},
		{name: "1.35 warns about sloppy nameservers", release: Release{1, 35}, in: sloppy, warnings: lenient},
		{name: "1.36 rejects sloppy nameservers", release: Release{1, 36}, in: sloppy, errs: strictErrs, warnings: strictWarns},
		{name: "1.37 rejects sloppy nameservers", release: Release{1, 37}, in: sloppy, errs: strictErrs, warnings: strictWarns},
		{name: "newest rejects sloppy nameservers", in: sloppy, errs: strictErrs, warnings: strictWarns},
		// HostnameOverride: alpha (off, the field is dropped) in 1.34, beta (on) in 1.35.
		{name: "1.34 drops hostnameOverride unchecked", release: Release{1, 34}, in: override},
		{name: "1.35 checks hostnameOverride", release: Release{1, 35}, in: override, errs: overrideErrs},
		{name: "1.37 checks hostnameOverride", release: Release{1, 37}, in: override, errs: overrideErrs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := ValidateAPIFor(tc.in, tc.release)
			checkErrors(t, v.Errors, tc.errs)
			checkWarnings(t, v.Warnings, tc.warnings)
		})
	}
	// ValidateAPI is the newest release.
	for _, in := range []Input{sloppy, override} {
		if got, want := ValidateAPI(in), ValidateAPIFor(in, Release{1, 37}); !reflect.DeepEqual(got, want) {
			t.Errorf("ValidateAPI = %+v, 1.37 = %+v", got, want)
		}
	}
}

func checkErrors(t *testing.T, got []FieldError, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("errors = %q, want %d: %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i].Error(), want[i]) {
			t.Errorf("error %d = %q, want prefix %q", i, got[i].Error(), want[i])
		}
	}
}

func checkWarnings(t *testing.T, got []string, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("warnings = %q, want %d: %q", got, len(want), want)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("warning %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestValidateNode(t *testing.T) {
	e, _ := New(node)
	h := Host{Nameservers: []string{"192.0.2.1"}, Searches: domains(28, 8)}
	tests := []struct {
		name  string
		in    Input
		errs  []string
		trims []string
	}{
		{name: "fits", in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Searches: []string{"a.example"}}}},
		{name: "merged search list over 32 entries is a trim", in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Searches: []string{"a.example", "b.example"}}},
			trims: []string{`spec.dnsConfig.searches: Invalid value: ["a.example","b.example"]: after merging with the node's DNS the search list has 33 entries and the node keeps 32`}},
		{name: "3 pod nameservers after the cluster DNS is a trim", in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Nameservers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3"}}},
			trims: []string{`spec.dnsConfig.nameservers: Invalid value: ["10.96.0.10","1.1.1.1","1.1.1.2","1.1.1.3"]: after merging with the node's DNS the pod has 4 nameservers`}},
		{name: "FQDN of exactly 64 is fine", in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, Hostname: strings.Repeat("h", 64-len(".s.ns.svc.cluster.local")), Subdomain: "s", SetHostnameAsFQDN: true}},
		{name: "FQDN of 65 is rejected", in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, Hostname: strings.Repeat("h", 65-len(".s.ns.svc.cluster.local")), Subdomain: "s", SetHostnameAsFQDN: true},
			errs: []string{`spec.setHostnameAsFQDN: Invalid value: true: the pod's FQDN "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh.s.ns.svc.cluster.local" is 65 characters`}},
		{name: "autopath on Default", in: Input{Name: "p", Namespace: "ns", Policy: Default, PolicyAnnotation: "ClusterFirstWithAutopath"},
			errs: []string{`metadata.annotations[dnsconfigurer.io/dns-policy]: Invalid value: "ClusterFirstWithAutopath": ClusterFirstWithAutopath is ignored with dnsPolicy "Default"`}},
		{name: "autopath on hostNetwork ClusterFirst", in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, HostNetwork: true, PolicyAnnotation: "ClusterFirstWithAutopath"},
			errs: []string{`metadata.annotations[dnsconfigurer.io/dns-policy]: Invalid value: "ClusterFirstWithAutopath": ClusterFirstWithAutopath is ignored on a hostNetwork pod`}},
		{name: "autopath on ClusterFirstWithHostNet is fine", in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet, HostNetwork: true, PolicyAnnotation: "ClusterFirstWithAutopath"}},
		{name: "unknown annotation value", in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: "autopath"},
			errs: []string{`metadata.annotations[dnsconfigurer.io/dns-policy]: Unsupported value: "autopath"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := e.ValidateNode(tc.in, h)
			checkErrors(t, v.Errors, tc.errs)
			checkErrors(t, v.Trims, tc.trims)
		})
	}
}

func TestValidateNodeReportsEveryStage(t *testing.T) {
	e, _ := New(node)
	h := Host{Nameservers: []string{"192.0.2.1"}, Searches: domains(30, 8)}
	in := Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: "bogus",
		Hostname: strings.Repeat("h", 60), Subdomain: "s", SetHostnameAsFQDN: true,
		DNSConfig: &DNSConfig{Nameservers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3"}}}
	v := e.ValidateNode(in, h)
	checkErrors(t, v.Errors, []string{"metadata.annotations[dnsconfigurer.io/dns-policy]: Unsupported value", "spec.setHostnameAsFQDN: Invalid value: true"})
	checkErrors(t, v.Trims, []string{"spec.dnsConfig.nameservers: Invalid value", "spec.dnsConfig.searches: the search list has 33 entries from the cluster domains and the node's resolv.conf alone"})
}
