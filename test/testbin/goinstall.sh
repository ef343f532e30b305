#!/usr/bin/env bash
# goinstall.sh builds one Go command at a pinned version, for helm.sh and
# kustomize.sh, and prints the binary's path.
#
# Usage: test/testbin/goinstall.sh NAME VERSION PACKAGE
#
# The binary goes to
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/NAME/VERSION/NAME
#
# and the build is skipped when it is already there. It is built with
# go install outside any module, so that the command resolves its own
# go.mod.
set -euo pipefail

if [[ $# -ne 3 ]]; then
	echo "usage: $0 NAME VERSION PACKAGE" >&2
	exit 2
fi
name=$1 version=$2 pkg=$3
# GOINSTALL_LDFLAGS adds -X settings (the cache directory then carries
# GOINSTALL_VARIANT, so that a build without them is not taken for one).
out="${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/$name/$version${GOINSTALL_VARIANT:+-$GOINSTALL_VARIANT}"
if [[ -x "$out/$name" ]]; then
	echo "$out/$name"
	exit 0
fi
mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
echo "goinstall.sh: building $name $version into $out" >&2
(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN="$tmp" \
	go install -trimpath -ldflags "-s -w ${GOINSTALL_LDFLAGS:-}" "$pkg@$version")
mv -f "$tmp/$name" "$out/$name"
echo "goinstall.sh: done in $((SECONDS - start))s" >&2
echo "$out/$name"
