package policy

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// compact writes a decision as "step rule +added... -removed...".
func compact(d Decision) string {
	s := d.Step + " " + d.Rule
	for _, a := range d.Added {
		s += " +" + a
	}
	for _, r := range d.Removed {
		s += " -" + r
	}
	return s
}

func TestTrace(t *testing.T) {
	autopath := string(ClusterFirstWithAutopath)
	clusterBase := func(ns string, hostSearches ...string) []string {
		s := "searches base.cluster.searches +" + ns + ".svc.cluster.local +svc.cluster.local +cluster.local"
		for _, h := range hostSearches {
			s += " +" + h
		}
		return []string{"nameservers base.cluster.nameservers +10.96.0.10", s, "options base.cluster.options +ndots:5"}
	}
	hostBase := []string{"nameservers base.host.nameservers +192.0.2.1 +192.0.2.2", "searches base.host.searches +corp.example.com", "options base.host.options +timeout:2 +attempts:3"}
	podName := []string{"hostname hostname.podname +p", "fqdn fqdn.none"}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	long := strings.Repeat("x", 254)
	autopathBase := []string{"nameservers base.autopath.nameservers +10.96.0.10", "searches base.autopath.searches +search.ns.cluster.local.ap.k8s.io", "options base.autopath.options +ndots:5"}
	withDefaults := func(p Policy, ndots *int) *Node {
		n := node
		n.DefaultPolicy, n.Ndots = p, ndots
		return &n
	}
	two, three := 2, "3"

	tests := []struct {
		name    string
		node    *Node // default: node
		host    *Host // default: host
		in      Input
		want    []string // compact decisions
		detail  string   // a substring of some Detail
		wantErr bool
	}{
		{
			name: "ClusterFirst",
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: cat([]string{"policy policy.clusterfirst"}, clusterBase("ns", "corp.example.com"), podName),
		},
		{
			name: "ClusterFirstWithHostNet on the host network",
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet, HostNetwork: true},
			want: cat([]string{"policy policy.clusterfirstwithhostnet"}, clusterBase("ns", "corp.example.com"), []string{"hostname hostname.hostnetwork"}),
		},
		{
			name: "Default names the node file",
			host: &Host{Nameservers: host.Nameservers, Searches: host.Searches, Options: host.Options, Source: "/etc/resolv.conf"},
			in:   Input{Name: "p", Namespace: "ns", Policy: Default},
			want: cat([]string{"policy policy.default"}, hostBase, podName), detail: `the last search line of the node's resolver config "/etc/resolv.conf"`,
		},
		{
			name: "None takes the dnsConfig alone",
			in: Input{Name: "p", Namespace: "ns", Policy: None, DNSConfig: &DNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
				Options: []Option{{Name: "ndots", Value: ptr("1")}}}},
			want: cat([]string{"policy policy.none", "nameservers dnsconfig.nameservers +1.1.1.1", "searches dnsconfig.searches +a.example", "options dnsconfig.options +ndots:1"}, podName),
		},
		{
			name: "ClusterFirst on the host network falls back to Default",
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, HostNetwork: true},
			want: cat([]string{"policy policy.fallback.hostnetwork"}, hostBase, []string{"hostname hostname.hostnetwork"}), detail: `use "ClusterFirstWithHostNet"`,
		},
		{
			name: "no cluster DNS falls back to the host",
			node: &Node{ClusterDomain: "cluster.local"},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: cat([]string{"policy policy.clusterfirst", "policy policy.fallback.noclusterdns"}, hostBase, podName),
		},
		{
			name: "an unknown dnsPolicy is ClusterFirst",
			in:   Input{Name: "p", Namespace: "ns", Policy: "Bogus"},
			want: cat([]string{"policy policy.fallback.invalid"}, clusterBase("ns", "corp.example.com"), podName), detail: "invalid DNSPolicy=Bogus",
		},
		{
			name: "an invalid clusterDNS entry is skipped first",
			node: &Node{ClusterDNS: []string{"bogus", "10.96.0.10"}, ClusterDomain: "cluster.local"},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: cat([]string{"node node.ip.invalid -bogus", "policy policy.clusterfirst"}, clusterBase("ns", "corp.example.com"), podName),
		},
		{
			name: "no cluster domain: the host searches alone",
			node: &Node{ClusterDNS: []string{"10.96.0.10"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: cat([]string{"policy policy.clusterfirst", "nameservers base.cluster.nameservers +10.96.0.10", "searches base.cluster.searches.nodomain +corp.example.com", "options base.cluster.options +ndots:5"}, podName),
		},
		{
			name: "a host search equal to a cluster domain is a duplicate",
			host: &Host{Searches: []string{"cluster.local", "corp.example.com"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: cat([]string{"policy policy.clusterfirst", "nameservers base.cluster.nameservers +10.96.0.10",
				"searches base.cluster.searches +ns.svc.cluster.local +svc.cluster.local +cluster.local +cluster.local +corp.example.com",
				"searches merge.duplicates -cluster.local", "options base.cluster.options +ndots:5"}, podName),
		},
		{
			name: "resolvConf off",
			node: &Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", NodeIPs: []string{"192.0.2.10", "2001:db8::10"}},
			host: &Host{Disabled: true},
			in:   Input{Name: "p", Namespace: "ns", Policy: Default},
			want: cat([]string{"policy policy.default", "nameservers base.host.disabled +127.0.0.1 +::1", "searches base.host.disabled +."}, podName),
		},
		{
			name: "loopback nameservers of the node are dropped",
			host: &Host{Nameservers: []string{"127.0.0.53", "192.0.2.1"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: Default},
			want: cat([]string{"policy policy.default", "nameservers base.host.nameservers +127.0.0.53 +192.0.2.1", "nameservers base.host.loopback -127.0.0.53",
				"searches base.host.searches", "options base.host.options"}, podName),
		},
		{
			name: "a hostNetwork pod keeps the node's loopback nameservers",
			host: &Host{Nameservers: []string{"127.0.0.53", "192.0.2.1"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, HostNetwork: true},
			want: []string{"policy policy.default", "nameservers base.host.nameservers +127.0.0.53 +192.0.2.1", "nameservers base.host.loopback.hostnetwork",
				"searches base.host.searches", "options base.host.options", "hostname hostname.hostnetwork"},
			detail: "shares the node's network namespace",
		},
		{
			name: "unusable node file",
			host: &Host{Err: errors.New("line 1: nameserver list is empty")},
			in:   Input{Name: "p", Namespace: "ns", Policy: None},
			want: []string{"node node.resolvconf.unusable"}, detail: "nameserver list is empty", wantErr: true,
		},
		{
			name: "dnsConfig appended, duplicates omitted, options merged by name",
			in: Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Nameservers: []string{"10.96.0.10", "1.1.1.1"},
				Searches: []string{"corp.example.com", "extra.example"}, Options: []Option{{Name: "ndots", Value: ptr("2")}, {Name: "edns0"}}}},
			want: cat([]string{"policy policy.clusterfirst"}, clusterBase("ns", "corp.example.com"), []string{
				"nameservers dnsconfig.nameservers +10.96.0.10 +1.1.1.1", "nameservers merge.duplicates -10.96.0.10",
				"searches dnsconfig.searches +corp.example.com +extra.example", "searches merge.duplicates -corp.example.com",
				"options dnsconfig.options +ndots:2 +edns0", "options merge.options.override +ndots:2 -ndots:5"}, podName),
		},
		{
			name: "a later pod option overrides an earlier one",
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, DNSConfig: &DNSConfig{Options: []Option{{Name: "timeout", Value: ptr("1")}, {Name: "timeout", Value: ptr("5")}}}},
			want: cat([]string{"policy policy.default"}, hostBase, []string{"options dnsconfig.options +timeout:1 +timeout:5",
				"options merge.options.override +timeout:1 -timeout:2", "options merge.options.override +timeout:5 -timeout:1"}, podName),
		},
		{
			name: "a pod option name holding a value replaces nothing",
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Options: []Option{{Name: "ndots:3"}}}},
			want: cat([]string{"policy policy.clusterfirst"}, clusterBase("ns", "corp.example.com"), []string{"options dnsconfig.options +ndots:3", "options merge.options.colonname"}, podName),
		},
		{
			name: "a base option with an empty value is normalized in the merge",
			host: &Host{Options: []string{"ndots:"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, DNSConfig: &DNSConfig{Options: []Option{{Name: "edns0"}}}},
			want: cat([]string{"policy policy.default", "nameservers base.host.nameservers", "searches base.host.searches", "options base.host.options +ndots:",
				"options dnsconfig.options +edns0", "options merge.options.normalize +ndots -ndots:"}, podName),
		},
		{
			name: "nameserver limit",
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}}},
			want: cat([]string{"policy policy.clusterfirst"}, clusterBase("ns", "corp.example.com"), []string{
				"nameservers dnsconfig.nameservers +1.1.1.1 +8.8.8.8 +9.9.9.9", "nameservers limit.nameservers -9.9.9.9"}, podName),
		},
		{
			name: "search count limit",
			host: &Host{Searches: domains(29, 20)},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Searches: []string{"a.example", "b.example"}}},
			want: cat([]string{"policy policy.clusterfirst"}, clusterBase("ns", domains(29, 20)...), []string{
				"searches dnsconfig.searches +a.example +b.example", "searches limit.searches.count -a.example -b.example"}, podName),
		},
		{
			name: "search length limit",
			host: &Host{Searches: []string{"corp.example.com"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Searches: []string{long, "a.example"}}},
			want: cat([]string{"policy policy.clusterfirst"}, clusterBase("ns", "corp.example.com"), []string{
				"searches dnsconfig.searches +" + long + " +a.example", "searches limit.searches.length -" + long}, podName),
		},
		{
			// 52 characters of cluster domains, then 20 of 121 with the space: 2472, over 2048 by 424, so 4 go.
			name: "search characters limit",
			host: &Host{Searches: domains(20, 120)},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: cat([]string{"policy policy.clusterfirst"}, clusterBase("ns", domains(20, 120)...), []string{
				"searches limit.searches.chars -" + strings.Join(domains(20, 120)[16:], " -")}, podName),
		},
		{
			name: "Windows ignores options",
			node: &Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", OS: "windows"},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst},
			want: cat([]string{"policy policy.clusterfirst"}, clusterBase("ns", "corp.example.com"), []string{"options node.windows.options"}, podName),
		},
		{
			name: "autopath with the cluster DNS",
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: autopath},
			want: cat([]string{"policy policy.clusterfirst", "policy policy.autopath", "policy autopath.source.annotation", "nameservers base.autopath.nameservers +10.96.0.10",
				"searches base.autopath.searches +search.ns.cluster.local.ap.k8s.io", "options base.autopath.options +ndots:5"}, podName),
		},
		{
			name: "autopath with the node-local DNS",
			node: &Node{ClusterDNS: []string{"10.96.0.10"}, NodeLocalDNS: []string{"169.254.20.10"}, ClusterDomain: "cluster.local"},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet, HostNetwork: true, PolicyAnnotation: autopath},
			want: []string{"policy policy.clusterfirstwithhostnet", "policy policy.autopath", "policy autopath.source.annotation", "nameservers base.autopath.nameservers +169.254.20.10",
				"searches base.autopath.searches +search.ns.cluster.local.ap.k8s.io", "options base.autopath.options +ndots:5", "hostname hostname.hostnetwork"},
			detail: "the node-local DNS",
		},
		{
			name: "autopath without a cluster DNS falls back to the host",
			node: &Node{ClusterDomain: "cluster.local"},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: autopath},
			want: cat([]string{"policy policy.clusterfirst", "policy policy.autopath", "policy autopath.source.annotation", "policy policy.fallback.noclusterdns"}, hostBase, podName),
		},
		{
			name: "autopath ignored with dnsPolicy Default",
			in:   Input{Name: "p", Namespace: "ns", Policy: Default, PolicyAnnotation: autopath},
			want: cat([]string{"policy policy.default", "policy policy.autopath.ignored"}, hostBase, podName), detail: `ignored with dnsPolicy "Default"`,
		},
		{
			name: "autopath ignored without a cluster domain",
			node: &Node{ClusterDNS: []string{"10.96.0.10"}},
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: autopath},
			want: cat([]string{"policy policy.clusterfirst", "policy policy.autopath.ignored", "nameservers base.cluster.nameservers +10.96.0.10",
				"searches base.cluster.searches.nodomain +corp.example.com", "options base.cluster.options +ndots:5"}, podName),
		},
		{
			name: "an unsupported annotation value is ignored",
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: "Autopath"},
			want: cat([]string{"policy policy.clusterfirst", "policy policy.autopath.ignored"}, clusterBase("ns", "corp.example.com"), podName),
		},
		{
			name:   "autopath from the namespace label",
			in:     Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, NamespacePolicy: autopath},
			want:   cat([]string{"policy policy.clusterfirst", "policy policy.autopath", "policy autopath.source.namespace-label"}, autopathBase, podName),
			detail: `of namespace "ns"`,
		},
		{
			name: "autopath from the cluster default",
			node: withDefaults(ClusterFirstWithAutopath, nil),
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirstWithHostNet},
			want: cat([]string{"policy policy.clusterfirstwithhostnet", "policy policy.autopath", "policy autopath.source.cluster-default"}, autopathBase, podName),
		},
		{
			name: "the annotation opts out of the cluster default",
			node: withDefaults(ClusterFirstWithAutopath, nil),
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, PolicyAnnotation: "ClusterFirst", NamespacePolicy: autopath},
			want: cat([]string{"policy policy.clusterfirst", "policy autopath.optout.annotation"}, clusterBase("ns", "corp.example.com"), podName),
		},
		{
			name: "the namespace label opts out of the cluster default",
			node: withDefaults(ClusterFirstWithAutopath, nil),
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, NamespacePolicy: "ClusterFirst"},
			want: cat([]string{"policy policy.clusterfirst", "policy autopath.optout.namespace-label"}, clusterBase("ns", "corp.example.com"), podName),
		},
		{
			name:   "the cluster default leaves a Default pod alone",
			node:   withDefaults(ClusterFirstWithAutopath, nil),
			in:     Input{Name: "p", Namespace: "ns", Policy: Default},
			want:   cat([]string{"policy policy.default", "policy autopath.default.notapplicable"}, hostBase, podName),
			detail: "only ClusterFirst pods are",
		},
		{
			name:   "an unsupported namespace label value is ignored",
			in:     Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, NamespacePolicy: "Autopath"},
			want:   cat([]string{"policy policy.clusterfirst", "policy policy.autopath.ignored"}, clusterBase("ns", "corp.example.com"), podName),
			detail: `label dnsconfigurer.io/dns-policy of namespace "ns"`,
		},
		{
			name: "the cluster ndots default, overridden by the pod",
			node: withDefaults("", &two),
			in:   Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Options: []Option{{Name: "ndots", Value: &three}}}},
			want: cat([]string{"policy policy.clusterfirst"}, clusterBase("ns", "corp.example.com"),
				[]string{"options options.ndots.cluster-default +ndots:2 -ndots:5", "options dnsconfig.options +ndots:3", "options merge.options.override +ndots:3 -ndots:2"}, podName),
		},
		{
			name: "spec.hostname, subdomain and setHostnameAsFQDN",
			in:   Input{Name: "p", Namespace: "ns", Policy: None, Hostname: "h", Subdomain: "s", SetHostnameAsFQDN: true},
			want: []string{"policy policy.none", "hostname hostname.spec +h", "fqdn fqdn.subdomain +h.s.ns.svc.cluster.local", "hostname hostname.fqdn +h.s.ns.svc.cluster.local -h"},
		},
		{
			name: "setHostnameAsFQDN without a subdomain",
			in:   Input{Name: "p", Namespace: "ns", Policy: None, SetHostnameAsFQDN: true},
			want: []string{"policy policy.none", "hostname hostname.podname +p", "fqdn fqdn.none", "hostname hostname.fqdn.nodomain"},
		},
		{
			// 42 + 1 + 22 = 65 characters.
			name: "setHostnameAsFQDN over 64 characters fails",
			in:   Input{Name: "p", Namespace: "ns", Policy: None, Hostname: strings.Repeat("h", 42), Subdomain: "s", SetHostnameAsFQDN: true},
			want: []string{"policy policy.none", "hostname hostname.spec +" + strings.Repeat("h", 42), "fqdn fqdn.subdomain +" + strings.Repeat("h", 42) + ".s.ns.svc.cluster.local",
				"hostname hostname.fqdn.toolong -" + strings.Repeat("h", 42)},
			detail: "the FQDN is 65 characters", wantErr: true,
		},
		{
			name: "hostnameOverride",
			in:   Input{Name: "p", Namespace: "ns", Policy: None, Subdomain: "s", HostnameOverride: ptr("over.ride")},
			want: []string{"policy policy.none", "hostname hostname.override +over.ride", "fqdn fqdn.none"}, detail: "spec.hostnameOverride: no FQDN",
		},
		{
			name:   "kubelet 1.34 ignores hostnameOverride",
			node:   &Node{ClusterDNS: node.ClusterDNS, ClusterDomain: node.ClusterDomain, KubeletVersion: "v1.34.4"},
			in:     Input{Name: "p", Namespace: "ns", Policy: None, Subdomain: "s", HostnameOverride: ptr("over.ride")},
			want:   []string{"policy policy.none", "hostname hostname.override.ignored -over.ride", "hostname hostname.podname +p", "fqdn fqdn.subdomain +p.s.ns.svc.cluster.local"},
			detail: "feature gate HostnameOverride is off before 1.35",
		},
		{
			name: "a long pod name is truncated",
			in:   Input{Name: strings.Repeat("a", 64), Namespace: "ns", Policy: None},
			want: []string{"policy policy.none", "hostname hostname.podname +" + strings.Repeat("a", 64), "hostname hostname.truncate +" + strings.Repeat("a", 63) + " -" + strings.Repeat("a", 64), "fqdn fqdn.none"},
		},
		{
			name: "an invalid hostname fails",
			in:   Input{Name: "p", Namespace: "ns", Policy: None, Hostname: "Bad"},
			want: []string{"policy policy.none", "hostname hostname.invalid"}, detail: `pod Hostname "Bad" is not a valid DNS label`, wantErr: true,
		},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, h := node, host
			if tc.node != nil {
				n = *tc.node
			}
			if tc.host != nil {
				h = *tc.host
			}
			e, err := New(n)
			if err != nil {
				t.Fatal(err)
			}
			r, tr, err := e.ComputeExplained(tc.in, h)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			var got, details []string
			for _, d := range tr {
				got = append(got, compact(d))
				details = append(details, d.Detail)
				seen[d.Rule] = true
				if d.Step == "" || d.Rule == "" || d.Detail == "" {
					t.Errorf("incomplete decision %+v", d)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("trace:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if !strings.Contains(strings.Join(details, "\n"), tc.detail) {
				t.Errorf("no detail contains %q:\n%s", tc.detail, strings.Join(details, "\n"))
			}
			// Explaining changes nothing.
			plain, perr := e.Compute(tc.in, h)
			if !reflect.DeepEqual(plain, r) || !reflect.DeepEqual(perr, err) {
				t.Errorf("Compute = %+v, %v; ComputeExplained = %+v, %v", plain, perr, r, err)
			}
		})
	}
	t.Run("every rule is documented at Trace and tested here", func(t *testing.T) {
		src, err := os.ReadFile("trace.go")
		if err != nil {
			t.Fatal(err)
		}
		documented := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^//\t([a-z]+(?:\.[a-z-]+)+)\s`).FindAllStringSubmatch(string(src), -1) {
			documented[m[1]] = true
		}
		for r := range seen {
			if !documented[r] {
				t.Errorf("rule %q is not in the table at Trace", r)
			}
		}
		for r := range documented {
			if !seen[r] {
				t.Errorf("rule %q of the table at Trace is not tested", r)
			}
		}
	})
}

// The trace owns its lists: a caller may keep them while the engine reuses
// its own, and editing a trace does not edit the result.
func TestTraceCopies(t *testing.T) {
	e, _ := New(node)
	r, tr, err := e.ComputeExplained(Input{Name: "p", Namespace: "ns", Policy: ClusterFirst}, host)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range tr {
		for i := range d.Added {
			d.Added[i] = "edited"
		}
	}
	if slices.Contains(r.Nameservers, "edited") || slices.Contains(r.Searches, "edited") || slices.Contains(r.Options, "edited") {
		t.Errorf("result shares memory with the trace: %+v", r)
	}
	// The engine's node decisions are copied for each call too.
	bad, _ := New(Node{ClusterDNS: []string{"bogus"}})
	_, t1, _ := bad.ComputeExplained(Input{Name: "p", Policy: None}, host)
	t1[0].Rule = "edited"
	_, t2, _ := bad.ComputeExplained(Input{Name: "p", Policy: None}, host)
	if t2[0].Rule != "node.ip.invalid" {
		t.Errorf("second trace starts with %+v", t2[0])
	}
}

// Compute records no trace: its allocations are the result's alone.
func TestComputeAllocs(t *testing.T) {
	e, _ := New(node)
	in := Input{Name: "web-0", Namespace: "shop", Policy: ClusterFirst}
	if n := testing.AllocsPerRun(100, func() { e.Compute(in, host) }); n > 2 {
		t.Errorf("Compute allocates %v times, want at most 2 (the namespace search and the result's lists)", n)
	}
}

// TestTraceHostLines: with the lines of the node's file known, the
// decisions that take from it name them; without, they name the file only.
func TestTraceHostLines(t *testing.T) {
	e, _ := New(node)
	h := host
	h.Source = "/etc/resolv.conf"
	h.Lines = resolvconf.Lines{Nameservers: []int{1, 2}, Search: 4, Options: []int{5}}
	tests := []struct {
		name   string
		policy Policy
		host   Host
		want   map[string]string // rule -> the end of its detail
	}{
		{"default", Default, h, map[string]string{
			"base.host.nameservers": `"/etc/resolv.conf" (lines 1, 2)`,
			"base.host.searches":    `"/etc/resolv.conf" (line 4)`,
			"base.host.options":     `"/etc/resolv.conf" (line 5)`,
		}},
		{"clusterfirst", ClusterFirst, h, map[string]string{"base.cluster.searches": `"/etc/resolv.conf" (line 4)`}},
		{"lines unknown", Default, Host{Nameservers: h.Nameservers, Searches: h.Searches, Options: h.Options, Source: h.Source},
			map[string]string{"base.host.nameservers": `"/etc/resolv.conf"`, "base.host.searches": `"/etc/resolv.conf"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, tr, err := e.ComputeExplained(Input{Name: "p", Namespace: "ns", Policy: tc.policy}, tc.host)
			if err != nil {
				t.Fatal(err)
			}
			for rule, suffix := range tc.want {
				found := false
				for _, d := range tr {
					if d.Rule == rule {
						found = true
						if !strings.HasSuffix(d.Detail, suffix) {
							t.Errorf("%s: detail %q, want it to end %q", rule, d.Detail, suffix)
						}
					}
				}
				if !found {
					t.Errorf("no %s decision in %+v", rule, tr)
				}
			}
		})
	}
}

// TestTraceForms: the comment form numbers each decision with its lists;
// the JSON form writes missing lists as [].
func TestTraceForms(t *testing.T) {
	trace := Trace{
		{Step: "policy", Rule: "policy.clusterfirst", Detail: "the cluster DNS"},
		{Step: "searches", Rule: "limit.searches.count", Detail: "kept", Added: []string{"a", "b"}, Removed: []string{"c"}},
	}
	want := "# explain\n# 1. policy (policy.clusterfirst): the cluster DNS\n" +
		"# 2. searches (limit.searches.count): kept\n#      + a b\n#      - c\n"
	if got := trace.Comments(); got != want {
		t.Errorf("Comments:\n%s\nwant:\n%s", got, want)
	}
	if got := Trace(nil).Comments(); got != "" {
		t.Errorf("no trace: %q", got)
	}
	b, err := json.Marshal(trace[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"step":"policy","rule":"policy.clusterfirst","detail":"the cluster DNS","added":[],"removed":[]}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}
