package policy

import (
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// roundTrip checks the property Recover exists for: recomputing what
// Recover gives back from kubelet's output reproduces that output. It
// returns the recovered input and its type.
func roundTrip(t *testing.T, e *Engine, x Input, host Host) (Input, bool, Type, Type) {
	t.Helper()
	kubelet := x
	kubelet.PolicyAnnotation = ""
	want := e.resolver(kubelet, host, nil)
	// kubelet renders options from a map: hand them over reversed.
	out := Output{Nameservers: want.Nameservers, Searches: want.Searches, Options: slices.Clone(want.Options)}
	slices.Reverse(out.Options)
	id := Input{Name: x.Name, Namespace: x.Namespace, UID: x.UID, HostNetwork: x.HostNetwork, PolicyAnnotation: x.PolicyAnnotation}
	rec, ok := e.Recover(id, out, host)
	if rec.PolicyAnnotation != x.PolicyAnnotation || rec.Namespace != x.Namespace || rec.HostNetwork != x.HostNetwork {
		t.Fatalf("Recover changed the identity: %+v from %+v", rec, id)
	}
	again := rec
	again.PolicyAnnotation = ""
	got := e.resolver(again, host, nil)
	if !slices.Equal(got.Nameservers, out.Nameservers) || !slices.Equal(got.Searches, out.Searches) || !SameOptions(got.Options, out.Options) {
		t.Fatalf("Compute(Recover(out)) != out\n input %s\n out   %+v\n rec   %s (ok %v)\n got   %+v %+v %+v", show(x), out, show(rec), ok, got.Nameservers, got.Searches, got.Options)
	}
	return rec, ok, want.Type, got.Type
}

func show(in Input) string {
	s := string(in.Policy)
	if in.HostNetwork {
		s += " hostNetwork"
	}
	if c := in.DNSConfig; c != nil {
		s += " dnsConfig{" + strings.Join(c.Nameservers, ",") + " | " + strings.Join(c.Searches, ",") + " |"
		for _, o := range c.Options {
			s += " " + o.Name
			if o.Value != nil {
				s += "=" + *o.Value
			}
		}
		s += "}"
	}
	return s
}

func TestRecover(t *testing.T) {
	e, err := New(Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", NodeIPs: []string{"10.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	h := Host{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example", "lab.example"}, Options: []string{"timeout:2", "ndots:"}}
	two, five := "2", "5"
	tests := []struct {
		name   string
		x      Input
		host   Host
		policy Policy
		ok     bool
		pod    *DNSConfig
	}{
		{name: "ClusterFirst", x: Input{Namespace: "ns", Policy: ClusterFirst}, host: h, policy: ClusterFirst, ok: true},
		{name: "ClusterFirst with a dnsConfig", x: Input{Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{
			Nameservers: []string{"198.51.100.1"}, Searches: []string{"extra.example", "corp.example"}, Options: []Option{{Name: "ndots", Value: &two}, {Name: "edns0"}}}},
			host: h, policy: ClusterFirst, ok: true,
			pod: &DNSConfig{Nameservers: []string{"198.51.100.1"}, Searches: []string{"extra.example"}, Options: []Option{{Name: "ndots", Value: &two}, {Name: "edns0"}}}},
		{name: "explicit ndots:5 is not recovered and changes nothing", x: Input{Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Options: []Option{{Name: "ndots", Value: &five}}}},
			host: h, policy: ClusterFirst, ok: true},
		{name: "ClusterFirstWithHostNet", x: Input{Namespace: "ns", Policy: ClusterFirstWithHostNet, HostNetwork: true}, host: h, policy: ClusterFirstWithHostNet, ok: true},
		{name: "ClusterFirst on the host network is Default", x: Input{Namespace: "ns", Policy: ClusterFirst, HostNetwork: true}, host: h, policy: Default, ok: true},
		{name: "Default", x: Input{Namespace: "ns", Policy: Default}, host: h, policy: Default, ok: true},
		{name: "Default with a dnsConfig overriding a host option", x: Input{Namespace: "ns", Policy: Default, DNSConfig: &DNSConfig{
			Searches: []string{"x.example"}, Options: []Option{{Name: "timeout", Value: &five}}}},
			host: h, policy: Default, ok: true, pod: &DNSConfig{Searches: []string{"x.example"}, Options: []Option{{Name: "timeout", Value: &five}}}},
		{name: "Default with resolvConf off", x: Input{Namespace: "ns", Policy: Default, DNSConfig: &DNSConfig{Nameservers: []string{"198.51.100.1"}}},
			host: Host{Disabled: true}, policy: Default, ok: true, pod: &DNSConfig{Nameservers: []string{"198.51.100.1"}}},
		{name: "None", x: Input{Namespace: "ns", Policy: None, DNSConfig: &DNSConfig{Nameservers: []string{"198.51.100.1"}, Searches: []string{"a.example"}}},
			host: h, policy: None, ok: false, pod: &DNSConfig{Nameservers: []string{"198.51.100.1"}, Searches: []string{"a.example"}}},
		{name: "None that looks like ClusterFirst is ClusterFirst", x: Input{Namespace: "ns", Policy: None, DNSConfig: &DNSConfig{
			Nameservers: []string{"10.96.0.10"}, Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example"},
			Options: []Option{{Name: "ndots", Value: &five}}}}, host: h, policy: ClusterFirst, ok: true},
		{name: "an unknown policy is ClusterFirst", x: Input{Namespace: "ns", Policy: "Bogus"}, host: h, policy: ClusterFirst, ok: true},
		{name: "searches trimmed at 32", x: Input{Namespace: "ns", Policy: ClusterFirst, DNSConfig: &DNSConfig{Searches: domains(10, 10)}},
			host: Host{Nameservers: h.Nameservers, Searches: domains(28, 12)}, policy: ClusterFirst, ok: true, pod: &DNSConfig{Searches: domains(1, 10)}},
		{name: "host file changed since kubelet read it", x: Input{Namespace: "ns", Policy: Default}, host: h, policy: None, ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "host file changed since kubelet read it" {
				kubelet := e.resolver(tc.x, tc.host, nil)
				moved := Host{Nameservers: []string{"203.0.113.9"}, Searches: tc.host.Searches}
				rec, ok := e.Recover(Input{Namespace: "ns"}, Output{kubelet.Nameservers, kubelet.Searches, kubelet.Options}, moved)
				if ok || rec.Policy != None || !slices.Equal(rec.DNSConfig.Nameservers, kubelet.Nameservers) {
					t.Fatalf("Recover = %s, %v; want None with kubelet's config", show(rec), ok)
				}
				return
			}
			rec, ok, _, _ := roundTrip(t, e, tc.x, tc.host)
			if ok != tc.ok || rec.Policy != tc.policy {
				t.Fatalf("Recover = %s, %v; want %s, %v", show(rec), ok, tc.policy, tc.ok)
			}
			if show(Input{DNSConfig: rec.DNSConfig}) != show(Input{DNSConfig: tc.pod}) {
				t.Errorf("dnsConfig = %s, want %s", show(Input{DNSConfig: rec.DNSConfig}), show(Input{DNSConfig: tc.pod}))
			}
		})
	}
}

// TestRecoverLoopback recovers kubelet's own output on a node whose file
// has a loopback stub (kubelet hands it to every host-type pod) and checks
// the loopback rule on the recomputed pod: kept on the host network,
// dropped in the pod's own network namespace, as with the pod's facts.
func TestRecoverLoopback(t *testing.T) {
	e, err := New(node)
	if err != nil {
		t.Fatal(err)
	}
	kubeletHost := Output{Nameservers: stubHost.Nameservers, Searches: stubHost.Searches, Options: []string{"trust-ad", "edns0"}}
	tests := []struct {
		name    string
		x       Input
		out     Output
		policy  Policy
		servers []string
	}{
		{name: "Default", x: Input{Name: "p", Namespace: "ns"}, out: kubeletHost, policy: Default, servers: []string{"192.0.2.1"}},
		{name: "hostNetwork Default", x: Input{Name: "p", Namespace: "ns", HostNetwork: true}, out: kubeletHost, policy: Default, servers: []string{"127.0.0.53", "192.0.2.1"}},
		{name: "hostNetwork Default with a dnsConfig nameserver", x: Input{Name: "p", Namespace: "ns", HostNetwork: true},
			out:    Output{Nameservers: []string{"127.0.0.53", "192.0.2.1", "198.51.100.1"}, Searches: stubHost.Searches, Options: stubHost.Options},
			policy: Default, servers: []string{"127.0.0.53", "192.0.2.1", "198.51.100.1"}},
		{name: "hostNetwork ClusterFirstWithHostNet", x: Input{Name: "p", Namespace: "ns", HostNetwork: true},
			out:    Output{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearches("ns", "corp.example.com"), Options: []string{"ndots:5"}},
			policy: ClusterFirstWithHostNet, servers: []string{"10.96.0.10"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, ok := e.Recover(tc.x, tc.out, stubHost)
			if !ok || rec.Policy != tc.policy {
				t.Fatalf("Recover = %s, %v; want %s, true", show(rec), ok, tc.policy)
			}
			r, err := e.Compute(rec, stubHost)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Nameservers, tc.servers) {
				t.Errorf("nameservers = %q, want %q", r.Nameservers, tc.servers)
			}
		})
	}
}

// FuzzRecover checks, for every input the fuzzer builds, that Recover
// inverts kubelet's half of Compute: recomputing the recovered input gives
// kubelet's output back, and a pod that is not None is recovered with its
// type (cluster or host). Host nameservers and the cluster DNS are
// disjoint, so a Default pod never looks like ClusterFirst.
func FuzzRecover(f *testing.F) {
	for _, seed := range [][]byte{{0}, {1, 1}, {2, 0, 3, 4, 5}, {3, 2, 7, 7, 7, 7, 7, 7, 7, 7}, {4, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {0, 0x40, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}} {
		f.Add(seed)
	}
	nodes := []Node{
		{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", NodeIPs: []string{"10.0.0.1"}},
		{ClusterDNS: []string{"10.96.0.10", "fd00::a"}, ClusterDomain: "k8s.example", NodeIPs: []string{"10.0.0.1", "fd00::1"}},
		{ClusterDNS: nil, ClusterDomain: "cluster.local"},
		{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: ""},
		{ClusterDNS: []string{"10.96.0.10", "10.96.0.11", "10.96.0.12", "10.96.0.13"}, ClusterDomain: "cluster.local"},
	}
	engines := make([]*Engine, len(nodes))
	for i, n := range nodes {
		e, err := New(n)
		if err != nil {
			f.Fatal(err)
		}
		engines[i] = e
	}
	policies := []Policy{ClusterFirst, ClusterFirstWithHostNet, Default, None, "Bogus"}
	servers := []string{"192.0.2.1", "192.0.2.2", "198.51.100.1", "2001:db8::1", "203.0.113.5"}
	searches := []string{"corp.example", "lab.example", "ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "x.example",
		strings.Repeat("l", 60) + ".example", strings.Repeat("m", 250) + ".example", "a.b.example", "ns"}
	optNames := []string{"ndots", "timeout", "attempts", "edns0", "rotate"}
	podOptNames := append(slices.Clone(optNames), "ndots:3", "timeout:1", "ndots:")
	values := []string{"", "1", "2", "5"}
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := int(data[0])
			data = data[1:]
			return b
		}
		e := engines[next()%len(engines)]
		flags := next()
		x := Input{Name: "p", Namespace: "ns", Policy: policies[next()%len(policies)], HostNetwork: flags&1 != 0}
		if flags&2 != 0 {
			x.PolicyAnnotation = string(ClusterFirstWithAutopath)
		}
		pick := func(pool []string, n int) []string {
			out := []string{}
			for range n {
				out = append(out, pool[next()%len(pool)])
			}
			return out
		}
		host := Host{Disabled: flags&4 != 0}
		if !host.Disabled {
			host.Nameservers = pick(servers[:2], next()%4)
			host.Searches = pick(searches, next()%40)
			for range next() % 3 {
				host.Options = append(host.Options, resolvconf.FormatOption(optNames[next()%len(optNames)], values[next()%len(values)]))
			}
			host.Options = mergeOptions(nil, optionsOf(host.Options), nil)
		}
		if flags&8 != 0 || x.Policy == None {
			c := &DNSConfig{Nameservers: pick(servers, next()%5), Searches: pick(searches, next()%36)}
			for range next() % 4 {
				o := Option{Name: podOptNames[next()%len(podOptNames)]}
				if v := next() % 5; v < len(values) {
					o.Value = &values[v]
				}
				c.Options = append(c.Options, o)
			}
			x.DNSConfig = c
		}
		rec, ok, want, got := roundTrip(t, e, x, host)
		if x.Policy != None && (!ok || got != want) {
			t.Fatalf("%s recovered as %s (ok %v, type %s, want %s)", show(x), show(rec), ok, got, want)
		}
	})
}

func optionsOf(opts []string) []Option {
	out := make([]Option, len(opts))
	for i, o := range opts {
		out[i] = parseOption(o)
	}
	return out
}
