package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/webhook"
)

// The cluster pod policy fields (issue 18) decode strictly from both agents'
// files, flags override them, and errors name the field or the flag.
func TestAgentPodPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	head := "apiVersion: dnsconfigurer.io/v1alpha1\nkind: "
	shim := write("shim.yaml", head+"ShimConfiguration\ndefaultDNSPolicy: ClusterFirstWithAutopath\nnamespaceLabels: true\nndots: 2\n")
	nri := write("nri.yaml", head+"NRIConfiguration\ndefaultDNSPolicy: ClusterFirstWithAutopath\nnamespaceLabels: true\nndots: 0\n")

	s, _, err := shimCommand.parse([]string{"--config", shim}, io.Discard)
	if err != nil || s.DefaultDNSPolicy != v1alpha1.DNSPolicyClusterFirstWithAutopath || !s.NamespaceLabels || s.Ndots == nil || *s.Ndots != 2 {
		t.Errorf("shim file = %+v, %v", s, err)
	}
	s, _, err = shimCommand.parse([]string{"--config", shim, "--ndots", "3", "--default-dns-policy", "ClusterFirst", "--namespace-labels=false"}, io.Discard)
	if err != nil || s.DefaultDNSPolicy != "ClusterFirst" || s.NamespaceLabels || *s.Ndots != 3 {
		t.Errorf("shim file with flags = %+v, %v", s, err)
	}
	s, _, err = shimCommand.parse(nil, io.Discard)
	if err != nil || s.DefaultDNSPolicy != "ClusterFirst" || s.NamespaceLabels || s.Ndots != nil {
		t.Errorf("shim defaults = %+v, %v", s, err)
	}
	n, _, err := nriCommand.parse([]string{"--config", nri}, io.Discard)
	if err != nil || n.DefaultDNSPolicy != v1alpha1.DNSPolicyClusterFirstWithAutopath || !n.NamespaceLabels || n.Ndots == nil || *n.Ndots != 0 {
		t.Errorf("nri file = %+v, %v", n, err)
	}

	tests := []struct {
		nri  bool
		args []string
		want string
	}{
		{false, []string{"--config", write("bad-policy.yaml", head+"ShimConfiguration\ndefaultDNSPolicy: Default\n")}, `defaultDNSPolicy: "Default" must be`},
		{false, []string{"--config", write("bad-ndots.yaml", head+"ShimConfiguration\nndots: 16\n")}, "ndots: 16 must be between 0 and 15"},
		{false, []string{"--config", write("bad-type.yaml", head+"ShimConfiguration\nndots: two\n")}, "ndots"},
		{true, []string{"--config", write("unknown.yaml", head+"NRIConfiguration\nnamespaceLabel: true\n")}, `unknown field "namespaceLabel"`},
		{false, []string{"--default-dns-policy", "None"}, "--default-dns-policy (defaultDNSPolicy)"},
		{true, []string{"--ndots", "-1"}, "--ndots (ndots)"},
		{false, []string{"--ndots", "x"}, `"x" is not a number`},
	}
	for _, tc := range tests {
		var err error
		if tc.nri {
			_, _, err = nriCommand.parse(tc.args, io.Discard)
		} else {
			_, _, err = shimCommand.parse(tc.args, io.Discard)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// The webhook's engines carry its PodPolicy and its Reviewer warns.
func TestWebhookPodPolicy(t *testing.T) {
	two := 2
	cfg := &v1alpha1.WebhookConfiguration{Cluster: v1alpha1.NodeDNS{ClusterDNS: []string{"10.96.0.10"}},
		PodPolicy: v1alpha1.PodPolicy{DefaultDNSPolicy: v1alpha1.DNSPolicyClusterFirstWithAutopath, NamespaceLabels: true, Ndots: &two},
		NodePools: []v1alpha1.NodePool{{Name: "a", NodeSelector: map[string]string{"pool": "a"}}}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r, _, err := webhook.NewReviewer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !r.ClusterPolicy || !r.NamespaceLabels {
		t.Errorf("reviewer %+v", r)
	}
	for _, p := range append(r.Pools, r.Default) {
		res, err := p.Engine.Compute(policy.Input{Name: "p", Namespace: "ns", Policy: policy.ClusterFirst}, p.Host)
		if err != nil || res.Type != "autopath" || !strings.Contains(strings.Join(res.Options, " "), "ndots:2") {
			t.Errorf("pool %q: %+v, %v", p.Name, res, err)
		}
	}
}
