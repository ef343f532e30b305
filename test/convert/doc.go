// Package convert proves `dnsconfigurer convert` side by side with CoreDNS.
// For each example of pkg/corefile/testdata, CoreDNS runs the original
// Corefile and `dnsconfigurer serve` the converted configuration, against
// the same kube-apiserver and the same fake upstreams. Both are asked the
// same questions. It needs $DNSCONFIGURER_TESTBIN (coredns, kube-apiserver,
// etcd; see test/testbin/build.sh) and skips without it:
//
//	DNSCONFIGURER_TESTBIN=$(test/testbin/build.sh) go test -v ./test/convert/
//
// The hostile and large inputs (hostile_test.go, large_test.go) need the
// built binary only: bounds, SIGTERM, SIGKILL and what is left in TMPDIR.
// $DNSCONFIGURER_CONVERT_BIN runs large_test.go on another build, such as
// an older commit's, to show what it catches.
package convert
