package cluster

import (
	_ "embed"
	"fmt"
	"net/netip"
)

// The operator's cluster of TestClusterMigration: what a kubeadm cluster
// with NodeLocal DNSCache has before dnsconfigurer, customised the way
// operators customise it.
var (
	// StubZoneA is the answer of the stub domain's own server (corp.example,
	// on NodeIP:StubZonePort) for every name under it.
	StubZoneA    = netip.MustParseAddr("198.51.100.7")
	StubZoneAAAA = netip.MustParseAddr("2001:db8::7")
	// HostsA is the address of legacy.internal in the hosts file.
	HostsA = netip.MustParseAddr("10.1.2.3")
)

const (
	// StubZone is the Corefile's stub domain.
	StubZone = "corp.example."
	// StubZonePort is the port of its server on NodeIP.
	StubZonePort = 5353
)

// The operator's Corefile and manifests are fmt formats: operatorCorefile
// and operatorManifests fill them.
var (
	//go:embed testdata/operator-Corefile
	operatorCorefileFormat string
	//go:embed testdata/operator-manifests.yaml
	operatorManifestsFormat string
)

// operatorCorefile is kubespray's Corefile: its template
// (roles/kubernetes-apps/ansible/templates/coredns-config.yml.j2 at
// kubespray 46dbdd39, the source of test/convert/corpus/02) rendered with
// the values its docs (docs/advanced/dns-stack.md, defaults/main.yml)
// give as examples, CoreDNS accepting them all:
//   - coredns_external_zones: corp.example, its nameserver the stub
//     domain's server, the default cache 5: a server block of its own;
//   - coredns_default_zone_cache_block: cache 3600 with success 3000,
//     denial 0 and prefetch 10 1m, so the two blocks' caches differ;
//   - coredns_rewrite_block: the documented "rewrite stop" regex pair;
//   - old_dns_domains: cluster.old, a suffix rewrite with answer auto;
//   - dns_etchosts: the ConfigMap key hosts, read in every block;
//   - errors' consolidate line (dns_upstream_forward_extra_opts
//     defaults), upstream_dns_servers empty (/etc/resolv.conf).
//
// Where kubespray writes no address of the test's (the nameserver), the
// format fills it.
func operatorCorefile() string {
	return fmt.Sprintf(operatorCorefileFormat, NodeIP, StubZonePort)
}

// indent prefixes every line of s with n spaces (a YAML block scalar).
func indent(s string, n int) string {
	pad := fmt.Sprintf("%*s", n, "")
	out := pad
	for i, r := range s {
		out += string(r)
		if r == '\n' && i < len(s)-1 {
			out += pad
		}
	}
	return out
}

// operatorManifests are kubeadm's CoreDNS add-on objects (ServiceAccount,
// RBAC, ConfigMap, Deployment, Service kube-dns at kubeDNS), the
// ConfigMap with kubespray's hosts key, the Service the rewrites point at, and NodeLocal DNSCache as its upstream manifest
// (nodelocaldns.yaml) has it: Service kube-dns-upstream, ConfigMap
// node-local-dns, DaemonSet node-local-dns.
//
// node-cache itself is not on the module proxy. Its stand-in runs what
// node-cache runs, CoreDNS with NodeLocal's Corefile, and does node-cache's
// set-up around it from a shell: both addresses on an interface of its own
// named "nodelocaldns" as node-cache's (a veth pair: this kernel has no
// dummy link type, which node-cache uses), node-cache's NOTRACK and ACCEPT
// rules with the node's own iptables, a listener on node-cache's own
// metrics port (0.0.0.0:9353), and on SIGTERM their removal once CoreDNS
// has stopped. The Corefile's "."
// goes to the cluster DNS, as kops's forwardToKubeDNS has it, so that the
// cluster DNS's stub domain, hosts and rewrite hold through it.
func operatorManifests(kubeDNS netip.Addr) string {
	return fmt.Sprintf(operatorManifestsFormat, indent(operatorCorefile(), 4), NodeIP, NodeName, CoreDNSImage, kubeDNS, NodeLocalDNS, NodeCacheImage, nodeCacheScript(kubeDNS), HostsA)
}

// nodeCacheScript is the node-cache stand-in's set-up (see
// operatorManifests): node-cache's rules for each local address (raw
// NOTRACK both ways, for pods and for host-network clients, and filter
// ACCEPT), its Corefile with the upstream Service's address put in from the
// Service environment, and the teardown on SIGTERM.
func nodeCacheScript(kubeDNS netip.Addr) string {
	return fmt.Sprintf(`set -u
ips="%s %s"
rules() {
  for ip in $ips; do for p in udp tcp; do
    chroot /host iptables -w -t raw "$1" PREROUTING -p $p -d $ip --dport 53 -j NOTRACK
    chroot /host iptables -w -t raw "$1" OUTPUT -p $p -s $ip --sport 53 -j NOTRACK
    chroot /host iptables -w -t raw "$1" OUTPUT -p $p -d $ip --dport 53 -j NOTRACK
    chroot /host iptables -w -t filter "$1" INPUT -p $p -d $ip --dport 53 -j ACCEPT
    chroot /host iptables -w -t filter "$1" OUTPUT -p $p -s $ip --sport 53 -j ACCEPT
  done; done
}
teardown() {
  kill -TERM "$pid" 2>/dev/null; wait "$pid"
  kill "$nc" 2>/dev/null
  rules -D
  ip link del nodelocaldns
  echo "node-cache stand-in: torn down"
  exit 0
}
ip link add nodelocaldns type veth peer name nodelocaldnsp
ip link set nodelocaldnsp up
ip link set nodelocaldns up
for ip in $ips; do ip addr add $ip/32 dev nodelocaldns; done
rules -I
sed "s/__PILLAR__CLUSTER__DNS__/$KUBE_DNS_UPSTREAM_SERVICE_HOST/g" /etc/coredns/Corefile.base > /tmp/Corefile
# node-cache's own metrics listener (-metrics-listen-address 0.0.0.0:9353).
nc -lk 9353 >/dev/null 2>&1 &
nc=$!
/coredns -conf /tmp/Corefile &
pid=$!
trap teardown TERM INT
wait "$pid"
teardown
`, NodeLocalDNS, kubeDNS)
}
