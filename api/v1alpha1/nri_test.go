package v1alpha1

import (
	"testing"
)

func TestNRIConfiguration(t *testing.T) {
	def := defaulted[NRIConfiguration](t)
	if def.Socket != DefaultNRISocket || def.PluginName != "dnsconfigurer" || def.PluginIndex != "10" ||
		def.StateDir != DefaultNRIStateDir || def.Limits != "trim" || def.PodLookupTimeout != "1s" || *def.ResolvConf != "/etc/resolv.conf" ||
		def.DefaultDNSPolicy != "ClusterFirst" {
		t.Errorf("defaults = %+v", def)
	}
	testValidate(t, []validateCase[NRIConfiguration]{
		{"ok", func(c *NRIConfiguration) { c.ClusterDNS = []string{"10.96.0.10"}; c.MetricsListen = "127.0.0.1:9311" }, ""},
		{"cluster dns", func(c *NRIConfiguration) { c.ClusterDNS = []string{"x"} }, "clusterDNS[0]"},
		{"socket relative", func(c *NRIConfiguration) { c.Socket = "nri.sock" }, "socket:"},
		{"plugin name", func(c *NRIConfiguration) { c.PluginName = "dns/configurer" }, "pluginName:"},
		{"plugin index", func(c *NRIConfiguration) { c.PluginIndex = "100" }, "pluginIndex:"},
		{"plugin index letters", func(c *NRIConfiguration) { c.PluginIndex = "ab" }, "pluginIndex:"},
		{"state dir", func(c *NRIConfiguration) { c.StateDir = "state" }, "stateDir:"},
		{"timeout", func(c *NRIConfiguration) { c.PodLookupTimeout = "1m" }, "podLookupTimeout:"},
		{"limits", func(c *NRIConfiguration) { c.Limits = "cut" }, "limits:"},
		{"node name", func(c *NRIConfiguration) { c.NodeName = "a b" }, "nodeName:"},
		{"metrics", func(c *NRIConfiguration) { c.MetricsListen = "9311" }, "metricsListen:"},
		{"autopath default", func(c *NRIConfiguration) {
			c.DefaultDNSPolicy, c.NamespaceLabels, c.Ndots = "ClusterFirstWithAutopath", true, ptr(15)
		}, ""},
		{"default policy", func(c *NRIConfiguration) { c.DefaultDNSPolicy = "None" }, "defaultDNSPolicy:"},
		{"ndots", func(c *NRIConfiguration) { c.Ndots = ptr(99) }, "ndots:"},
	})
}
