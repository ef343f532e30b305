// Package chain is the end-to-end test of the whole dnsconfigurer chain on
// one machine (issue 9).
//
// The chain is a real containerd (test/e2e/containerd) behind the
// `dnsconfigurer shim` binary, the cluster DNS (`dnsconfigurer serve` on
// 10.96.0.10) and the node-local stage (`serve --mode node-local` on
// 169.254.20.10). All are started from the built binary inside the harness's
// network namespace. Two upstream stubs (192.0.2.53, 192.0.2.54) are served
// in-process on sockets bound in that namespace.
//
// Pods of each dnsPolicy are started through the shim with the sandbox
// config kubelet would send (`dnsconfigurer render` on the pod without the
// autopath annotation, reading the node's resolv.conf for every pod as
// kubelet does); the shim has no API server, so it works from that config
// and the pod annotations. A container in each resolves cluster and
// external names with the pure Go stub resolver reading the rendered
// /etc/resolv.conf. The test asserts the answers, counts the queries each
// server received per lookup (from the servers' own /metrics and the stubs'
// counters) and logs the table; then it rewrites the node's resolv.conf in
// place and checks that new Default pods and the cluster DNS's forwarding
// follow it without a restart.
//
// The subtest none-shaped-like-cluster-first pins a shim bug: a None pod
// whose dnsConfig looks like ClusterFirst's (cluster DNS first, the three
// cluster searches, an ndots option) is taken for ClusterFirst by
// podfacts.FromSandbox and gets the node's searches appended.
//
// Run as root after test/e2e/setup.sh:
//
//	go test -count=1 -v -run TestChain ./test/e2e/chain/
package chain
