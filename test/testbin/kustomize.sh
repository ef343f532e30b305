#!/usr/bin/env bash
# kustomize.sh builds the kustomize CLI, which test/deploy runs as the README
# tells users to ("kustomize edit set image ..."; kubectl embeds kustomize's
# build but has no "edit"), and prints the binary's path.
#
# Usage: test/testbin/kustomize.sh
#
# The binary goes to
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/kustomize/<version>/kustomize
#
# and the build is skipped when it is already there. goinstall.sh builds
# it at the pinned version: about a minute on two cores with a cold cache.
# test/deploy looks in the same place, or at $DNSCONFIGURER_KUSTOMIZE when
# that is set (then a missing binary fails the test rather than skips it):
#
#   export DNSCONFIGURER_KUSTOMIZE="$(test/testbin/kustomize.sh)"
set -euo pipefail

# test/deploy's kustomizeVersion names the same version.
version=v5.7.1

if [[ $# -ne 0 ]]; then
	echo "usage: $0" >&2
	exit 2
fi
exec "$(dirname "${BASH_SOURCE[0]}")/goinstall.sh" kustomize "$version" sigs.k8s.io/kustomize/kustomize/v5
