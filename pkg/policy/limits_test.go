package policy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func domains(n, length int) []string {
	out := make([]string, n)
	for i := range out {
		s := fmt.Sprintf("d%d.", i)
		out[i] = s + strings.Repeat("x", length-len(s))
	}
	return out
}

func TestNameserverLimit(t *testing.T) {
	e, _ := New(node)
	tests := []struct {
		name    string
		pod     []string
		want    []string
		omitted []string
	}{
		{"cluster DNS plus 2 pod servers fits", []string{"1.1.1.1", "8.8.8.8"}, []string{"10.96.0.10", "1.1.1.1", "8.8.8.8"}, nil},
		{"cluster DNS plus 3 pod servers loses the third", []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}, []string{"10.96.0.10", "1.1.1.1", "8.8.8.8"}, []string{"9.9.9.9"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := computePod(t, e, ClusterFirst, &DNSConfig{Nameservers: tc.pod})
			if !reflect.DeepEqual(r.Nameservers, tc.want) {
				t.Errorf("nameservers = %v, want %v", r.Nameservers, tc.want)
			}
			w, ok := limitWarning(t, r, tc.omitted)
			if !ok {
				return
			}
			wantMsg := "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(tc.want, " ")
			if w.Reason != ReasonDNSConfigForming || w.Message != wantMsg || w.Limit != LimitNameservers || !reflect.DeepEqual(w.Omitted, tc.omitted) || w.Before != 4 {
				t.Errorf("warning = %+v", w)
			}
		})
	}
	t.Run("4 host nameservers are cut for Default but replaced for ClusterFirst without warning", func(t *testing.T) {
		h := Host{Nameservers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"}}
		r, _ := e.Compute(Input{Name: "p", Namespace: "ns", Policy: Default}, h)
		if len(r.Nameservers) != 3 || len(r.Warnings) != 1 {
			t.Errorf("Default: %v %v", r.Nameservers, r.Warnings)
		}
		r, _ = e.Compute(Input{Name: "p", Namespace: "ns", Policy: ClusterFirst}, h)
		if len(r.Nameservers) != 1 || len(r.Warnings) != 0 {
			t.Errorf("ClusterFirst: %v %v", r.Nameservers, r.Warnings)
		}
	})
}

func TestSearchLimits(t *testing.T) {
	e, _ := New(Node{ClusterDNS: []string{"10.96.0.10"}}) // no cluster domain: searches are exactly host+pod
	long254 := strings.Repeat("l", 254)
	ok253 := strings.Repeat("k", 253)
	tests := []struct {
		name     string
		searches []string
		want     []string
		omitted  []string
	}{
		{"32 entries kept", domains(32, 10), domains(32, 10), nil},
		{"33 entries cut to 32", domains(33, 10), domains(32, 10), domains(33, 10)[32:]},
		{"253-character entry kept", []string{"a.example", ok253}, []string{"a.example", ok253}, nil},
		{"254-character entry dropped whole, order kept", []string{"a.example", long254, "b.example"}, []string{"a.example", "b.example"}, []string{long254}},
		{"count cut happens before the length filter, leaving 31", append(domains(31, 10), long254, "z.example"), domains(31, 10), []string{"z.example", long254}},
		// 8 entries of 255? no: entries of 200 chars: 10 entries = 2009 chars; 11 = 2210.
		{"line of exactly 2048 characters kept", exact2048(), exact2048(), nil},
		{"line of 2049 characters loses whole entries from the end", append(exact2048()[:len(exact2048())-1], exact2048()[len(exact2048())-1]+"y"),
			exact2048()[:len(exact2048())-1], []string{exact2048()[len(exact2048())-1] + "y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := computePod(t, e, Default, &DNSConfig{Searches: tc.searches})
			if !reflect.DeepEqual(r.Searches, tc.want) {
				t.Errorf("searches = %d entries, want %d", len(r.Searches), len(tc.want))
			}
			if n := len(strings.Join(r.Searches, " ")); n > MaxSearchListChars {
				t.Errorf("line is %d characters", n)
			}
			w, ok := limitWarning(t, r, tc.omitted)
			if !ok {
				return
			}
			if w.Reason != ReasonDNSConfigForming || w.Limit != LimitSearches || w.Before != len(tc.searches) ||
				w.Message != "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: "+strings.Join(tc.want, " ") {
				t.Errorf("warning = %+v", w)
			}
			if !reflect.DeepEqual(sorted(w.Omitted), sorted(tc.omitted)) {
				t.Errorf("omitted = %v, want %v", w.Omitted, tc.omitted)
			}
		})
	}
	t.Run("nameserver and search limits both fire, in that order", func(t *testing.T) {
		r, _ := e.Compute(Input{Name: "p", Policy: Default, DNSConfig: &DNSConfig{Nameservers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"}, Searches: domains(33, 5)}}, Host{})
		if len(r.Warnings) != 2 || r.Warnings[0].Limit != LimitNameservers || r.Warnings[1].Limit != LimitSearches {
			t.Errorf("warnings = %+v", r.Warnings)
		}
	})
	t.Run("pod searches are the first cut after the cluster domains", func(t *testing.T) {
		e, _ := New(node)
		r, _ := e.Compute(Input{Name: "p", Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Searches: domains(30, 8)}}, Host{Searches: []string{"corp.example.com"}})
		if len(r.Searches) != 32 || r.Searches[3] != "corp.example.com" || !reflect.DeepEqual(r.Warnings[0].Omitted, domains(30, 8)[28:]) {
			t.Errorf("searches %v warnings %+v", r.Searches, r.Warnings)
		}
	})
}

// limitWarning fails t unless r has the one warning of a limit, or none
// when omitted is nil (then ok is false), and returns it.
func limitWarning(t *testing.T, r Result, omitted []string) (w Warning, ok bool) {
	t.Helper()
	if omitted == nil {
		if len(r.Warnings) != 0 {
			t.Errorf("unexpected warnings %v", r.Warnings)
		}
		return Warning{}, false
	}
	if len(r.Warnings) != 1 {
		t.Fatalf("warnings = %v", r.Warnings)
	}
	return r.Warnings[0], true
}

// exact2048 is a list whose space-joined line is exactly 2048 characters.
func exact2048() []string {
	s := domains(10, 200) // 2000 + 9 spaces = 2009
	s = append(s, strings.Repeat("e", 2048-2009-1))
	return s
}

func sorted(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

// TestDualStackNameservers: IPv6 and dual-stack clusterDNS (kubelet's
// --cluster-dns takes a list), the 3-nameserver limit counted across
// families, and host nameservers with a zone index, as kubelet has them.
func TestDualStackNameservers(t *testing.T) {
	dual := Node{ClusterDNS: []string{"10.96.0.10", "fd00:10:96::a"}, ClusterDomain: "cluster.local"}
	tests := []struct {
		name    string
		node    Node
		in      Input
		host    Host
		want    []string
		omitted []string
		invalid int // node warnings (skipped clusterDNS entries)
	}{
		{name: "IPv6-only cluster DNS", node: Node{ClusterDNS: []string{"fd00:10:96::a"}, ClusterDomain: "cluster.local"},
			in: Input{Policy: ClusterFirst}, host: host, want: []string{"fd00:10:96::a"}},
		{name: "dual-stack cluster DNS in kubelet's order", node: Node{ClusterDNS: []string{"fd00:10:96::a", "10.96.0.10"}, ClusterDomain: "cluster.local"},
			in: Input{Policy: ClusterFirst}, host: host, want: []string{"fd00:10:96::a", "10.96.0.10"}},
		{name: "dual-stack cluster DNS plus 2 pod servers: the limit of 3 counts both families", node: dual,
			in:   Input{Policy: ClusterFirst, DNSConfig: &DNSConfig{Nameservers: []string{"2001:db8::53", "192.0.2.53"}}},
			want: []string{"10.96.0.10", "fd00:10:96::a", "2001:db8::53"}, omitted: []string{"192.0.2.53"}},
		{name: "a clusterDNS entry with a zone index is invalid, as for kubelet's ParseIPSloppy",
			node: Node{ClusterDNS: []string{"fe80::1%eth0", "fd00:10:96::a"}, ClusterDomain: "cluster.local"},
			in:   Input{Policy: ClusterFirst}, host: host, want: []string{"fd00:10:96::a"}, invalid: 1},
		{name: "Default keeps a host nameserver's zone index verbatim (kubelet does not parse them)", node: dual,
			in: Input{Policy: Default}, host: Host{Nameservers: []string{"fe80::1%eth0", "2001:db8::1"}}, want: []string{"fe80::1%eth0", "2001:db8::1"}},
		{name: "Default: 4 host nameservers of both families are cut to 3", node: dual,
			in:   Input{Policy: Default},
			host: Host{Nameservers: []string{"fe80::1%eth0", "192.0.2.1", "2001:db8::1", "192.0.2.2"}},
			want: []string{"fe80::1%eth0", "192.0.2.1", "2001:db8::1"}, omitted: []string{"192.0.2.2"}},
		{name: "Default drops an IPv6 loopback stub in the pod's own namespace", node: dual,
			in: Input{Policy: Default}, host: Host{Nameservers: []string{"::1", "2001:db8::1"}}, want: []string{"2001:db8::1"}},
		{name: "ClusterFirst replaces IPv6 host nameservers", node: dual,
			in: Input{Policy: ClusterFirst}, host: Host{Nameservers: []string{"fe80::1%eth0", "2001:db8::1", "2001:db8::2", "2001:db8::3"}},
			want: []string{"10.96.0.10", "fd00:10:96::a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(e.Warnings()); got != tc.invalid {
				t.Errorf("node warnings = %v, want %d", e.Warnings(), tc.invalid)
			}
			tc.in.Name, tc.in.Namespace = "p", "ns"
			r, err := e.Compute(tc.in, tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Nameservers, tc.want) {
				t.Errorf("nameservers = %v, want %v", r.Nameservers, tc.want)
			}
			var omitted []string
			for _, w := range r.Warnings {
				if w.Limit == LimitNameservers {
					omitted = w.Omitted
				}
			}
			if !reflect.DeepEqual(omitted, tc.omitted) {
				t.Errorf("omitted = %v, want %v (warnings %+v)", omitted, tc.omitted, r.Warnings)
			}
		})
	}
}

// computePod is e's result for pod p of namespace ns with policy and the
// pod's dnsConfig dc, on a node without a host config.
func computePod(t *testing.T, e *Engine, policy Policy, dc *DNSConfig) Result {
	t.Helper()
	r, err := e.Compute(Input{Name: "p", Namespace: "ns", Policy: policy, DNSConfig: dc}, Host{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
