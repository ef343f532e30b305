package policy

import (
	"slices"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// The cluster policy: pod annotation > namespace label > cluster default;
// dnsPolicy None and a pod's own ndots always win; hostNetwork, Default
// and None pods are never upgraded by a label or the default.
func TestClusterPolicyPrecedence(t *testing.T) {
	ap, cf := string(ClusterFirstWithAutopath), string(ClusterFirst)
	two, three := 2, "3"
	withDefaults := func(p Policy, ndots *int) Node {
		n := node
		n.DefaultPolicy, n.Ndots = p, ndots
		return n
	}
	apSearch := "search.ns.cluster.local.ap.k8s.io"
	tests := []struct {
		name        string
		node        Node
		in          Input
		wantType    Type
		wantOptions []string
	}{
		{"no default: ClusterFirst", node, Input{Policy: ClusterFirst}, TypeCluster, []string{"ndots:5"}},
		{"default upgrades ClusterFirst", withDefaults(ClusterFirstWithAutopath, nil), Input{Policy: ClusterFirst}, TypeAutopath, []string{"ndots:5"}},
		{"default upgrades ClusterFirstWithHostNet off the host network", withDefaults(ClusterFirstWithAutopath, nil), Input{Policy: ClusterFirstWithHostNet}, TypeAutopath, []string{"ndots:5"}},
		{"default ClusterFirst changes nothing", withDefaults(ClusterFirst, nil), Input{Policy: ClusterFirst}, TypeCluster, []string{"ndots:5"}},
		{"label over no default", node, Input{Policy: ClusterFirst, NamespacePolicy: ap}, TypeAutopath, []string{"ndots:5"}},
		{"label opts out of the default", withDefaults(ClusterFirstWithAutopath, nil), Input{Policy: ClusterFirst, NamespacePolicy: cf}, TypeCluster, []string{"ndots:5"}},
		{"annotation opts out of label and default", withDefaults(ClusterFirstWithAutopath, nil), Input{Policy: ClusterFirst, PolicyAnnotation: cf, NamespacePolicy: ap}, TypeCluster, []string{"ndots:5"}},
		{"annotation over a label opt-out", withDefaults(ClusterFirstWithAutopath, nil), Input{Policy: ClusterFirst, PolicyAnnotation: ap, NamespacePolicy: cf}, TypeAutopath, []string{"ndots:5"}},
		{"unsupported annotation: label applies", node, Input{Policy: ClusterFirst, PolicyAnnotation: "x", NamespacePolicy: ap}, TypeAutopath, []string{"ndots:5"}},
		{"unsupported label: default applies", withDefaults(ClusterFirstWithAutopath, nil), Input{Policy: ClusterFirst, NamespacePolicy: "x"}, TypeAutopath, []string{"ndots:5"}},
		{"None wins over label and default", withDefaults(ClusterFirstWithAutopath, &two), Input{Policy: None, NamespacePolicy: ap, DNSConfig: &DNSConfig{Nameservers: []string{"192.0.2.9"}}}, TypeNone, []string{}},
		{"Default untouched", withDefaults(ClusterFirstWithAutopath, &two), Input{Policy: Default, NamespacePolicy: ap}, TypeHost, host.Options},
		{"ClusterFirst on the host network untouched", withDefaults(ClusterFirstWithAutopath, &two), Input{Policy: ClusterFirst, HostNetwork: true, NamespacePolicy: ap}, TypeHost, host.Options},
		{"ClusterFirstWithHostNet on the host network: not by default", withDefaults(ClusterFirstWithAutopath, nil), Input{Policy: ClusterFirstWithHostNet, HostNetwork: true, NamespacePolicy: ap}, TypeCluster, []string{"ndots:5"}},
		{"ClusterFirstWithHostNet on the host network: by annotation", withDefaults(ClusterFirstWithAutopath, nil), Input{Policy: ClusterFirstWithHostNet, HostNetwork: true, PolicyAnnotation: ap}, TypeAutopath, []string{"ndots:5"}},
		{"unknown dnsPolicy not upgraded", withDefaults(ClusterFirstWithAutopath, nil), Input{Policy: "Bogus"}, TypeCluster, []string{"ndots:5"}},
		{"no cluster domain: stays ClusterFirst", Node{ClusterDNS: node.ClusterDNS, DefaultPolicy: ClusterFirstWithAutopath}, Input{Policy: ClusterFirst}, TypeCluster, []string{"ndots:5"}},
		{"ndots default for ClusterFirst", withDefaults("", &two), Input{Policy: ClusterFirst}, TypeCluster, []string{"ndots:2"}},
		{"ndots default for autopath", withDefaults(ClusterFirstWithAutopath, &two), Input{Policy: ClusterFirst}, TypeAutopath, []string{"ndots:2"}},
		{"ndots 0", withDefaults("", new(int)), Input{Policy: ClusterFirst}, TypeCluster, []string{"ndots:0"}},
		{"explicit ndots wins", withDefaults("", &two), Input{Policy: ClusterFirst, DNSConfig: &DNSConfig{Options: []Option{{Name: "ndots", Value: &three}, {Name: "edns0"}}}}, TypeCluster, []string{"ndots:3", "edns0"}},
		{"other explicit options keep the default", withDefaults("", &two), Input{Policy: ClusterFirst, DNSConfig: &DNSConfig{Options: []Option{{Name: "edns0"}}}}, TypeCluster, []string{"ndots:2", "edns0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			tc.in.Name, tc.in.Namespace = "p", "ns"
			r, err := e.Compute(tc.in, host)
			if err != nil {
				t.Fatal(err)
			}
			if r.Type != tc.wantType {
				t.Errorf("type = %s, want %s (warnings %+v)", r.Type, tc.wantType, r.Warnings)
			}
			if r.Type == TypeAutopath && !slices.Equal(r.Searches, []string{apSearch}) {
				t.Errorf("searches = %q", r.Searches)
			}
			if !slices.Equal(r.Options, tc.wantOptions) {
				t.Errorf("options = %q, want %q", r.Options, tc.wantOptions)
			}
		})
	}
}

func TestNewRejectsBadDefaults(t *testing.T) {
	big, neg := v1alpha1.MaxNdots+1, -1
	for _, n := range []Node{{DefaultPolicy: "Default"}, {DefaultPolicy: None}, {Ndots: &big}, {Ndots: &neg}} {
		if _, err := New(n); err == nil {
			t.Errorf("New(%+v) accepted", n)
		}
	}
}

// Recover inverts kubelet's output whatever the cluster policy: the
// defaults apply to the recovered input, not to kubelet's base.
func TestRecoverIgnoresClusterPolicy(t *testing.T) {
	two := 2
	n := node
	n.DefaultPolicy, n.Ndots = ClusterFirstWithAutopath, &two
	e, err := New(n)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, _ := New(node)
	in := Input{Name: "p", Namespace: "ns", Policy: ClusterFirst}
	out, err := kubelet.Compute(in, host)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := e.Recover(in, Output{Nameservers: out.Nameservers, Searches: out.Searches, Options: out.Options}, host)
	if !ok || rec.Policy != ClusterFirst || rec.DNSConfig != nil && len(rec.DNSConfig.Options) > 0 {
		t.Fatalf("Recover = %+v, %v", rec, ok)
	}
	got, err := e.Compute(rec, host)
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != TypeAutopath || !slices.Equal(got.Options, []string{"ndots:2"}) {
		t.Errorf("recovered pod computes %+v", got)
	}
}
