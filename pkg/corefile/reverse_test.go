package corefile

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestReverseZoneNames: CoreDNS's reverse zones of a CIDR (plugin.
// SplitHostPort: cidr.Split then cidr.Reverse), written out by hand.
func TestReverseZoneNames(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		want []string
	}{
		{"10.0.0.0/24", []string{"0.0.10.in-addr.arpa."}},
		{"10.0.0.7/24", []string{"0.0.10.in-addr.arpa."}},
		{"10.0.0.0/8", []string{"10.in-addr.arpa."}},
		{"192.168.0.0/23", []string{"0.168.192.in-addr.arpa.", "1.168.192.in-addr.arpa."}},
		{"172.16.0.0/14", []string{"16.172.in-addr.arpa.", "17.172.in-addr.arpa.", "18.172.in-addr.arpa.", "19.172.in-addr.arpa."}},
		{"10.255.255.0/25", []string{"0.255.255.10.in-addr.arpa.", "1.255.255.10.in-addr.arpa.", "2.255.255.10.in-addr.arpa.", "3.255.255.10.in-addr.arpa." /* … */}},
		{"0.0.0.0/0", []string{"in-addr.arpa."}},
		{"fd00::/108", []string{strings.Repeat("0.", 25) + "d.f.ip6.arpa."}},
		{"2001:db8::/30", []string{"8.b.d.0.1.0.0.2.ip6.arpa.", "9.b.d.0.1.0.0.2.ip6.arpa.", "a.b.d.0.1.0.0.2.ip6.arpa.", "b.b.d.0.1.0.0.2.ip6.arpa."}},
	} {
		t.Run(tc.cidr, func(t *testing.T) {
			p, ok, bad := cidrZone(tc.cidr)
			if !ok || bad {
				t.Fatalf("cidrZone(%q): ok %v, bad %v", tc.cidr, ok, bad)
			}
			var got []string
			for _, n := range splitCIDR(p) {
				got = append(got, reverseZoneName(n))
			}
			if !slices.Equal(got[:min(len(got), len(tc.want))], tc.want) {
				t.Fatalf("zones %v, want %v", got, tc.want)
			}
			if tc.cidr == "10.255.255.0/25" && (len(got) != 128 || got[127] != "127.255.255.10.in-addr.arpa.") {
				t.Fatalf("%d zones, last %s", len(got), got[len(got)-1])
			}
		})
	}
	for _, z := range []string{"cluster.local", "in-addr.arpa", "10.0.0.0", "10.0.0.0/33"} {
		if _, ok, _ := cidrZone(z); ok {
			t.Errorf("cidrZone(%q): a CIDR", z)
		}
	}
	for _, z := range []string{"::/0", "0::/64"} {
		if _, _, bad := cidrZone(z); !bad {
			t.Errorf("cidrZone(%q): not refused as CoreDNS refuses it", z)
		}
	}
}

// TestKubernetesCIDRZones: a kubernetes plugin's CIDR zones (kubernetes
// cluster.local 10.0.0.0/24; RKE1's reverse CIDRs, coredns/deployment's
// REVERSE_CIDRS) are reverse zones: reverseZones, unless its fallthrough
// passes their names on; without an in-addr.arpa or ip6.arpa zone they
// are the reverseScope too. Exit 0.
func TestKubernetesCIDRZones(t *testing.T) {
	for _, tc := range []struct {
		name, kube   string
		zones, scope []string
		report       []string
	}{
		{"one", "kubernetes cluster.local 10.0.0.0/24", []string{"10.0.0.0/24"}, []string{"10.0.0.0/24"},
			[]string{"converted  clusterDomain cluster.local, 10.0.0.0/24: reverseZones 10.0.0.0/24 (CoreDNS's zones 0.0.10.in-addr.arpa.; their unknown names NXDOMAIN)",
				"reverseScope 10.0.0.0/24 (the reverse names of Services and pods outside it forwarded"}},
		{"not octet aligned", "kubernetes cluster.local 10.96.0.0/12", []string{"10.96.0.0/16", "10.97.0.0/16", "10.98.0.0/16", "10.99.0.0/16",
			"10.100.0.0/16", "10.101.0.0/16", "10.102.0.0/16", "10.103.0.0/16", "10.104.0.0/16", "10.105.0.0/16", "10.106.0.0/16",
			"10.107.0.0/16", "10.108.0.0/16", "10.109.0.0/16", "10.110.0.0/16", "10.111.0.0/16"}, []string{"10.96.0.0/12"},
			[]string{"10.96.0.0/12: reverseZones 10.96.0.0/16 … 10.111.0.0/16 (16) (CoreDNS's zones 96.10.in-addr.arpa. … 111.10.in-addr.arpa. (16)"}},
		{"ipv6 and whole zones", "kubernetes cluster.local fd00:10:96::/112 10.0.0.0/24 in-addr.arpa ip6.arpa", []string{"fd00:10:96::/112", "10.0.0.0/24"}, nil,
			[]string{"reverse names of no Service or pod are forwarded; CoreDNS answers them NXDOMAIN without fallthrough"}},
		// coredns/deployment's template with REVERSE_CIDRS and its fallthrough.
		{"fallthrough", "kubernetes cluster.local 10.96.0.0/16 172.16.0.0/16 {\n fallthrough in-addr.arpa ip6.arpa\n}", nil, []string{"10.96.0.0/16", "172.16.0.0/16"},
			[]string{"reverse zones 96.10.in-addr.arpa. 16.172.in-addr.arpa.: names of no Service or pod forwarded, as its fallthrough passes them on"}},
		{"fallthrough a CIDR", "kubernetes cluster.local 10.96.0.0/16 172.16.0.0/16 {\n fallthrough 10.96.0.0/16\n}", []string{"172.16.0.0/16"}, []string{"10.96.0.0/16", "172.16.0.0/16"}, nil},
		{"twice", "kubernetes cluster.local 10.0.0.0/24 10.0.0.9/24", []string{"10.0.0.0/24"}, []string{"10.0.0.0/24"}, nil},
		{"ignored", "kubernetes cluster.local 0::/64", nil, nil, []string{"0::/64: an invalid CIDR, which CoreDNS ignores: no zone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(".:53 {\n" + tc.kube + "\nforward . 192.0.2.1\n}\n")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Config.ReverseZones, tc.zones) {
				t.Errorf("reverseZones %v, want %v", r.Config.ReverseZones, tc.zones)
			}
			if !slices.Equal(r.Config.ReverseScope, tc.scope) {
				t.Errorf("reverseScope %v, want %v", r.Config.ReverseScope, tc.scope)
			}
			if r.Config.ClusterDomain != "cluster.local" || AnyDropped(r.Findings) {
				t.Errorf("clusterDomain %q, dropped %v", r.Config.ClusterDomain, AnyDropped(r.Findings))
			}
			var b strings.Builder
			WriteReport(&b, r.Findings)
			for _, w := range tc.report {
				if !strings.Contains(b.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, b.String())
				}
			}
			for _, z := range r.Config.ReverseZones {
				if _, err := netip.ParsePrefix(z); err != nil {
					t.Error(err)
				}
			}
		})
	}
	_, err := Run(t.Context(), Input{Name: "Corefile", Text: []byte(".:53 {\nkubernetes 10.0.0.0/24 in-addr.arpa\n}\n")}, nil)
	if err == nil || err.Error() != "Corefile:2: kubernetes: non-reverse zone name must be used (CoreDNS refuses it too)" {
		t.Errorf("only reverse zones: err %v", err)
	}
}
