// Package bench runs `dnsconfigurer serve` and CoreDNS 1.15 side by side on
// 127.0.0.1, as real processes, and measures them.
//
// It runs the cluster DNS, and the node-local stage with --mode node-local.
// It measures what issue 15 (and the node-local stage's issue) asks for:
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
//     in-cluster name answered throughout;
//   - TestNodeLocalSideBySide: as TestSideBySide for the node-local stage
//     (`serve --mode node-local`) against CoreDNS's forward and cache (what
//     NodeLocal DNSCache runs), on a cached cluster name; it logs the ratios
//     against the 1.3× QPS target and asserts only correct answers;
//   - TestNodeLocalMemoryFill: 100,000 distinct cluster names with answers
//     of 1-4 KB over TCP to each server in turn; the node-local stage, with
//     --cache-size 32Mi and no GOMEMLIMIT, must keep its peak RSS (VmHWM)
//     within the DaemonSet's 128 MiB and dnsconfigurer_cache_bytes within
//     32 MiB, and answer every name right;
//   - TestChurn (issue 28): a real kube-apiserver and etcd (test/apiserver)
//     holding $DNSCONFIGURER_CHURN_SERVICES ClusterIP Services and
//     $DNSCONFIGURER_CHURN_HEADLESS headless Services with an EndpointSlice
//     of 50 endpoints each, watched by serve --kubeconfig and by CoreDNS's
//     kubernetes plugin side by side. At each rate of
//     $DNSCONFIGURER_CHURN_RATE it creates Services and moves endpoints and
//     polls both servers over UDP until each answers each change. It
//     reports write→answer percentiles, CPU per 100 changes, RssAnon and
//     the query p99 under a fixed load with and without churn. It asserts
//     that every change is answered.
//   - TestScale (issue 71; DNSCONFIGURER_SCALE=1 as well): the 5,000-node
//     load (Nodes, 150,000 Pods, 10,000 Services and EndpointSlices) written
//     into a real API server's etcd; serve with the deployed settings and
//     CoreDNS with kubeadm's Corefile under a steady lookup load while the
//     API server is restarted twice and objects change; steady and relist
//     memory, failed lookups, the outage's change, relist CPU, and OOM kills
//     under a 170 Mi memory cgroup, one `scale: MEASURE: ours X coredns Y`
//     line each; then node-local stages' cost to the API server and their
//     restart storm.
//
// TestRewriteSideBySide (issue 30) is a correctness test of about a
// minute: the same rewrite rules in dnsconfigurer's rewrites and CoreDNS's
// rewrite plugin, the same Services in a real kube-apiserver and etcd;
// rcode, question and answer section (TTLs aside) must be equal for every
// question. It needs no DNSCONFIGURER_BENCH, only the coredns,
// kube-apiserver and etcd binaries (it skips without them, and in -short
// mode):
//
//	DNSCONFIGURER_TESTBIN=$(test/testbin/build.sh) go test -count=1 -v -run TestRewriteSideBySide ./test/bench/
//
// The others skip unless DNSCONFIGURER_BENCH=1, so `go test ./...` stays fast:
//
//	DNSCONFIGURER_BENCH=1 go test -v -run 'TestSideBySide|TestDeadUpstreamFlood' ./test/bench/ -timeout 10m
//	DNSCONFIGURER_BENCH=1 go test -count=1 -v -run 'TestNodeLocal' ./test/bench/ -timeout 10m
//	DNSCONFIGURER_BENCH=1 DNSCONFIGURER_TESTBIN=$(test/testbin/build.sh) go test -count=1 -v -run TestChurn ./test/bench/ -timeout 60m
//
// dnsconfigurer is built from the working tree (test/buildbin); coredns is
// $DNSCONFIGURER_COREDNS, else $DNSCONFIGURER_TESTBIN/coredns, else the
// directory test/testbin/build.sh caches its binaries in. Extra serve flags
// come from $DNSCONFIGURER_SERVE_ARGS. TestChurn's kube-apiserver and
// etcd come from $DNSCONFIGURER_TESTBIN or build.sh's cache as well.
// README.md has the method, the knobs and the last numbers.
package bench
