// Package dualstack tests the cluster DNS and the node-local stage on
// IPv6 and dual-stack addresses, with real resolvers (issue 31).
//
// The real binary serves in network namespaces the tests create, on ULA
// (fd00::/8) and loopback addresses. glibc (getent), musl (built with
// musl-gcc) and the pure Go resolver, run by test/e2e/stubresolver, look
// names up over UDP and TCP; a DNS client checks
// the exact answers (AAAA, NODATA, PTR under ip6.arpa, SRV, pod names,
// autopath by an IPv6 source).
//
// Run as root after test/e2e/setup.sh (iproute2, ip6tables, conntrack,
// musl-tools):
//
//	go test -count=1 -v ./test/e2e/dualstack/
package dualstack
