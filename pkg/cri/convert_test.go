package cri

import (
	"fmt"
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func TestFromSandboxRecoversPolicy(t *testing.T) {
	eng, err := policy.New(policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	cluster := []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	many := func(n int) []string {
		var s []string
		for i := 0; i < n; i++ {
			s = append(s, fmt.Sprintf("h%02d.example", i))
		}
		return s
	}
	cases := []struct {
		name       string
		host       []string
		dns        *runtimeapi.DNSConfig
		wantPolicy policy.Policy
		wantSearch []string // pod searches recovered (ClusterFirst only)
	}{
		{"ClusterFirst with the node's searches and a pod search", []string{"corp.example"},
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: append(append([]string{}, cluster...), "corp.example", "extra.example"), Options: []string{"ndots:5"}},
			policy.ClusterFirst, []string{"extra.example"}},
		{"None shaped like ClusterFirst but without the node's searches", []string{"corp.example"},
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: cluster, Options: []string{"ndots:2"}},
			policy.None, nil},
		{"no node searches: the shapes are the same config", nil,
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: cluster, Options: []string{"ndots:5"}},
			policy.ClusterFirst, nil},
		{"node searches equal to a cluster search are not expected twice", []string{"cluster.local", "corp.example"},
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: append(append([]string{}, cluster...), "corp.example"), Options: []string{"ndots:5"}},
			policy.ClusterFirst, nil},
		{"a list kubelet trimmed at 32 entries inside the node's searches", many(40),
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: append(append([]string{}, cluster...), many(29)...), Options: []string{"ndots:5"}},
			policy.ClusterFirst, nil},
		{"host-shaped config (Default)", []string{"corp.example"},
			&runtimeapi.DNSConfig{Servers: []string{"192.0.2.1"}, Searches: []string{"corp.example"}},
			policy.Default, nil},
		{"host-shaped config from another host file (None)", []string{"corp.example"},
			&runtimeapi.DNSConfig{Servers: []string{"192.0.2.9"}, Searches: []string{"corp.example"}},
			policy.None, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "shop", Uid: "u"}, DnsConfig: tc.dns}
			in, err := FromSandbox(cfg, eng, policy.Host{Nameservers: []string{"192.0.2.1"}, Searches: tc.host})
			if err != nil {
				t.Fatal(err)
			}
			if in.Policy != tc.wantPolicy {
				t.Fatalf("policy %q, want %q", in.Policy, tc.wantPolicy)
			}
			if tc.wantPolicy == policy.ClusterFirst {
				var got []string
				if in.DNSConfig != nil {
					got = in.DNSConfig.Searches
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.wantSearch) {
					t.Errorf("pod searches %v, want %v", got, tc.wantSearch)
				}
			}
			// Whatever was recovered, rendering it again with the same
			// node gives kubelet's config back.
			r, err := eng.Compute(in, policy.Host{Nameservers: []string{"192.0.2.1"}, Searches: tc.host})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(r.Searches) != fmt.Sprint(tc.dns.Searches) || fmt.Sprint(r.Nameservers) != fmt.Sprint(tc.dns.Servers) {
				t.Errorf("re-rendered %v %v, want kubelet's %v %v", r.Nameservers, r.Searches, tc.dns.Servers, tc.dns.Searches)
			}
		})
	}
}

// Without the API server (the sandbox config alone), the namespace label is
// unknown: the cluster default and the annotation decide.
func TestFromSandboxClusterDefault(t *testing.T) {
	two := 2
	n := testNode
	n.DefaultPolicy, n.Ndots = policy.ClusterFirstWithAutopath, &two
	eng, err := policy.New(n)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := policy.New(testNode)
	if err != nil {
		t.Fatal(err)
	}
	host := policy.Host{Nameservers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}}
	for _, tc := range []struct {
		name     string
		pod      policy.Input
		wantType policy.Type
		wantOpts []string
	}{
		{"ClusterFirst", policy.Input{Policy: policy.ClusterFirst}, policy.TypeAutopath, []string{"ndots:2"}},
		{"annotation opts out", policy.Input{Policy: policy.ClusterFirst, PolicyAnnotation: "ClusterFirst"}, policy.TypeCluster, []string{"ndots:2"}},
		{"hostNetwork", policy.Input{Policy: policy.ClusterFirstWithHostNet, HostNetwork: true}, policy.TypeCluster, []string{"ndots:2"}},
		{"Default", policy.Input{Policy: policy.Default}, policy.TypeHost, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.Name, tc.pod.Namespace, tc.pod.UID = "p", "team", "uid-p"
			cfg := kubeletConfig(t, kubelet, host, tc.pod)
			in, err := FromSandbox(cfg, eng, host)
			if err != nil {
				t.Fatal(err)
			}
			res, err := eng.Compute(in, host)
			if err != nil {
				t.Fatal(err)
			}
			if res.Type != tc.wantType || !slices.Equal(res.Options, tc.wantOpts) {
				t.Errorf("got %s %q, want %s %q", res.Type, res.Options, tc.wantType, tc.wantOpts)
			}
		})
	}
}
