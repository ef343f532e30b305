package v1alpha1

import (
	"strings"
	"testing"
)

func TestShimConfiguration(t *testing.T) {
	def := defaulted[ShimConfiguration](t)
	if def.Listen != DefaultShimListen || def.RuntimeEndpoint != DefaultShimRuntimeEndpoint || def.Limits != "trim" ||
		def.FailurePolicy != "open" || def.Domain() != "cluster.local" || *def.ResolvConf != "/etc/resolv.conf" || def.ResolvConfMode != "last-good" ||
		def.DefaultDNSPolicy != "ClusterFirst" || def.NamespaceLabels || def.Ndots != nil || def.MaxConnections != 4096 {
		t.Errorf("defaults = %+v", def)
	}
	testValidate(t, []validateCase[ShimConfiguration]{
		{"ok", func(c *ShimConfiguration) { c.ClusterDNS = []string{"10.96.0.10"}; c.MetricsListen = "127.0.0.1:9310" }, ""},
		{"cluster dns", func(c *ShimConfiguration) { c.ClusterDNS = []string{"x"} }, "clusterDNS[0]"},
		{"node ip", func(c *ShimConfiguration) { c.NodeIPs = []string{"1.2.3.4", "nope"} }, "nodeIPs[1]"},
		{"mode", func(c *ShimConfiguration) { c.ResolvConfMode = "lax" }, "resolvConfMode"},
		{"listen relative", func(c *ShimConfiguration) { c.Listen = "shim.sock" }, "listen:"},
		{"listen tcp", func(c *ShimConfiguration) { c.Listen = "tcp://0:1" }, "listen:"},
		{"runtime", func(c *ShimConfiguration) { c.RuntimeEndpoint = "npipe:////./pipe/x" }, "runtimeEndpoint:"},
		{"same socket", func(c *ShimConfiguration) { c.Listen = "/run/containerd/containerd.sock" }, "listen:"},
		{"long path", func(c *ShimConfiguration) { c.Listen = "/" + strings.Repeat("x", 120) }, "listen:"},
		{"timeout", func(c *ShimConfiguration) { c.PodLookupTimeout = "soon" }, "podLookupTimeout"},
		{"limits", func(c *ShimConfiguration) { c.Limits = "cut" }, "limits:"},
		{"failure", func(c *ShimConfiguration) { c.FailurePolicy = "maybe" }, "failurePolicy:"},
		{"node name", func(c *ShimConfiguration) { c.NodeName = "a b" }, "nodeName:"},
		{"metrics", func(c *ShimConfiguration) { c.MetricsListen = "9310" }, "metricsListen:"},
		{"max connections", func(c *ShimConfiguration) { c.MaxConnections = -1 }, "maxConnections:"},
		{"max connections huge", func(c *ShimConfiguration) { c.MaxConnections = 1<<20 + 1 }, "maxConnections:"},
		{"max connections one", func(c *ShimConfiguration) { c.MaxConnections = 1 }, ""},
		{"autopath default", func(c *ShimConfiguration) {
			c.DefaultDNSPolicy, c.NamespaceLabels, c.Ndots = "ClusterFirstWithAutopath", true, ptr(0)
		}, ""},
		{"default policy", func(c *ShimConfiguration) { c.DefaultDNSPolicy = "Default" }, "defaultDNSPolicy:"},
		{"ndots high", func(c *ShimConfiguration) { c.Ndots = ptr(16) }, "ndots:"},
		{"ndots negative", func(c *ShimConfiguration) { c.Ndots = ptr(-1) }, "ndots:"},
	})
}
