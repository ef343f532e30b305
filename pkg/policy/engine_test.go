package policy

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/fqdn"
)

func ptr[T any](v T) *T { return &v }

var (
	node = Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}
	host = Host{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}}
	// stubHost and stubOnly are systemd-resolved nodes: its stub beside
	// an upstream, and the stub alone.
	stubHost = Host{Nameservers: []string{"127.0.0.53", "192.0.2.1"}, Searches: []string{"corp.example.com"}, Options: []string{"edns0", "trust-ad"}}
	stubOnly = Host{Nameservers: []string{"127.0.0.53"}, Options: []string{"edns0", "trust-ad"}}
)

func clusterSearches(ns string, extra ...string) []string {
	return append([]string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local"}, extra...)
}

func TestCompute(t *testing.T) {
	tests := []struct {
		name, wantErr string
		node          Node
		host          Host
		in            Input
		want          Result // Warnings compared by reason only
		reasons       []string
		errIsFQD      bool
	}{
		{
			name: "ClusterFirst gets cluster DNS, cluster searches before host searches, ndots:5",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
		},
		{
			name: "ClusterFirst on hostNetwork falls back to the host config and gets no hostname",
			node: node, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, HostNetwork: true},
			want:    Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Type: TypeHost},
			reasons: []string{ReasonClusterFirstOnHostNetwork},
		},
		{
			name: "ClusterFirstWithHostNet on hostNetwork uses cluster DNS",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet, HostNetwork: true},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots:5"}, Type: TypeCluster},
		},
		{
			name: "ClusterFirstWithHostNet without hostNetwork is cluster too",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
		},
		{
			name: "Default copies the host config, options included",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: Default},
			want: Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Hostname: "p", Type: TypeHost},
		},
		// The loopback rule: a node's loopback stub (systemd-resolved's
		// 127.0.0.53, a dnsmasq on 127.0.0.1) answers only in the node's
		// network namespace. hostNetwork pods share it and keep the stub.
		{
			name: "hostNetwork Default keeps the node's loopback stub",
			node: node, host: stubHost,
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, HostNetwork: true},
			want: Result{Nameservers: []string{"127.0.0.53", "192.0.2.1"}, Searches: []string{"corp.example.com"}, Options: []string{"edns0", "trust-ad"}, Type: TypeHost},
		},
		{
			name: "hostNetwork ClusterFirst falls back to the host config and keeps the loopback stub",
			node: node, host: stubOnly,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, HostNetwork: true},
			want:    Result{Nameservers: []string{"127.0.0.53"}, Searches: []string{}, Options: []string{"edns0", "trust-ad"}, Type: TypeHost},
			reasons: []string{ReasonClusterFirstOnHostNetwork},
		},
		{
			name: "hostNetwork ClusterFirstWithHostNet without cluster DNS keeps the loopback stub",
			node: Node{ClusterDomain: "cluster.local"}, host: stubOnly,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet, HostNetwork: true},
			want:    Result{Nameservers: []string{"127.0.0.53"}, Searches: []string{}, Options: []string{"edns0", "trust-ad"}, Type: TypeHost},
			reasons: []string{ReasonMissingClusterDNS},
		},
		{
			name: "hostNetwork ClusterFirstWithHostNet uses cluster DNS, the stub is not in its base",
			node: node, host: stubOnly,
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet, HostNetwork: true},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns"), Options: []string{"ndots:5"}, Type: TypeCluster},
		},
		{
			name: "Default in its own network namespace drops the node's loopback stub",
			node: node, host: stubHost,
			in:      Input{Name: "p", Namespace: "ns", Policy: Default},
			want:    Result{Nameservers: []string{"192.0.2.1"}, Searches: []string{"corp.example.com"}, Options: []string{"edns0", "trust-ad"}, Hostname: "p", Type: TypeHost},
			reasons: []string{ReasonLoopbackNameserver},
		},
		{
			name: "ClusterFirst without cluster DNS in its own network namespace drops every loopback stub",
			node: Node{ClusterDomain: "cluster.local"}, host: stubOnly,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want:    Result{Nameservers: []string{}, Searches: []string{}, Options: []string{"edns0", "trust-ad"}, Hostname: "p", Type: TypeHost},
			reasons: []string{ReasonMissingClusterDNS, ReasonLoopbackNameserver},
		},
		{
			name: "a pod's own loopback nameserver is kept: it is the pod's choice",
			node: node, host: stubHost,
			in:      Input{Name: "p", Namespace: "ns", Policy: Default, DNSConfig: &DNSConfig{Nameservers: []string{"127.0.0.1"}}},
			want:    Result{Nameservers: []string{"192.0.2.1", "127.0.0.1"}, Searches: []string{"corp.example.com"}, Options: []string{"edns0", "trust-ad"}, Hostname: "p", Type: TypeHost},
			reasons: []string{ReasonLoopbackNameserver},
		},
		{
			name: "None with dnsConfig gets only dnsConfig",
			node: node, host: host,
			in: Input{Name: "p", Namespace: "ns", Policy: None, DNSConfig: &DNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
				Options: []Option{{Name: "ndots", Value: ptr("1")}}}},
			want: Result{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []string{"ndots:1"}, Hostname: "p", Type: TypeNone},
		},
		{
			name: "None without dnsConfig renders empty",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: None},
			want: Result{Nameservers: []string{}, Searches: []string{}, Options: []string{}, Hostname: "p", Type: TypeNone},
		},
		{
			name: "unknown policy falls back to ClusterFirst with a warning",
			node: node, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: "Bogus", HostNetwork: true},
			want:    Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots:5"}, Type: TypeCluster},
			reasons: []string{ReasonInvalidDNSPolicy},
		},
		{
			name: "empty policy is treated as unknown",
			node: node, host: host,
			in:      Input{Name: "p", Namespace: "ns"},
			want:    Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
			reasons: []string{ReasonInvalidDNSPolicy},
		},
		{
			name: "no cluster DNS: ClusterFirst falls back to Default, losing domain and ndots",
			node: Node{ClusterDomain: "cluster.local"}, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want:    Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Hostname: "p", Type: TypeHost},
			reasons: []string{ReasonMissingClusterDNS},
		},
		{
			name: "only invalid cluster DNS entries count as missing",
			node: Node{ClusterDNS: []string{"nope"}, ClusterDomain: "cluster.local"}, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet},
			want:    Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Hostname: "p", Type: TypeHost},
			reasons: []string{ReasonMissingClusterDNS},
		},
		{
			name: "cluster DNS parsed sloppily and canonicalised, order kept",
			node: Node{ClusterDNS: []string{"010.096.000.010", "FD00:0:0::000A"}, ClusterDomain: "cluster.local"}, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: Result{Nameservers: []string{"10.96.0.10", "fd00::a"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
		},
		{
			name: "no cluster domain: host searches only, still ndots:5 and host options dropped",
			node: Node{ClusterDNS: []string{"10.96.0.10"}}, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: []string{"corp.example.com"}, Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
		},
		{
			name: "host searches equal to cluster domains are deduplicated",
			node: node, host: Host{Nameservers: []string{"192.0.2.1"}, Searches: []string{"cluster.local", "b.example", "svc.cluster.local"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "b.example"), Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
		},
		{
			name: "empty namespace is inserted verbatim",
			node: node, host: Host{},
			in:   Input{Name: "p", Policy: ClusterFirst},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: []string{".svc.cluster.local", "svc.cluster.local", "cluster.local"}, Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
		},
		{
			name: "dnsConfig merges after the base: servers, searches deduped exactly, options override in place",
			node: node, host: host,
			in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{
				Nameservers: []string{"10.96.0.10", "1.1.1.1"},
				Searches:    []string{"cluster.local", "cluster.local.", "Corp.Example.com"},
				Options:     []Option{{Name: "edns0"}, {Name: "ndots", Value: ptr("2")}, {Name: "timeout", Value: ptr("1")}, {Name: "edns0", Value: ptr("")}},
			}},
			want: Result{Nameservers: []string{"10.96.0.10", "1.1.1.1"},
				Searches: clusterSearches("ns", "corp.example.com", "cluster.local.", "Corp.Example.com"),
				Options:  []string{"ndots:2", "edns0", "timeout:1"}, Hostname: "p", Type: TypeCluster},
		},
		{
			name: "empty option value deletes ndots:5's value (bare ndots)",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Options: []Option{{Name: "ndots", Value: ptr("")}}}},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots"}, Hostname: "p", Type: TypeCluster},
		},
		{
			name: "Default with dnsConfig: base host options keep order, override in place",
			node: node, host: host,
			in: Input{Name: "p", Namespace: "ns", Policy: Default, DNSConfig: &DNSConfig{Nameservers: []string{"192.0.2.1"},
				Options: []Option{{Name: "rotate"}, {Name: "timeout", Value: ptr("5")}}}},
			want: Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:5", "attempts:3", "rotate"}, Hostname: "p", Type: TypeHost},
		},
		{
			name: "duplicate host nameservers survive without dnsConfig",
			node: node, host: Host{Nameservers: []string{"192.0.2.1", "192.0.2.1"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: Default},
			want: Result{Nameservers: []string{"192.0.2.1", "192.0.2.1"}, Searches: []string{}, Options: []string{}, Hostname: "p", Type: TypeHost},
		},
		{
			name: "duplicate host nameservers are deduped with an empty dnsConfig",
			node: node, host: Host{Nameservers: []string{"192.0.2.1", "192.0.2.1"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, DNSConfig: &DNSConfig{}},
			want: Result{Nameservers: []string{"192.0.2.1"}, Searches: []string{}, Options: []string{}, Hostname: "p", Type: TypeHost},
		},
		{
			name: "resolvConf off: host-type pods get a loopback per node IP and search .",
			node: Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", NodeIPs: []string{"192.0.2.7", "2001:db8::7"}}, host: Host{Disabled: true},
			in:   Input{Name: "p", Namespace: "ns", Policy: Default},
			want: Result{Nameservers: []string{"127.0.0.1", "::1"}, Searches: []string{"."}, Options: []string{}, Hostname: "p", Type: TypeHost},
		},
		{
			name: "resolvConf off without node IPs: 127.0.0.1",
			node: node, host: Host{Disabled: true},
			in:   Input{Name: "p", Namespace: "ns", Policy: Default},
			want: Result{Nameservers: []string{"127.0.0.1"}, Searches: []string{"."}, Options: []string{}, Hostname: "p", Type: TypeHost},
		},
		{
			name: "resolvConf off: ClusterFirst still uses cluster searches without host ones",
			node: node, host: Host{Disabled: true},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns"), Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
		},
		{
			name: "autopath: one search path, cluster DNS, ndots:5",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: "ClusterFirstWithAutopath"},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: []string{"search.ns.cluster.local.ap.k8s.io"}, Options: []string{"ndots:5"}, Hostname: "p", Type: TypeAutopath},
		},
		{
			name: "autopath prefers the node-local DNS, dnsConfig merges on top",
			node: Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", NodeLocalDNS: []string{"169.254.20.10"}}, host: host,
			in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: "ClusterFirstWithAutopath",
				DNSConfig: &DNSConfig{Searches: []string{"extra.example"}, Options: []Option{{Name: "ndots", Value: ptr("3")}}}},
			want: Result{Nameservers: []string{"169.254.20.10"}, Searches: []string{"search.ns.cluster.local.ap.k8s.io", "extra.example"}, Options: []string{"ndots:3"}, Hostname: "p", Type: TypeAutopath},
		},
		{
			name: "autopath on ClusterFirstWithHostNet hostNetwork pod",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet, HostNetwork: true, PolicyAnnotation: "ClusterFirstWithAutopath"},
			want: Result{Nameservers: []string{"10.96.0.10"}, Searches: []string{"search.ns.cluster.local.ap.k8s.io"}, Options: []string{"ndots:5"}, Type: TypeAutopath},
		},
		{
			name: "autopath annotation ignored on Default",
			node: node, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: Default, PolicyAnnotation: "ClusterFirstWithAutopath"},
			want:    Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Hostname: "p", Type: TypeHost},
			reasons: []string{ReasonAutopathIgnored},
		},
		{
			name: "autopath annotation with an unknown value is ignored",
			node: node, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: "Autopath"},
			want:    Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
			reasons: []string{ReasonAutopathIgnored},
		},
		{
			name: "autopath without cluster domain stays ClusterFirst",
			node: Node{ClusterDNS: []string{"10.96.0.10"}}, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: "ClusterFirstWithAutopath"},
			want:    Result{Nameservers: []string{"10.96.0.10"}, Searches: []string{"corp.example.com"}, Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
			reasons: []string{ReasonAutopathIgnored},
		},
		{
			name: "autopath without any DNS falls back to the host",
			node: Node{ClusterDomain: "cluster.local"}, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: "ClusterFirstWithAutopath"},
			want:    Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Hostname: "p", Type: TypeHost},
			reasons: []string{ReasonMissingClusterDNS},
		},
		{
			name: "broken host config fails every policy, None included",
			node: node, host: Host{Err: errors.New("nameserver list is empty")},
			in:      Input{Name: "p", Namespace: "ns", Policy: None, DNSConfig: &DNSConfig{Nameservers: []string{"1.1.1.1"}}},
			wantErr: "nameserver list is empty",
		},
		{
			name: "hostname, subdomain and FQDN",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, Hostname: "h", Subdomain: "sub"},
			want: Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Hostname: "h", FQDN: "h.sub.ns.svc.cluster.local", Type: TypeHost},
		},
		{
			name: "setHostnameAsFQDN sets the FQDN as hostname",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, Hostname: "h", Subdomain: "sub", SetHostnameAsFQDN: true},
			want: Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Hostname: "h.sub.ns.svc.cluster.local", FQDN: "h.sub.ns.svc.cluster.local", Type: TypeHost},
		},
		{
			name: "setHostnameAsFQDN over 64 characters fails the sandbox",
			node: node, host: host,
			in:       Input{Name: "p", Namespace: "my-namespace", Policy: Default, Hostname: "busybox-1", Subdomain: "busybox-subdomain-long-enough-to-fail", SetHostnameAsFQDN: true},
			wantErr:  "is too long (64 characters is the max",
			errIsFQD: true,
		},
		{
			name: "long pod name is truncated to 63 and trailing dashes trimmed",
			node: node, host: host,
			in:      Input{Name: strings.Repeat("a", 62) + "-b", Namespace: "ns", Policy: Default},
			want:    Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Hostname: strings.Repeat("a", 62), Type: TypeHost},
			reasons: []string{ReasonHostnameTruncated},
		},
		{
			name: "hostnameOverride wins and drops the domain",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, Hostname: "h", Subdomain: "sub", HostnameOverride: ptr("my.host")},
			want: Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Hostname: "my.host", Type: TypeHost},
		},
		{
			name: "invalid spec.hostname fails as kubelet does",
			node: node, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: Default, Hostname: "Bad_Host"},
			wantErr: `pod Hostname "Bad_Host" is not a valid DNS label`,
		},
		{
			name: "hostNetwork pods skip hostname checks",
			node: node, host: host,
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, HostNetwork: true, Hostname: "Bad_Host", Subdomain: "s", SetHostnameAsFQDN: true},
			want: Result{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com"}, Options: []string{"timeout:2", "attempts:3"}, Type: TypeHost},
		},
		{
			name: "windows node warns that options have no effect",
			node: Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", OS: "windows"}, host: host,
			in:      Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want:    Result{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots:5"}, Hostname: "p", Type: TypeCluster},
			reasons: []string{ReasonWindowsOptionsIgnored},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Compute(tc.in, tc.host)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
				}
				var tl *fqdn.TooLongError
				if errors.As(err, &tl) != tc.errIsFQD {
					t.Errorf("errors.As TooLongError = %v, want %v", !tc.errIsFQD, tc.errIsFQD)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var reasons []string
			for _, w := range got.Warnings {
				reasons = append(reasons, w.Reason)
			}
			if !reflect.DeepEqual(reasons, tc.reasons) {
				t.Errorf("warnings = %v, want reasons %v", got.Warnings, tc.reasons)
			}
			got.Warnings = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestEngineNodeWarnings(t *testing.T) {
	e, err := New(Node{ClusterDNS: []string{"10.96.0.10", "bogus", "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(e.Warnings()); got != 2 {
		t.Fatalf("warnings = %v, want 2", e.Warnings())
	}
	if got := e.clusterDNS; !reflect.DeepEqual(got, []string{"10.96.0.10"}) {
		t.Errorf("ClusterDNS = %v", got)
	}
	if _, err := New(Node{OS: "plan9"}); err == nil || !strings.Contains(err.Error(), `"plan9"`) {
		t.Errorf("New(plan9) err = %v", err)
	}
}

func TestResultDoesNotAliasEngine(t *testing.T) {
	e, _ := New(node)
	r, _ := e.Compute(Input{Name: "p", Namespace: "ns", Policy: ClusterFirst}, host)
	grown := append(r.Nameservers, "appended")
	_ = append(r.Searches, "appended")
	if r.Searches[0] != "ns.svc.cluster.local" || r.Options[0] != "ndots:5" || len(grown) != 2 {
		t.Fatalf("appending to one list changed another: %v %v", r.Searches, r.Options)
	}
	r.Nameservers[0] = "mutated"
	r.Options[0] = "mutated"
	r2, _ := e.Compute(Input{Name: "p", Namespace: "ns", Policy: ClusterFirst}, host)
	if r2.Nameservers[0] != "10.96.0.10" || r2.Options[0] != "ndots:5" {
		t.Fatalf("engine state changed by a caller: %v %v", r2.Nameservers, r2.Options)
	}
	h := Host{Nameservers: []string{"192.0.2.1", "192.0.2.1"}}
	r3, _ := e.Compute(Input{Name: "p", Policy: Default, DNSConfig: &DNSConfig{}}, h)
	if len(r3.Nameservers) != 1 || h.Nameservers[1] != "192.0.2.1" {
		t.Fatalf("host config changed by dedup: %v", h.Nameservers)
	}
}

func TestOmitDuplicates(t *testing.T) {
	for _, n := range []int{0, 1, 5, 64, 65, 200} {
		var in, want []string
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("d%d.example", i%(n/2+1))
			in = append(in, v)
			if i <= n/2 {
				want = append(want, v)
			}
		}
		in = append(in, "Case.example", "case.example")
		want = append(want, "Case.example", "case.example")
		if got := omitDuplicates(in); !reflect.DeepEqual(got, want) {
			t.Errorf("n=%d: got %d entries, want %d", n, len(got), len(want))
		}
	}
}
