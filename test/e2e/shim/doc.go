// Package shim holds the end-to-end tests of dnsconfigurer's CRI shim
// against a real containerd (test/e2e/containerd).
//
// Every dnsPolicy runs through the built `dnsconfigurer shim` binary and
// through an in-process shim fed by a pod informer, compared with
// `dnsconfigurer render`. The tests also cover the full container lifecycle
// through the shim, 50 parallel sandboxes, and the shim killed and restarted
// under a connected client. They rewrite and break the node resolver file
// under a running shim. BenchmarkShimOverhead measures the shim's added
// latency.
//
// Run as root after test/e2e/setup.sh:
//
//	go test -count=1 ./test/e2e/shim/
//	go test -run '^$' -bench ShimOverhead -benchtime 1x ./test/e2e/shim/
package shim
