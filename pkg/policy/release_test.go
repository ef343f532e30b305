package policy

import (
	"strings"
	"testing"
)

func TestParseRelease(t *testing.T) {
	tests := []struct {
		in      string
		want    Release
		wantErr string
	}{
		{in: "", want: Release{}},
		{in: "v1.34.4", want: Release{1, 34}},
		{in: "1.35", want: Release{1, 35}},
		{in: "v1.37.2", want: Release{1, 37}},
		{in: "v1.36.0-rc.1", want: Release{1, 36}},
		{in: "v1.34.4+k3s1", want: Release{1, 34}},
		{in: "v1.34.4-eks-1234", want: Release{1, 34}},
		{in: "v1", wantErr: `version "v1": must be v<major>.<minor>[.<patch>]`},
		{in: "1.34.4.1", wantErr: "must be v<major>.<minor>"},
		{in: "v1.x", wantErr: "must be v<major>.<minor>"},
		{in: "v1.034", wantErr: "must be v<major>.<minor>"},
		{in: "v1.-1", wantErr: "must be v<major>.<minor>"},
		{in: "v0.34", wantErr: "major version must be at least 1"},
		{in: "latest", wantErr: "must be v<major>.<minor>"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRelease(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseRelease(%q) = %v, %v; want error %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseRelease(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestReleaseRules pins the release each rule starts in, and that the
// zero Release (a node or API server of unknown version) has every rule.
func TestReleaseRules(t *testing.T) {
	tests := []struct {
		release          Release
		hostnameOverride bool
		strictIP         bool
	}{
		{Release{1, 30}, false, false},
		{Release{1, 34}, false, false},
		{Release{1, 35}, true, false},
		{Release{1, 36}, true, true},
		{Release{1, 37}, true, true},
		{Release{2, 0}, true, true},
		{Release{}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.release.String(), func(t *testing.T) {
			if got := tc.release.hostnameOverride(); got != tc.hostnameOverride {
				t.Errorf("hostnameOverride() = %v, want %v", got, tc.hostnameOverride)
			}
			if got := tc.release.strictIP(); got != tc.strictIP {
				t.Errorf("strictIP() = %v, want %v", got, tc.strictIP)
			}
		})
	}
}

func TestNewRejectsBadKubeletVersion(t *testing.T) {
	_, err := New(Node{KubeletVersion: "1.x"})
	if err == nil || err.Error() != `node kubelet version "1.x": must be v<major>.<minor>[.<patch>], such as v1.34.4` {
		t.Fatalf("New = %v", err)
	}
}

// TestHostnameOverrideByKubelet: kubelet 1.34 ignores spec.hostnameOverride
// (feature gate HostnameOverride off by default), 1.35 and later use it;
// the golden cases names-override-* of testdata/kubelet-outputs-*.json are
// kubelet's own answers.
func TestHostnameOverrideByKubelet(t *testing.T) {
	override := Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, Hostname: "web-0", Subdomain: "web", HostnameOverride: ptr("custom-host")}
	invalid := Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, HostnameOverride: ptr("Bad_Name")}
	withFQDN := override
	withFQDN.SetHostnameAsFQDN = true
	tests := []struct {
		name         string
		kubelet      string
		in           Input
		wantHostname string
		wantFQDN     string
		wantErr      string
		ignored      bool
	}{
		{name: "1.34 ignores it", kubelet: "v1.34.4", in: override, wantHostname: "web-0", wantFQDN: "web-0.web.ns.svc.cluster.local", ignored: true},
		{name: "1.35 uses it", kubelet: "v1.35.4", in: override, wantHostname: "custom-host"},
		{name: "1.37 uses it", kubelet: "v1.37.2", in: override, wantHostname: "custom-host"},
		{name: "unknown version: the newest", in: override, wantHostname: "custom-host"},
		{name: "1.34 never checks it", kubelet: "v1.34.4", in: invalid, wantHostname: "p", ignored: true},
		{name: "1.37 fails the sandbox on an invalid one", kubelet: "v1.37.2", in: invalid, wantErr: `pod HostnameOverride "Bad_Name" is not a valid DNS subdomain`},
		{name: "1.34 sets the FQDN as hostname", kubelet: "v1.34.4", in: withFQDN, wantHostname: "web-0.web.ns.svc.cluster.local", wantFQDN: "web-0.web.ns.svc.cluster.local", ignored: true},
		{name: "1.37 has no domain for setHostnameAsFQDN", kubelet: "v1.37.2", in: withFQDN, wantHostname: "custom-host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := node
			n.KubeletVersion = tc.kubelet
			e, err := New(n)
			if err != nil {
				t.Fatal(err)
			}
			r, tr, err := e.ComputeExplained(tc.in, host)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Hostname != tc.wantHostname || r.FQDN != tc.wantFQDN {
				t.Errorf("hostname %q, FQDN %q; want %q, %q", r.Hostname, r.FQDN, tc.wantHostname, tc.wantFQDN)
			}
			var warned, traced bool
			for _, w := range r.Warnings {
				warned = warned || w.Reason == ReasonHostnameOverrideIgnored && strings.Contains(w.Message, "kubelet 1.34 ignores spec.hostnameOverride")
			}
			for _, d := range tr {
				traced = traced || d.Rule == "hostname.override.ignored"
			}
			if warned != tc.ignored || traced != tc.ignored {
				t.Errorf("warning %v, trace %v; want %v (warnings %+v)", warned, traced, tc.ignored, r.Warnings)
			}
		})
	}
}
