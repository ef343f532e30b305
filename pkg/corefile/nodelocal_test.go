package corefile

import (
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// nodeCache is NodeLocal DNSCache's Corefile as its addon ships it
// (kubernetes cluster/addons/dns/nodelocaldns/nodelocaldns.yaml), with
// the placeholders node-cache fills filled in, or not.
const nodeCache = `cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . CLUSTER {
            force_tcp
    }
    prometheus :9253
    health 169.254.20.10:8080
    }
in-addr.arpa:53 {
    errors
    cache 30
    bind 169.254.20.10 10.96.0.10
    forward . CLUSTER {
            force_tcp
    }
    }
.:53 {
    errors
    cache 30
    bind 169.254.20.10 10.96.0.10
    forward . UPSTREAM
    prometheus :9253
    }
`

// TestNodeLocal: NodeLocal DNSCache's Corefile becomes a node-local
// configuration, with the placeholders node-cache fills at start reported.
func TestNodeLocal(t *testing.T) {
	for _, tc := range []struct {
		name, cluster, upstream string
		extra                   string // appended to the Corefile
		mutate                  func(string) string
		config, report          []string
		err                     string
	}{
		{name: "rendered", cluster: "10.96.118.208", upstream: "/etc/resolv.conf",
			config: []string{"mode: node-local", "clusterDomain: cluster.local", "clusterUpstream:\n  - 10.96.118.208", "external: direct",
				"localIPs:\n  - 169.254.20.10\n  - 10.96.0.10", "setupInterface: true", "setupNotrack: true", "resolvConf: /etc/resolv.conf",
				"maxTTL: 30s", "maxNegativeTTL: 5s", "metricsListen: :9253"},
			report: []string{"Corefile:10  forward     converted  nodeLocal.clusterUpstream 10.96.118.208, over TCP", "Corefile:28  forward     converted  nodeLocal.external direct"}},
		{name: "as the addon ships it", cluster: pillarClusterDNS, upstream: pillarUpstreams,
			config: []string{"external: direct"}, report: []string{"differs    __PILLAR__CLUSTER__DNS__ is filled by node-cache"}},
		{name: "everything to the cluster DNS", cluster: "10.96.118.208", upstream: "10.96.118.208",
			config: []string{"external: cluster"}, report: []string{"converted  nodeLocal.external cluster"}},
		{name: "another upstream", cluster: "10.96.118.208", upstream: "8.8.8.8",
			config: []string{"external: cluster"}, report: []string{"differs    the other names go to the cluster DNS (nodeLocal.external cluster), not to 8.8.8.8"}},
		{name: "a stub zone", cluster: "10.96.118.208", upstream: "/etc/resolv.conf", extra: "corp.example:53 {\n    forward . 10.0.0.53\n}\n",
			report: []string{"corp.example:53: its names go to the cluster DNS (nodeLocal.external: cluster), not to 10.0.0.53"}},
		{name: "bind 0.0.0.0 (Cilium's local redirect policy)", cluster: "10.96.118.208", upstream: "/etc/resolv.conf",
			mutate: func(s string) string { return strings.ReplaceAll(s, "bind 169.254.20.10 10.96.0.10", "bind 0.0.0.0") },
			config: []string{"listen:\n- 0.0.0.0:53"}, report: []string{"listen 0.0.0.0:53: every address of the node, no local IP set up"}},
		// kubespray's template: a zone of the operator's that forwards to
		// the cluster DNS too, before the cluster domain's block.
		{name: "another zone to the cluster DNS first", cluster: "10.96.118.208", upstream: "/etc/resolv.conf",
			mutate: func(s string) string { return "mydomain.tld {\n    forward . 10.96.118.208\n}\n" + s },
			config: []string{"clusterDomain: cluster.local", "clusterUpstream:\n  - 10.96.118.208"},
			report: []string{"mydomain.tld: its names go to the cluster DNS"}},
		{name: "refused like CoreDNS", cluster: "10.96.118.208", upstream: "/etc/resolv.conf", extra: "x.example {\n    cache 0\n}\n",
			err: "cache TTL can not be zero or negative: 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.NewReplacer("CLUSTER", tc.cluster, "UPSTREAM", tc.upstream).Replace(nodeCache) + tc.extra
			if tc.mutate != nil {
				text = tc.mutate(text)
			}
			r, err := NodeLocal(t.Context(), Input{Name: "Corefile", Text: []byte(text)})
			if !testkit.WantErr(t, err, tc.err) {
				return
			}
			y, rep := render(t, r)
			testkit.WantSubstrings(t, "config", y, tc.config...)
			testkit.WantSubstrings(t, "report", rep, tc.report...)
		})
	}
}
