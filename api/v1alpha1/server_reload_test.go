package v1alpha1

import (
	"slices"
	"testing"
)

// TestKeepRestartFields: a file that differs from the running one only in
// comments, in fields a reload applies or in the spelling of a value names
// nothing; each restart field that really changed is named and given its
// running value back.
func TestKeepRestartFields(t *testing.T) {
	const head = "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\n"
	const objects = "objects: /srv/objects\n"
	const listen = "listen: [\"127.0.0.1:53\"]\n"
	cluster := head + listen + objects + "ttl: 5\n"
	nodeLocal := head + listen + "mode: node-local\nnodeLocal: {clusterUpstream: [10.0.0.10]}\n"
	cases := []struct {
		name, running, next string
		want                []string
	}{
		{"a comment appended", cluster, cluster + "# a comment\n", nil},
		{"reloadable fields", cluster, head + listen + objects + "ttl: 30\npods: verified\nnamespaces: [prod]\n" +
			"ignoreEmptyService: true\nendpointPodNames: true\nnoEndpoints: true\nlameduck: 1s\nlogLevel: debug\nlogQueries: true\n", nil},
		{"defaults spelled out", cluster, cluster + "clusterDomain: Cluster.Local.\nlimits: {udpInFlight: 2000}\n" +
			"nodeLocal: {resolvConf: /etc/resolv.conf}\n", nil},
		{"nodeLocal in mode cluster", cluster, cluster + "nodeLocal: {resolvConf: \"\", lockFile: /tmp/x.lock}\n", nil},
		{"nodeLocal unchanged in mode node-local", nodeLocal, nodeLocal + "# a comment\n", nil},
		{"nodeLocal.external set to its default", nodeLocal,
			head + listen + "mode: node-local\nnodeLocal: {clusterUpstream: [10.0.0.10], external: cluster}\n", nil},
		{"nodeLocal.external", nodeLocal,
			head + listen + "mode: node-local\nnodeLocal: {clusterUpstream: [10.0.0.10], external: direct}\n", []string{"nodeLocal"}},
		{"nodeLocal.clusterConfig", nodeLocal,
			head + listen + "mode: node-local\nnodeLocal: {clusterUpstream: [10.0.0.10], clusterConfig: /etc/c.yaml}\n", []string{"nodeLocal"}},
		{"nodeLocal in mode node-local", nodeLocal,
			head + listen + "mode: node-local\nnodeLocal: {clusterUpstream: [10.0.0.10], resolvConf: \"\"}\n", []string{"nodeLocal"}},
		{"listen", cluster, head + "listen: [\"127.0.0.2:53\"]\n" + objects, []string{"listen"}},
		{"udpAnswerLimit is applied", cluster, cluster + "udpAnswerLimit: 24\n", nil},
		{"udpSockets set to its default", cluster, cluster + "udpSockets: 0\n", nil},
		{"udpSockets", cluster, cluster + "udpSockets: 4\n", []string{"udpSockets"}},
		{"several", cluster, cluster + "reusePort: true\nudpSockets: 2\nmetricsListen: 127.0.0.1:9153\nclusterDomain: example.org\n" +
			"logFormat: json\nlimits: {tcpConnections: 10}\n", []string{"reusePort", "udpSockets", "metricsListen", "clusterDomain", "logFormat", "limits"}},
		{"record source", cluster, head + listen + "kubeconfig: /etc/kubeconfig\n", []string{"kubeconfig", "objects"}},
		{"mode", cluster, nodeLocal, []string{"mode", "objects"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			running, err := decodeServer([]byte(tc.running))
			if err != nil {
				t.Fatal(err)
			}
			next, err := decodeServer([]byte(tc.next))
			if err != nil {
				t.Fatal(err)
			}
			if got := next.KeepRestartFields(running); !slices.Equal(got, tc.want) {
				t.Fatalf("KeepRestartFields = %q, want %q", got, tc.want)
			}
			if again := next.KeepRestartFields(running); again != nil {
				t.Errorf("the running values were not kept: %q still differ", again)
			}
		})
	}
}
