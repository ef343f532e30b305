package v1alpha1

import (
	"fmt"
	"strings"
	"testing"
)

// TestValidateClusterDomain is the cluster domain rule: kubeadm's
// DNS-1123 subdomain, in any case, with one optional trailing dot.
func TestValidateClusterDomain(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	// 4 labels of 63 and one of 1: 4*64+1 = 257 characters; 3 and one of
	// 61: 253.
	max253 := strings.Repeat(label63+".", 3) + strings.Repeat("b", 61)
	tests := []struct {
		name string
		in   string
		want string // "" when valid
	}{
		{"default", "cluster.local", ""},
		{"one label", "local", ""},
		{"digits and dashes", "k8s-1.example", ""},
		{"digit first and last", "1a.2", ""},
		{"upper case", "Cluster.Local", ""},
		{"trailing dot", "cluster.local.", ""},
		{"label of 63", label63 + ".example", ""},
		{"253 characters", max253, ""},
		{"253 characters and a dot", max253 + ".", ""},
		{"empty", "", `empty: want a domain such as "cluster.local"`},
		{"root", ".", `"." is not a domain such as "cluster.local": the root has no cluster names`},
		{"two trailing dots", "cluster.local..", `"cluster.local.." is not a domain such as "cluster.local": has an empty label`},
		{"leading dot", ".cluster.local", `".cluster.local" is not a domain such as "cluster.local": has an empty label`},
		{"empty label", "cluster..local", `"cluster..local" is not a domain such as "cluster.local": has an empty label`},
		{"254 characters", max253 + "b", `is not a domain such as "cluster.local": longer than 253 characters`},
		{"label of 64", label63 + "a.example", `label "` + label63 + `a" is longer than 63 characters`},
		{"underscore", "my_cluster.local", ""},
		{"underscore first", "_cluster.local", ""},
		{"leading dash", "-cluster.local", `label "-cluster" must be letters, digits, '_' and '-', starting and ending with a letter, digit or '_'`},
		{"trailing dash", "cluster-.local", `label "cluster-" must be letters, digits`},
		{"space", "cluster local", `label "cluster local" must be letters, digits`},
		{"slash", "cluster/local", `label "cluster/local" must be letters, digits`},
		{"not ASCII", "clüster.local", `label "clüster" must be letters, digits`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateClusterDomain(tt.in)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateClusterDomain(%q) = %v, want nil", tt.in, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidateClusterDomain(%q) = %v, want %q", tt.in, err, tt.want)
			}
		})
	}
}

// TestClusterDomainCallers: each config refuses a bad cluster domain with
// the rule's message under its own field.
func TestClusterDomainCallers(t *testing.T) {
	const bad = "cluster..local"
	want := `clusterDomain: "cluster..local" is not a domain such as "cluster.local": has an empty label`
	node := NodeDNS{ClusterDomain: ptr(bad)}
	if err := node.Validate(""); err == nil || err.Error() != want {
		t.Errorf("NodeDNS.Validate = %v, want %q", err, want)
	}
	if err := node.Validate("node."); err == nil || err.Error() != "node."+want {
		t.Errorf("NodeDNS.Validate(\"node.\") = %v, want %q", err, "node."+want)
	}
	var c ServerConfiguration
	c.SetDefaults()
	c.ClusterDomain = bad
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ServerConfiguration.Validate = %v, want %q", err, want)
	}
}

// TestValidateNdots is the ndots rule every component calls.
func TestValidateNdots(t *testing.T) {
	tests := []struct {
		name string
		in   int
		want string // "" when valid
	}{
		{"zero", 0, ""},
		{"kubelet's", 5, ""},
		{"glibc's largest", MaxNdots, ""},
		{"above", MaxNdots + 1, "16 must be between 0 and 15"},
		{"negative", -1, "-1 must be between 0 and 15"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateNdots(tt.in)
			if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && got != tt.want) {
				t.Errorf("ValidateNdots(%d) = %v, want %q", tt.in, err, tt.want)
			}
		})
	}
}
