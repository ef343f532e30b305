#!/usr/bin/env bash
# registry.sh builds the CNCF distribution registry, which test/registry
# runs as a real OCI registry (TLS, filesystem storage) for
# hack/push-image and containerd's pulls, and prints the binary's path.
#
# Usage: test/testbin/registry.sh
#
# The binary goes to
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/registry/<version>/registry
#
# and the build is skipped when it is already there. goinstall.sh builds
# it at the pinned version. test/registry looks in the same place, or at
# $DNSCONFIGURER_REGISTRY when that is set (then a missing binary fails
# the test rather than skips it):
#
#   export DNSCONFIGURER_REGISTRY="$(test/testbin/registry.sh)"
set -euo pipefail

# test/registry's Version names the same version.
version=v3.1.2

if [[ $# -ne 0 ]]; then
	echo "usage: $0" >&2
	exit 2
fi
# Without the release Makefile's -X the registry calls itself
# v3.1.2+unknown; nothing reads that.
exec "$(dirname "${BASH_SOURCE[0]}")/goinstall.sh" registry "$version" github.com/distribution/distribution/v3/cmd/registry
