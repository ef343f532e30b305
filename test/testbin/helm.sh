#!/usr/bin/env bash
# helm.sh builds the helm CLI, which test/deploy runs to lint the output of
# `helm template` with `dnsconfigurer validate`, and prints the binary's path.
#
# Usage: test/testbin/helm.sh
#
# The binary goes to
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/helm/<version>-k8s1.34/helm
#
# and the build is skipped when it is already there. goinstall.sh builds
# it at the pinned version. test/deploy looks in the same place, or at
# $DNSCONFIGURER_HELM when that is set (then a missing binary fails the
# test rather than skips it):
#
#   export DNSCONFIGURER_HELM="$(test/testbin/helm.sh)"
set -euo pipefail

# test/deploy's helmVersion names the same version.
version=v3.19.0

if [[ $# -ne 0 ]]; then
	echo "usage: $0" >&2
	exit 2
fi
# A release of helm carries its version and the Kubernetes version its
# client-go is (1.34 for v3.19), set by its Makefile with -X; without them
# helm says v3.19.0+unknown... and takes Kubernetes for v1.20, so a chart
# needing 1.30 (this one) refuses `helm template` without --kube-version.
export GOINSTALL_VARIANT=k8s1.34
export GOINSTALL_LDFLAGS="-X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34"
exec "$(dirname "${BASH_SOURCE[0]}")/goinstall.sh" helm "$version" helm.sh/helm/v3/cmd/helm
