// Package registry runs a real OCI registry for tests: the CNCF
// distribution registry, with TLS and storage in a temporary directory.
//
// Start runs the binary test/testbin/registry.sh builds on an address the
// test names, optionally inside a network namespace (a containerd harness's,
// so that its containerd pulls from it). The CA and the server certificate
// are made for that address alone. Start returns once /v2/ answers.
//
// Push pushes an archive hack/build-image wrote with internal/imagebuild,
// the library behind hack/push-image. WriteHostsTOML writes the
// <config_path>/<host>/hosts.toml that makes containerd 1.6 and 2.x trust
// the CA for the registry. RemoteOptions read it back with
// go-containerregistry.
//
// Tests skip when the binary is missing, unless $DNSCONFIGURER_REGISTRY
// names it: then a missing binary fails them.
//
// This package is test infrastructure: only tests import it.
package registry
