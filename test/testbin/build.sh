#!/usr/bin/env bash
# build.sh builds the Kubernetes binaries that the integration tests
# (test/apiserver: kube-apiserver, etcd) and the real-cluster end-to-end tests
# (test/cluster: also kubelet, kube-controller-manager, kube-scheduler,
# kube-proxy, e2e.test, agnhost and coredns) run, and prints the directory
# holding them.
#
# Usage: test/testbin/build.sh [-m MODULE] [OUTDIR]
#
# MODULE is the Go module that pins the release: test/testbin itself (the
# default, the newest release CI tests) or one of its release-* directories
# (release-1.34: the oldest release CI tests). e2e.test is upstream's
# sig-network specs alone (e2edns), not the whole upstream suite.
#
# Without OUTDIR the binaries go to a cache directory outside the repository,
# keyed by the sha256 of the module's go.sum:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/testbin/<sha256 of go.sum>/
#
# test/apiserver looks in the same place, or in $DNSCONFIGURER_TESTBIN when
# that is set. The build is skipped when the directory already holds binaries
# built from the current go.sum. A cold build takes about 25 minutes on two
# cores and about 3 GB of RAM; set GOFLAGS=-p=1 to trade time for memory.
#
# Only the directory is printed on stdout, so callers can do
#
#   export DNSCONFIGURER_TESTBIN="$(test/testbin/build.sh)"
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage() {
	echo "usage: $0 [-m MODULE] [OUTDIR]" >&2
	exit 2
}
if [[ "${1:-}" == "-m" ]]; then
	[[ $# -ge 2 ]] || usage
	case "$2" in
	/*) here="$2" ;;
	*) here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$2" ;;
	esac
	[[ -f "$here/go.mod" ]] || { echo "build.sh: $here has no go.mod" >&2; exit 2; }
	here="$(cd "$here" && pwd)"
	shift 2
fi
# coredns is a module of its own (its dependencies would move Kubernetes'
# ones), built with go install at this pinned version; agnhost's image ships
# it as /coredns, and the upstream DNS e2e specs run it from there.
coredns_version=v1.15.0
sum="$(sha256sum "$here/go.sum" | cut -d' ' -f1)"
# The stamp names everything the binaries were built from.
stamp="$sum coredns $coredns_version e2edns $(sha256sum "$here/e2edns/dns_test.go" | cut -d' ' -f1)"
bins=(kube-apiserver etcd kubectl kubelet kube-controller-manager kube-scheduler kube-proxy agnhost e2e.test coredns)

if [[ $# -gt 1 ]]; then
	usage
fi
if [[ $# -eq 1 ]]; then
	out="$1"
else
	out="${XDG_CACHE_HOME:-$HOME/.cache}/dnsconfigurer/testbin/$sum"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# The stamp records which go.sum the binaries were built from, so a stale
# OUTDIR given on the command line is rebuilt rather than trusted.
built() {
	local b
	for b in "${bins[@]}"; do
		[[ -x "$out/$b" ]] || return 1
	done
	[[ -f "$out/.go.sum.sha256" ]] &&
		[[ "$(cat "$out/.go.sum.sha256")" == "$stamp" ]]
}

if built; then
	echo "$out"
	exit 0
fi

# Two builds into the same directory (two CI jobs, two engineers) would race
# on the rename below; serialise them and let the loser reuse the result.
exec 9>"$out/.lock"
if command -v flock >/dev/null; then
	flock 9
fi
if built; then
	echo "$out"
	exit 0
fi

cd "$here"
export GOWORK=off CGO_ENABLED=0

version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
if [[ ! "$version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+ ]]; then
	echo "build.sh: cannot parse k8s.io/kubernetes version $version" >&2
	exit 1
fi
major="${BASH_REMATCH[1]}"
minor="${BASH_REMATCH[2]}"

tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# kubectl and client-go's discovery parse the server version, so the
# apiserver must report a real one rather than v0.0.0-master.
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"

start=$SECONDS
echo "build.sh: building Kubernetes $version (kube-apiserver, kubectl, kubelet, kube-controller-manager, kube-scheduler, kube-proxy, agnhost) into $out" >&2
# One go build for all of them shares the compiled packages.
go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kubelet \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kube-proxy \
	k8s.io/kubernetes/cmd/kubectl \
	k8s.io/kubernetes/test/images/agnhost
echo "build.sh: building e2e.test $version ($((SECONDS - start))s so far)" >&2
go test -c -trimpath -ldflags "$ldflags" -o "$tmp/e2e.test" ./e2edns
echo "build.sh: building etcd $(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) ($((SECONDS - start))s so far)" >&2
go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
echo "build.sh: building coredns $coredns_version ($((SECONDS - start))s so far)" >&2
# Outside this module, so that coredns resolves its own go.mod.
(cd "$tmp" && GOFLAGS=-mod=mod GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$coredns_version")

for b in "${bins[@]}"; do
	mv -f "$tmp/$b" "$out/"
done
echo "$stamp" >"$out/.go.sum.sha256"
echo "build.sh: done in $((SECONDS - start))s" >&2
echo "$out"
