package v1alpha1

import (
	"strings"
	"testing"
)

// TestNodeDNS: the defaults, "" as no cluster domain, and what render
// accepts (ValidateAsKubelet) beside what the agents accept (Validate).
func TestNodeDNS(t *testing.T) {
	var def NodeDNS
	def.SetDefaults()
	if def.Domain() != DefaultClusterDomain || *def.ResolvConf != DefaultResolvConf || def.NodeOS != DefaultNodeOS {
		t.Errorf("defaults = %+v", def)
	}
	tests := []struct {
		name       string
		node       NodeDNS
		wantDomain string
		wantErr    string // of Validate; "" when valid
		kubeletErr string // of ValidateAsKubelet
	}{
		{"unset domain", NodeDNS{}, DefaultClusterDomain, "", ""},
		{"empty domain is none", NodeDNS{ClusterDomain: ptr("")}, "", "", ""},
		{"other domain", NodeDNS{ClusterDomain: ptr("k8s.example")}, "k8s.example", "", ""},
		{"bad domain", NodeDNS{ClusterDomain: ptr("a b")}, "a b", "clusterDomain:", ""},
		{"sloppy cluster DNS", NodeDNS{ClusterDNS: []string{"010.096.000.010"}}, DefaultClusterDomain, "clusterDNS[0]:", ""},
		{"bad node-local DNS", NodeDNS{NodeLocalDNS: []string{"x"}}, DefaultClusterDomain, "nodeLocalDNS[0]:", ""},
		{"dual-stack node-local DNS", NodeDNS{ClusterDNS: []string{"10.96.0.10", "fd00:10:96::a"}, NodeLocalDNS: []string{"169.254.20.10", "fd00::10"}}, DefaultClusterDomain, "", ""},
		{"node-local DNS with a zone", NodeDNS{NodeLocalDNS: []string{"fd00::10", "fd00::11%eth0"}}, DefaultClusterDomain, `nodeLocalDNS[1]: "fd00::11%eth0": no zone allowed`, ""},
		{"IPv6 link-local node-local DNS", NodeDNS{NodeLocalDNS: []string{"fe80::10"}}, DefaultClusterDomain, `nodeLocalDNS[0]: "fe80::10": an IPv6 link-local address`, ""},
		{"windows", NodeDNS{NodeOS: NodeOSWindows}, DefaultClusterDomain, "", ""},
		{"bad OS", NodeDNS{NodeOS: "plan9"}, DefaultClusterDomain, `nodeOS: "plan9" must be "linux" or "windows"`, "nodeOS:"},
	}
	check := func(t *testing.T, what string, err error, want string) {
		t.Helper()
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", what, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%s = %v, want an error starting %q", what, err, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.node
			n.SetDefaults()
			if got := n.Domain(); got != tt.wantDomain {
				t.Errorf("Domain = %q, want %q", got, tt.wantDomain)
			}
			check(t, "Validate", n.Validate(""), tt.wantErr)
			check(t, "ValidateAsKubelet", n.ValidateAsKubelet(""), tt.kubeletErr)
		})
	}
}
