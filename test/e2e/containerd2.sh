#!/usr/bin/env bash
# test/e2e/containerd2.sh: builds containerd 2.x (containerd,
# containerd-shim-runc-v2 and ctr, pinned to $version) from the Go module
# proxy into ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/containerd-<version>/
# once, and prints that directory. Point the containerd e2e harness at it:
#
#   DNSCONFIGURER_CONTAINERD_BIN=$(test/e2e/containerd2.sh) go test ./test/e2e/...
#
# About a minute warm of the module cache, two to three cold, on two cores.
# Debian's runc (test/e2e/setup.sh) runs it.
set -euo pipefail
version=v2.4.2
dir="${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/containerd-${version}"
if [[ ! -x $dir/containerd || ! -x $dir/containerd-shim-runc-v2 || ! -x $dir/ctr ]]; then
	mkdir -p "$(dirname "$dir")"
	tmp="$(mktemp -d "${dir}.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	mod=github.com/containerd/containerd/v2/cmd
	(cd / && GOBIN="$tmp" go install "$mod/containerd@$version" "$mod/containerd-shim-runc-v2@$version" "$mod/ctr@$version") >&2
	rm -rf "$dir"
	mv "$tmp" "$dir"
	chmod 0755 "$dir"
	trap - EXIT
fi
echo "$dir"
