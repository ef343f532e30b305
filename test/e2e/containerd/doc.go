// Package containerd runs a real containerd, with its CRI plugin, runc and a
// CNI bridge, for end-to-end tests.
//
// The tests are those of dnsconfigurer's CRI shim and of the full chain.
// Nothing is mocked and nothing is pulled: the pause and test images are
// built from test/e2e/images and packed as OCI tarballs here.
//
// Start(t, Options{}) creates a network namespace "dnscfg-e2e-<random>"
// holding only loopback and the pod bridge (dnscfg0, BridgeAddr on
// PodSubnet, no masquerade, no default route), so nothing a test runs can
// leave the machine. containerd runs in it with its own config (schema
// version 2 for Debian bookworm's containerd 1.6, version 3 for containerd
// 2.x: Options.Runtime, by default $DNSCONFIGURER_CONTAINERD_BIN's binaries
// from test/e2e/containerd2.sh, else PATH's), root, state and
// socket under a temporary directory, in a private mount namespace and a
// PID namespace whose PID 1 is a shell that runs it; Close, registered with
// t.Cleanup, removes the sandboxes through the CRI, stops containerd, and
// so every shim, container and mount, then deletes the cgroups, the
// network namespace and the directory. Restart stops containerd and starts
// it again in the same namespaces, on the same root, state, config and
// sockets, while the shims and containers keep running.
//
// Client is a small CRI v1 client: RunPod from a PodSpec (name, namespace,
// UID, host network, hostname, DNS config, annotations), StartContainer of
// TestImage with testbin arguments, Exec, Logs, ResolvConf, Hostname and
// stop/remove. Dial gives one for any endpoint, such as a shim in front of
// the harness's containerd.
//
// Tests skip when not run as root on Linux or when containerd, runc, ctr,
// the CNI plugins or iproute2 are missing; test/e2e/setup.sh installs them
// from Debian's packages.
//
// This package is test infrastructure: only tests import it.
package containerd
