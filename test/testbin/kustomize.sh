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
# and the build is skipped when it is already there. It is built with
# go install at the pinned version, outside any module, so that kustomize
# resolves its own go.mod: about a minute on two cores with a cold cache.
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
out="${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/kustomize/$version"
if [[ -x "$out/kustomize" ]]; then
	echo "$out/kustomize"
	exit 0
fi
mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
echo "kustomize.sh: building kustomize $version into $out" >&2
(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="$tmp" \
	go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$version")
mv -f "$tmp/kustomize" "$out/kustomize"
echo "kustomize.sh: done in $((SECONDS - start))s" >&2
echo "$out/kustomize"
