// Package critest runs cri-tools' critest, the CRI validation suite every
// container runtime passes, against the harness's containerd three ways.
//
// The harness is test/e2e/containerd. The three ways are straight to
// containerd, through the real `dnsconfigurer shim` binary, and (containerd
// 2.x) with the real `dnsconfigurer nri` plugin attached.
//
// Straight to containerd every spec runs, and exactly the skip list
// (`skipped`, each entry with its reason) must fail: an entry that passes
// is an error, and so is a failure that is not on it. Through the shim and
// with the NRI plugin the skip list is skipped and every other spec must
// pass, as many as passed straight. A spec on the `racy` list (a race
// inside containerd, each with its upstream issue) that fails is rerun
// alone, up to twice, and fails the test only if it fails every time.
//
// Nothing is pulled from the internet: critest's images are stand-ins
// built here on Debian's busybox (test/cluster.BusyboxRootfs: applets hard
// linked as in the busybox image; nginx and httpd are busybox httpd behind
// scripts that act like them, nonewprivs a set-user-ID Go program printing
// its effective UID) and served by an in-memory registry
// (go-containerregistry's pkg/registry) on 127.0.0.1 in the harness's
// network namespace, which the harness's containerd mirrors
// registry.k8s.io, gcr.io and k8s.gcr.io to. critest runs as a process of
// the harness's node (Harness.NodeCommand: its network, containerd's mount
// and PID namespaces), with / an rshared mount there (Options.SharedRoot)
// for the mount propagation specs and the portmap CNI plugin
// (Options.HostPorts) for the host port spec.
//
// The test skips unless $DNSCONFIGURER_CRITEST names a critest binary
// (test/e2e/critest.sh builds it) and it runs as root.
// $DNSCONFIGURER_CRITEST_FOCUS runs only the specs it matches.
package critest
