#!/usr/bin/env bash
# test/e2e/critest.sh: builds cri-tools' critest (the CRI validation suite,
# pinned to $version) from the Go module proxy into
# ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/critest-<version>/critest once,
# and prints the binary's path. The critest e2e test runs it:
#
#   DNSCONFIGURER_CRITEST=$(test/e2e/critest.sh) go test -count=1 ./test/e2e/critest/
#
# critest is a Ginkgo test binary (cri-tools' cmd/critest is a _test package),
# so it is built with go test -c from a writable copy of the module. About a
# minute warm of the module cache on two cores.
set -euo pipefail
version=v1.36.0
dir="${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/critest-${version}"
if [[ ! -x $dir/critest ]]; then
	mkdir -p "$(dirname "$dir")"
	tmp="$(mktemp -d "${dir}.XXXXXX")"
	trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
	src="$(cd / && go mod download -json "sigs.k8s.io/cri-tools@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	if [[ -z $src || ! -d $src ]]; then
		echo "critest.sh: go mod download gave no module directory for sigs.k8s.io/cri-tools@${version}" >&2
		exit 1
	fi
	cp -r "$src" "$tmp/src"
	chmod -R u+w "$tmp/src"
	(cd "$tmp/src" && GOFLAGS=-mod=mod GOWORK=off go test -c -o "$tmp/critest" ./cmd/critest) >&2
	rm -rf "$tmp/src"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	chmod 0755 "$dir"
	trap - EXIT
fi
echo "$dir/critest"
