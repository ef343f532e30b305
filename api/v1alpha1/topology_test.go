package v1alpha1

import "testing"

func TestTopologyDefaults(t *testing.T) {
	for _, mode := range []string{ModeCluster, ModeNodeLocal} {
		t.Run(mode, func(t *testing.T) {
			c := ServerConfiguration{Mode: mode}
			c.SetDefaults()
			ns, name := c.NodeLocal.UpstreamServiceName()
			if c.TopologyOptionCode != 65002 || !c.NodeLocal.PreferZoneOn() || *c.NodeLocal.PreferZone != true ||
				c.NodeLocal.UpstreamService != "kube-system/dnsconfigurer-dns-upstream" ||
				ns != "kube-system" || name != "dnsconfigurer-dns-upstream" || c.NodeLocal.NodeName != "" {
				t.Errorf("defaults: code %d, nodeLocal %+v (%s/%s)", c.TopologyOptionCode, c.NodeLocal, ns, name)
			}
		})
	}
	off := ServerConfiguration{NodeLocal: NodeLocal{PreferZone: new(bool)}}
	off.SetDefaults()
	if off.NodeLocal.PreferZoneOn() {
		t.Error("preferZone: false became true")
	}
}

func TestTopologyValidate(t *testing.T) {
	nodeLocal := func(c *ServerConfiguration) {
		c.Mode, c.Forward, c.NodeLocal.ClusterUpstream = ModeNodeLocal, nil, []string{"10.96.0.11"}
	}
	checkMutations(t, []mutation{
		{"defaults", func(*ServerConfiguration) {}, nil},
		{"node-local", func(c *ServerConfiguration) {
			nodeLocal(c)
			c.NodeLocal.NodeName, c.NodeLocal.UpstreamService = "ip-10-0-1-2.eu-west-1.compute.internal", "dns/upstream"
		}, nil},
		{"code below range", func(c *ServerConfiguration) { c.TopologyOptionCode = 65000 },
			[]string{`topologyOptionCode: 65000: not a local option code (65001-65534)`}},
		{"code above range", func(c *ServerConfiguration) { c.TopologyOptionCode = 65535 },
			[]string{`topologyOptionCode: 65535: not a local option code (65001-65534)`}},
		{"code of autopath", func(c *ServerConfiguration) { c.TopologyOptionCode = 65001 },
			[]string{`topologyOptionCode: 65001: must differ from autopathOptionCode`}},
		{"autopath moved onto it", func(c *ServerConfiguration) { c.AutopathOptionCode = 65002 },
			[]string{`topologyOptionCode: 65002: must differ from autopathOptionCode`}},
		{"both moved", func(c *ServerConfiguration) { c.AutopathOptionCode, c.TopologyOptionCode = 65002, 65010 }, nil},
		{"service without namespace", func(c *ServerConfiguration) { nodeLocal(c); c.NodeLocal.UpstreamService = "upstream" },
			[]string{`nodeLocal.upstreamService: "upstream": must be namespace/name`}},
		{"service bad namespace", func(c *ServerConfiguration) { nodeLocal(c); c.NodeLocal.UpstreamService = "Kube_System/up" },
			[]string{`nodeLocal.upstreamService: "Kube_System/up": namespace "Kube_System" is not a DNS label`}},
		{"service bad name", func(c *ServerConfiguration) { nodeLocal(c); c.NodeLocal.UpstreamService = "kube-system/" },
			[]string{`nodeLocal.upstreamService: "kube-system/": name "" is not a DNS label`}},
		{"node name", func(c *ServerConfiguration) { nodeLocal(c); c.NodeLocal.NodeName = "Node 1" },
			[]string{`nodeLocal.nodeName: "Node 1": not a node name (a DNS subdomain)`}},
	})
}

func TestIsDNSSubdomain(t *testing.T) {
	long := "a"
	for len(long) < 251 {
		long += ".a"
	}
	tests := []struct {
		in   string
		want bool
	}{
		{"node-1", true}, {"ip-10-0-1-2.ec2.internal", true}, {long, true}, {long + ".a", true}, {long + ".ab", false},
		{"", false}, {"Node", false}, {"a..b", false}, {"a.", false}, {"-a", false}, {"a_b", false},
	}
	for _, tt := range tests {
		if got := IsDNSSubdomain(tt.in); got != tt.want {
			t.Errorf("IsDNSSubdomain(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
