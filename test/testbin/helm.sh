#!/usr/bin/env bash
# helm.sh builds the helm CLI, which test/deploy runs to lint the output of
# `helm template` with `dnsconfigurer validate`, and prints the binary's path.
#
# Usage: test/testbin/helm.sh
#
# The binary goes to
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/helm/<version>/helm
#
# and the build is skipped when it is already there. It is built with
# go install at the pinned version, outside any module, so that helm
# resolves its own go.mod. test/deploy looks in the same place, or at
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
out="${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/helm/$version"
if [[ -x "$out/helm" ]]; then
	echo "$out/helm"
	exit 0
fi
mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
echo "helm.sh: building helm $version into $out" >&2
(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="$tmp" \
	go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$version")
mv -f "$tmp/helm" "$out/helm"
echo "helm.sh: done in $((SECONDS - start))s" >&2
echo "$out/helm"
