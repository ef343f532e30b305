package policy

import "testing"

// The host config is parsed once (the watcher's job); these measure the
// per-pod work kubelet's GetPodDNS does after reading the file.
func BenchmarkCompute(b *testing.B) {
	e, err := New(Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		b.Fatal(err)
	}
	h := Host{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com", "lab.example.com"}, Options: []string{"timeout:2"}}
	ndots := "2"
	cases := []struct {
		name string
		in   Input
		host Host
	}{
		{"ClusterFirst", Input{Name: "web-0", Namespace: "shop", Policy: ClusterFirst}, h},
		{"DNSConfig", Input{Name: "web-0", Namespace: "shop", Policy: ClusterFirst, Hostname: "web-0", Subdomain: "web", DNSConfig: &DNSConfig{
			Nameservers: []string{"1.1.1.1"}, Searches: []string{"extra.example"}, Options: []Option{{Name: "ndots", Value: &ndots}, {Name: "edns0"}}}}, h},
		{"Limit32", Input{Name: "web-0", Namespace: "shop", Policy: ClusterFirst}, Host{Nameservers: h.Nameservers, Searches: domains(29, 20)}},
		{"Over32", Input{Name: "web-0", Namespace: "shop", Policy: ClusterFirst, DNSConfig: &DNSConfig{Searches: []string{"a.example", "b.example"}}}, Host{Nameservers: h.Nameservers, Searches: domains(29, 20)}},
		{"Autopath", Input{Name: "web-0", Namespace: "shop", Policy: ClusterFirst, PolicyAnnotation: string(ClusterFirstWithAutopath)}, h},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Compute(c.in, c.host); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkComputeExplained is what a trace costs (render --explain, the
// live explain); BenchmarkCompute must not change with it.
func BenchmarkComputeExplained(b *testing.B) {
	e, err := New(Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		b.Fatal(err)
	}
	h := Host{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"corp.example.com", "lab.example.com"}, Options: []string{"timeout:2"}}
	in := Input{Name: "web-0", Namespace: "shop", Policy: ClusterFirst}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := e.ComputeExplained(in, h); err != nil {
			b.Fatal(err)
		}
	}
}
