// Package nri holds the end-to-end tests of `dnsconfigurer nri`, the NRI
// plugin, against containerd 2.x (test/e2e/containerd with
// $DNSCONFIGURER_CONTAINERD_BIN): the built binary registers on the
// harness's NRI socket, pods of each dnsPolicy and with the autopath
// annotation are run through the harness's CRI client with the DNS config
// kubelet would send, and each container's /etc/resolv.conf, read from
// inside, must be what `dnsconfigurer render` gives for the pod. Without an
// API server the plugin recovers the pod from kubelet's sandbox file, so
// these tests cover the inverse path. The state dir must be empty once the
// pods are gone. TestLiveUpdate rewrites the harness's host resolv.conf
// (the plugin's --resolv-conf) in place and waits until running Default and
// ClusterFirst containers see it, then checks the plugin's /metrics.
// TestPluginRestart stops the plugin (SIGTERM) and starts it again: new
// containers get kubelet's file while it is gone and its file once it is
// back; containers created before keep theirs. TestLimitsReject runs it with
// --limits reject: a sandbox over kubelet's limits fails at CreateContainer
// with a message naming the pod and the limit. BenchmarkCreateContainer
// logs CreateContainer p50/p99 without and with the plugin:
//
//	go test -run '^$' -bench CreateContainer -benchtime 1x ./test/e2e/nri/
//
// Run as root after test/e2e/setup.sh and test/e2e/containerd2.sh:
//
//	DNSCONFIGURER_CONTAINERD_BIN=/root/.cache/dnsconfigurer/containerd-v2.4.2 go test -count=1 ./test/e2e/nri/
package nri
