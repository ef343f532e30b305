#!/usr/bin/env bash
# setup.sh installs what the real-containerd end-to-end tests in test/e2e and
# the one-node cluster in test/cluster need: Debian's containerd, runc, CNI
# plugins and iproute2; iptables and conntrack for kube-proxy; and
# bind9-dnsutils (dig, nslookup, host) and netcat-openbsd, which the cluster's
# stand-in test images copy from the host; busybox (not busybox-static, whose
# shell runs applets without a $PATH lookup), of which the critest suite's
# stand-in images are made; musl-tools, whose musl-gcc builds the musl
# resolver of test/cluster's migration test; nftables, whose nft kube-proxy's nftables
# mode drives (test/cluster's multi-node run); skopeo, which test/image reads the image
# archive with as docker load and an OCI archive reader do; zsh and fish, which
# cmd/dnsconfigurer's TestCompletionShells completes in. It is idempotent: a
# second run installs nothing and only prints the versions. It never starts a
# containerd of its own and never touches the host's network configuration;
# the tests start everything themselves inside a network namespace.
set -euo pipefail

packages=(containerd runc containernetworking-plugins iproute2 iptables conntrack bind9-dnsutils netcat-openbsd ca-certificates busybox skopeo musl-tools nftables zsh fish)

if [[ $(id -u) -ne 0 ]]; then
	echo "test/e2e/setup.sh: must run as root (apt-get install)" >&2
	exit 1
fi

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if ((${#missing[@]} > 0)); then
	echo "test/e2e/setup.sh: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# --no-install-recommends keeps docker/criu and friends out. Debian's
	# containerd package would start a system containerd under systemd; on a
	# machine without systemd as PID 1 invoke-rc.d only reports that.
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Debian package of the CNI plugins installs them under
# /usr/lib/cni; the harness looks there and in /opt/cni/bin.
cni_dir=""
for d in /usr/lib/cni /opt/cni/bin; do
	if [[ -x $d/bridge && -x $d/host-local && -x $d/loopback ]]; then
		cni_dir=$d
		break
	fi
done
if [[ -z $cni_dir ]]; then
	echo "test/e2e/setup.sh: bridge, host-local and loopback CNI plugins not found" >&2
	exit 1
fi

echo "containerd: $(containerd --version)"
echo "runc:       $(runc --version | head -n1)"
echo "ctr:        $(ctr --version)"
echo "cni:        $cni_dir ($(dpkg-query -W -f='${Version}' containernetworking-plugins))"
echo "ip:         $(ip -V)"
echo "iptables:   $(iptables --version)"
echo "conntrack:  $(conntrack --version)"
echo "dig:        $(dig -v 2>&1)"
echo "skopeo:     $(skopeo --version)"
