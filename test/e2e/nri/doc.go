// Package nri holds the end-to-end tests of `dnsconfigurer nri`, the NRI
// plugin, against containerd 2.x.
//
// The harness is test/e2e/containerd with $DNSCONFIGURER_CONTAINERD_BIN. The
// built binary registers on the harness's NRI socket. Pods of each dnsPolicy
// and with the autopath annotation run through the harness's CRI client with
// the DNS config kubelet would send. Each container's /etc/resolv.conf, read
// from inside, must be what `dnsconfigurer render` gives for the pod.
// Without an API server the plugin recovers the pod from kubelet's sandbox
// file, so these tests cover the inverse path. The state dir must be empty
// once the pods are gone. TestLiveUpdate rewrites the harness's host
// resolv.conf (the plugin's --resolv-conf) in place and waits until running
// Default and ClusterFirst containers see it, then checks the plugin's
// /metrics. TestPluginRestart stops the plugin (SIGTERM) and starts it
// again: new containers get kubelet's file while it is gone and its file
// once it is back; containers created before keep theirs.
// TestRecreatedSandbox recreates a pod's sandbox as kubelet does (stop A,
// run B with the same UID, restart the plugin, remove A): B's container
// keeps the pod file and still sees a change of the node file.
// TestLimitsReject runs it with --limits reject: a sandbox over kubelet's
// limits fails at CreateContainer with a message naming the pod and the
// limit. TestContainerdRestart restarts containerd under the plugin (the
// harness's Restart: same root, state, config and sockets; containers keep
// running): /readyz goes unready and ready again,
// dnsconfigurer_nri_connected is back to 1, the resync keeps the pods
// containerd recovered and drops a stale one, containers from before keep
// the plugin's file (same pod file, same inode) and new ones get it.
// TestCorruptSandboxFile corrupts the sandbox resolv.conf before a pod's
// first container (binary data, a nameserver that is not an address, a line
// over the 64 KiB cap, over 10 MiB): the container keeps that file (its
// mount is the sandbox's), with an error log line and
// errors_total{stage="facts"}. TestUnreachableAPIServer gives the plugin a
// kubeconfig for a closed 127.0.0.1 port: it registers but /readyz stays 503
// (pod informer), and each container waits the 1s lookup timeout, falls back
// to the sandbox file and gets the plugin's file, counting
// pod_lookups_total{result="miss"}, within containerd's 2s NRI timeout. A
// pod deleted from the API server mid-creation is covered by pkg/nriplugin's
// TestPodDeletedMidCreation (the real pod informer on a fake clientset): a
// kube-apiserver here would need test/testbin's 25 minute build.
// BenchmarkCreateContainer logs CreateContainer p50/p99 without and with the
// plugin:
//
//	go test -run '^$' -bench CreateContainer -benchtime 1x ./test/e2e/nri/
//
// Run as root after test/e2e/setup.sh and test/e2e/containerd2.sh:
//
//	DNSCONFIGURER_CONTAINERD_BIN=/root/.cache/dnsconfigurer/containerd-v2.4.2 go test -count=1 ./test/e2e/nri/
package nri
