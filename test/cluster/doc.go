// Package cluster runs a real Kubernetes cluster of one node (or three), with
// dnsconfigurer in it, for the project's end-to-end tests.
//
// Start(t, product, Options{}) brings up, inside one network namespace it
// creates (the node, see test/e2e/containerd):
//
//   - etcd and kube-apiserver (test/apiserver with WithNetwork) on NodeIP,
//     the pod bridge's address, with Node,RBAC authorization and the
//     ServiceAccount and NodeRestriction admission plugins;
//   - kube-controller-manager (EndpointSlices, ServiceAccount tokens,
//     namespaces, Deployments, ...) and kube-scheduler;
//   - containerd (Debian's 1.6, or 2.x from $DNSCONFIGURER_CONTAINERD_BIN)
//     with runc and the CNI bridge, and the dnsconfigurer CRI shim in
//     front of it;
//   - kubelet with containerRuntimeEndpoint on the shim's socket, running
//     as system:node:dnscfg-node;
//   - kube-proxy in iptables mode;
//   - a DNS stub on NodeIP:53, the node's upstream resolver, which answers
//     every external name with documentation addresses.
//
// The Kubernetes binaries come from test/testbin/build.sh (built from the
// Go module proxy, cached by go.sum). Nothing is pulled: the images pods
// use are local stand-ins imported under their upstream names (images.go),
// and the product's image is the one hack/build-image builds
// (internal/imagebuild), from the source tree under test.
// DeployDNS applies deploy/ with kubectl apply -k through an overlay for
// this cluster, making dnsconfigurer its cluster DNS at ClusterDNS.
//
// How the node is put together, and why:
//
//   - kubelet runs in the machine's mount namespace; its root directory is
//     a shared bind mount, and containerd's private mount namespace is a
//     slave of it, so the tmpfs volumes kubelet mounts later (ServiceAccount
//     tokens, secrets) reach containers;
//   - kubelet uses the cgroupfs driver under the harness's cgroup parent
//     (cgroupRoot), so teardown is one cgroup tree; cgroup v1 is allowed;
//   - kubelet sets machine-wide sysctls (kernel.panic, kernel.panic_on_oops,
//     vm.overcommit_memory, ...): they are saved before and restored after;
//   - kube-proxy is told to leave conntrack sysctls alone, and the namespace
//     routes the Service CIDR over the bridge, so host-network pods reach
//     ClusterIPs; bridged traffic goes through iptables in the namespace
//     only (net.bridge.bridge-nf-call-iptables is per namespace);
//   - kube-apiserver reaches kubelet by its InternalIP (the node's name
//     resolves nowhere), and kubelet accepts it anonymously: nothing else
//     can reach the namespace.
//
// Every process is a child of the test binary, stopped by PID (process
// group) and killed by the kernel if the test binary dies; the teardown
// unmounts kubelet's mounts, removes the cgroups, the namespace and the
// directory, and restores the sysctls. TestCluster checks that.
//
// TestClusterNRI brings up a second cluster with Options{Agent: AgentNRI}:
// containerd 2.x ($DNSCONFIGURER_CONTAINERD_BIN, test/e2e/containerd2.sh)
// with NRI on, kubelet pointed straight at containerd (no shim, no kubelet
// change), and deploy/overlays/nri, whose DaemonSet runs the NRI plugin
// with its ServiceAccount. It proves the plugin's API-server path on a real
// kubelet: every dnsPolicy and the autopath annotation from the plugin's
// file, a trimmed pod's DNSConfigForming Event, a node resolv.conf change
// reaching running containers, and state removed with the pod.
//
// TestClusterMigration starts a third cluster the way operators have one:
// kubeadm's CoreDNS with a customised Corefile and NodeLocal DNSCache in
// front of it (operator.go; node-cache is a stand-in: CoreDNS with
// NodeLocal's Corefile and node-cache's set-up around it). Pods resolve
// with glibc's, musl's and Go's resolvers all the while (resolveloop), as
// deploy/README.md's migration is followed and rolled back; no lookup may
// fail and no answer change.
//
// TestClusterMultiNode (with $DNSCONFIGURER_MULTINODE=all, or a list of
// topologies) starts clusters of three nodes (Options.Nodes, nodes.go):
// each node its own namespace, containerd, shim, kubelet and kube-proxy,
// joined by a fabric bridge, kube-proxy in iptables or nftables mode
// (Options.ProxyMode; the kernel has no IPVS), dual-stack
// (Options.DualStack) and IPv6-only (Options.IPv6Only). On each it runs
// the upstream DNS specs; on the last two testDualStack checks the IPv6
// answers; on the first two it rolls out the cluster DNS and the node-local
// stage, restarts the shims, scales the cluster DNS 2-1-2, restarts the
// API server and kills a node with a cluster DNS pod on it, while Go
// resolvers on every node look names up behind the node-local stage and
// straight at the cluster DNS (events_test.go). It prints one summary line
// per result:
//
//	multinode: e2e dns TOPOLOGY: passed N failed M skipped K
//	multinode: event TOPOLOGY/NAME[/direct]: lookups N failed M longest-gap-ms G
//
// TestClusterZones (with $DNSCONFIGURER_ZONES=1) labels three nodes in two
// topology zones, one cluster DNS replica in each, and proves issue 59:
// headless answers by trafficDistribution, node-local asking its zone's
// cluster DNS, a zone drained of its pods and a killed DNS pod, while
// glibc, musl and Go resolvers on every node look up (zones_test.go):
//
//	zone: CASE: lookups N cross-zone M failed F
//
// TestClusterClusterset (with $DNSCONFIGURER_CLUSTERSET=1) proves issue
// 70 on two clusters at once, A and B, each started by Start in its own
// network namespace (their addresses overlap; nothing joins them). Both
// get the mcs-api CRDs and deploy/ with clustersetZone: clusterset.local;
// A exports a ClusterIP and a headless Service, the test plays the MCS
// controller importing them into both, and glibc, musl and Go resolvers
// in B look the clusterset names up through node-local while A's
// endpoints roll (clusterset_test.go):
//
//	clusterset: RESOLVER: lookups N failed M wrong K
//
// Run it as root after test/e2e/setup.sh and test/testbin/build.sh:
//
//	sudo go test -timeout 60m ./test/cluster/
//	sudo DNSCONFIGURER_MULTINODE=all go test -timeout 120m -run TestClusterMultiNode ./test/cluster/
//
// Without root, containerd or the binaries it skips with a message saying
// what to run. This package is test infrastructure: only tests import it.
package cluster
