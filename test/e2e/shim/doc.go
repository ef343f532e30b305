// Package shim holds the end-to-end tests of dnsconfigurer's CRI shim
// against a real containerd (test/e2e/containerd): every dnsPolicy through
// the built `dnsconfigurer shim` binary and through an in-process shim fed
// by a pod informer, compared with `dnsconfigurer render`; the full
// container lifecycle through the shim; 50 parallel sandboxes; the shim
// killed and restarted under a connected client; the node resolver file
// rewritten and broken under a running shim; and the shim's added latency
// (BenchmarkShimOverhead).
//
// Run as root after test/e2e/setup.sh:
//
//	go test -count=1 ./test/e2e/shim/
//	go test -run '^$' -bench ShimOverhead -benchtime 1x ./test/e2e/shim/
package shim
