package v1alpha1

import "slices"

// RestartFields are the fields of a ServerConfiguration a reload of the
// file does not apply. `serve` keeps their running values and names those
// that changed. Each is bound to something made once, at start:
//
//   - mode: the two modes are different programs (records and forwarding
//     routes, or a forwarding stage with its node setup).
//   - listen, reusePort, udpSockets: the sockets are bound at start, and
//     SO_REUSEPORT can only be set before the bind.
//   - metricsListen: the socket of /metrics and the probes kubelet asks.
//   - clusterDomain: the record store indexes its names under it, the
//     request metrics are labelled with it, and every pod's search list
//     names it: a live change would answer none of the names pods ask.
//   - logFormat: every component's logger is derived from the one handler
//     made at start; a switch would leave one stream in two formats.
//   - kubeconfig, objects, noClusterZone, clustersetZone: the record
//     source and what it watches; its informers or its
//     manifest watch fill the store, and another source would start from
//     an empty one.
//   - limits: the UDP slots, the TCP connection bound and the connections'
//     timeouts are made when the listeners start.
//   - nodeLocal (mode node-local): the node setup (addresses, the notrack
//     table, the lock) and the forwarders to the cluster DNS. In mode
//     cluster nothing reads it.
//
// Every other field is applied by a reload: the forwarding routes and the
// cache, hosts, overrides, rewrites, autopath, reverse zones, loadbalance
// and udpAnswerLimit (the answer stack is rebuilt), ttl, pods, namespaces,
// ignoreEmptyService, endpointPodNames and noEndpoints (the records are
// published again with them; pods, endpointPodNames and noEndpoints
// change what the feed watches or keeps, and it lists again), namespaceMetrics, coreDNSMetrics,
// logQueries, logLevel and lameduck.
var RestartFields = []string{"mode", "listen", "reusePort", "udpSockets", "metricsListen", "clusterDomain", "logFormat",
	"kubeconfig", "objects", "noClusterZone", "clustersetZone", "limits", "nodeLocal"}

// KeepRestartFields sets the RestartFields of c (the file just read) to
// running's, and names those whose value differed, in RestartFields order.
// Values are compared, not their representation: a field unset in one and
// set to its default in the other is no change (both are defaulted), and
// nodeLocal counts in mode node-local only.
func (c *ServerConfiguration) KeepRestartFields(running *ServerConfiguration) []string {
	var kept []string
	keep := func(name string, differs bool, restore func()) {
		if differs {
			kept = append(kept, name)
			restore()
		}
	}
	keep("mode", c.Mode != running.Mode, func() { c.Mode = running.Mode })
	keep("listen", !slices.Equal(c.Listen, running.Listen), func() { c.Listen = running.Listen })
	keep("reusePort", c.ReusePort != running.ReusePort, func() { c.ReusePort = running.ReusePort })
	keep("udpSockets", c.UDPSockets != running.UDPSockets, func() { c.UDPSockets = running.UDPSockets })
	keep("metricsListen", c.MetricsListen != running.MetricsListen, func() { c.MetricsListen = running.MetricsListen })
	keep("clusterDomain", c.ClusterZone() != running.ClusterZone(), func() { c.ClusterDomain = running.ClusterDomain })
	keep("logFormat", c.LogFormat != running.LogFormat, func() { c.LogFormat = running.LogFormat })
	keep("kubeconfig", c.Kubeconfig != running.Kubeconfig, func() { c.Kubeconfig = running.Kubeconfig })
	keep("objects", c.Objects != running.Objects, func() { c.Objects = running.Objects })
	keep("noClusterZone", c.NoClusterZone != running.NoClusterZone, func() { c.NoClusterZone = running.NoClusterZone })
	keep("clustersetZone", c.ClustersetZoneName() != running.ClustersetZoneName(), func() { c.ClustersetZone = running.ClustersetZone })
	keep("limits", c.Limits != running.Limits, func() { c.Limits = running.Limits })
	keep("nodeLocal", running.Mode == ModeNodeLocal && !c.NodeLocal.equal(&running.NodeLocal),
		func() { c.NodeLocal = running.NodeLocal })
	return kept
}

// equal compares the values of two defaulted NodeLocal sections.
func (n *NodeLocal) equal(o *NodeLocal) bool {
	return slices.Equal(n.ClusterUpstream, o.ClusterUpstream) && n.ResolvConfPath() == o.ResolvConfPath() &&
		slices.Equal(n.LocalIPs, o.LocalIPs) && n.SetupInterface == o.SetupInterface &&
		n.InterfaceName == o.InterfaceName && n.SetupNotrack == o.SetupNotrack &&
		n.SkipTeardown == o.SkipTeardown && n.LockFile == o.LockFile &&
		n.ClusterTimeout.Duration() == o.ClusterTimeout.Duration() && n.WatchJitter.Duration() == o.WatchJitter.Duration() &&
		n.ClusterConfig == o.ClusterConfig && n.ExternalMode() == o.ExternalMode() &&
		n.PreferZoneOn() == o.PreferZoneOn() && n.ClusterPipelineOn() == o.ClusterPipelineOn() && n.UpstreamService == o.UpstreamService && n.NodeName == o.NodeName
}
