// Package critest runs cri-tools' critest, the CRI validation suite every
// container runtime passes, against the harness's containerd
// (test/e2e/containerd) three ways: straight to containerd, through the
// real `dnsconfigurer shim` binary, and (containerd 2.x) with the real
// `dnsconfigurer nri` plugin attached. Every spec not in the skip list must
// pass each way; the skip list is what fails straight against the same
// containerd offline, and the direct run proves it.
//
// Nothing is pulled from the internet: critest's images are stand-ins built
// here (test/cluster's tools root filesystem, a `top` that sleeps, a web
// server made of nc) and served by an in-memory registry
// (go-containerregistry's pkg/registry) on 127.0.0.1 in the harness's
// network namespace; critest runs in that namespace with
// --registry-prefix localhost:PORT, so every image it asks for is pulled
// from there.
//
// The test skips unless $DNSCONFIGURER_CRITEST names a critest binary
// (test/e2e/critest.sh builds it) and it runs as root.
package critest
