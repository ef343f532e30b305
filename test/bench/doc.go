// Package bench runs the cluster DNS server (`dnsconfigurer serve`) and
// CoreDNS 1.15 side by side on 127.0.0.1, as real processes, and measures
// what issue 15 asks for:
//
//   - TestSideBySide: queries per second, latency percentiles and CPU time
//     per answer for one cached external name, dnsconfigurer's forwarder and
//     cache against CoreDNS's `forward . <stub> { max_concurrent 1000 }` and
//     `cache 30`, in alternating rounds;
//   - TestDeadUpstreamFlood: 2,000 queries per second of unique external
//     names for 20 s to two upstreams that never answer, while the
//     goroutines (go_goroutines from /metrics), the RSS (/proc) and the
//     answer time of an in-cluster name (a hosts entry for CoreDNS) are
//     sampled. It asserts the targets on dnsconfigurer only: at most 3,000
//     goroutines and 200 MiB, SERVFAIL within 2.5 s and then at once, the
//     in-cluster name answered throughout.
//
// Both skip unless DNSCONFIGURER_BENCH=1, so `go test ./...` stays fast:
//
//	DNSCONFIGURER_BENCH=1 go test -v -run 'TestSideBySide|TestDeadUpstreamFlood' ./test/bench/ -timeout 10m
//
// dnsconfigurer is built from the working tree (test/buildbin); coredns is
// $DNSCONFIGURER_COREDNS, else $DNSCONFIGURER_TESTBIN/coredns, else the
// directory test/testbin/build.sh caches its binaries in. Extra serve flags
// come from $DNSCONFIGURER_SERVE_ARGS. README.md has the last numbers.
package bench
