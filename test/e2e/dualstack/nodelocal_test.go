package dualstack

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodenet"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/stubresolver"
)

// The node's addresses: the node-local stage's own (a ULA, NodeLocal
// DNSCache's advice for IPv6, and the usual IPv4 link-local one), the
// kube-dns ClusterIPs it takes over (dns4, dns6), the cluster DNS pods'
// own Service (kube-dns-upstream) and the cluster DNS pod.
const (
	local6    = "fd00::10"
	local4    = "169.254.20.10"
	upstream6 = "fd00:10:96::b"
	dnsPod6   = "fd00:10:233::1"
	dnsPod4   = "10.233.0.1"
)

// dualNode is a node namespace with a dual-stack pod namespace behind a
// veth, kube-proxy's DNAT of the Service addresses to the cluster DNS pod
// (ip6tables and iptables), and the cluster DNS running there.
type dualNode struct {
	node, pod *netns.NS
	dir       string
}

func newDualNode(t *testing.T) *dualNode {
	t.Helper()
	netns.Require(t)
	for _, tool := range []string{"iptables", "ip6tables", "conntrack"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (bash test/e2e/setup.sh installs it)", tool)
		}
	}
	n := &dualNode{node: netns.New(t), pod: netns.New(t), dir: t.TempDir()}
	veth := "nl" + n.pod.Name[len(n.pod.Name)-6:]
	n.node.IP(t, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", n.pod.Path)
	n.node.IP(t, "addr", "add", "10.244.0.1/24", "dev", veth)
	n.node.IP(t, "addr", "add", "fd00:10:244::1/64", "dev", veth, "nodad")
	n.node.IP(t, "link", "set", veth, "up")
	n.pod.IP(t, "addr", "add", "10.244.0.5/24", "dev", "eth0")
	n.pod.IP(t, "addr", "add", pod6+"/64", "dev", "eth0", "nodad")
	n.pod.IP(t, "link", "set", "eth0", "up")
	n.pod.IP(t, "route", "add", "default", "via", "10.244.0.1")
	n.pod.IP(t, "-6", "route", "add", "default", "via", "fd00:10:244::1")
	// The Service CIDRs are routed (kube-proxy's DNAT rewrites the
	// destination after the routing decision); the cluster DNS pod and the
	// upstream stub are the node's own addresses.
	n.node.IP(t, "route", "add", "10.96.0.0/12", "dev", veth)
	n.node.IP(t, "-6", "route", "add", "fd00:10:96::/108", "dev", veth)
	n.node.AddAddress(t, dnsPod4+"/32")
	n.node.IP(t, "addr", "add", dnsPod6+"/128", "dev", "lo", "nodad")
	n.node.IP(t, "addr", "add", upstream+"/128", "dev", "lo", "nodad")
	// kube-proxy (iptables mode): the kube-dns ClusterIPs and the upstream
	// Service DNAT to the cluster DNS pod, for pods (PREROUTING) and the
	// node (OUTPUT).
	for _, r := range []struct{ tool, svc, to string }{
		{"ip6tables", dns6, "[" + dnsPod6 + "]:53"}, {"ip6tables", upstream6, "[" + dnsPod6 + "]:53"},
		{"iptables", dns4, dnsPod4 + ":53"},
	} {
		for _, chain := range []string{"PREROUTING", "OUTPUT"} {
			for _, proto := range []string{"udp", "tcp"} {
				args := []string{"netns", "exec", n.node.Name, r.tool, "-t", "nat", "-A", chain, "-d", r.svc, "-p", proto,
					"--dport", "53", "-j", "DNAT", "--to-destination", r.to}
				if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
					t.Fatalf("%s %v: %v: %s", r.tool, args, err, out)
				}
			}
		}
	}
	testkit.NewUpstream(t, externalReply(), testkit.At("["+upstream+"]:5353"), testkit.ListenIn(n.node.Do))
	if err := os.WriteFile(filepath.Join(n.dir, "objects.yaml"), []byte(objects), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "resolv.conf"), []byte("nameserver "+upstream+"\nsearch example.internal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, n.node, "serve", "--listen", "["+dnsPod6+"]:53", "--listen", dnsPod4+":53", "--objects", n.dir,
		"--upstream", "["+upstream+"]:5353", "--metrics-listen", "127.0.0.1:9153", "--lameduck", "0s")
	waitLog(t, p, `msg="serving DNS"`)
	return n
}

// startNodeLocal runs the node-local stage in transparent mode on both
// families: its own addresses and the kube-dns ClusterIPs, the upstream
// Service over IPv6.
func (n *dualNode) startNodeLocal(t *testing.T) *buildbin.Proc {
	t.Helper()
	p := start(t, n.node, "serve", "--mode", "node-local", "--local-ip", local6+","+dns6+","+local4+","+dns4,
		"--setup-interface", "--setup-notrack", "--cluster-upstream", "["+upstream6+"]:53",
		"--resolv-conf", filepath.Join(n.dir, "resolv.conf"), "--lock-file", filepath.Join(n.dir, "run", "node-local.lock"),
		"--metrics-listen", "127.0.0.1:9353", "--reuse-port", "--lameduck", "0s")
	waitLog(t, p, "notrack table in place")
	return p
}

// setup reports whether the notrack table covers the four addresses and
// whether they are on an interface of the node.
func (n *dualNode) setup(t *testing.T) (table, addrs bool) {
	t.Helper()
	ips := []netip.Addr{netip.MustParseAddr(local6), netip.MustParseAddr(dns6), netip.MustParseAddr(local4), netip.MustParseAddr(dns4)}
	table, err := nodenet.NewNftNotrack(int(n.node.Open(t).Fd())).Present(ips, 53)
	if err != nil {
		t.Fatal(err)
	}
	return table, n.node.HasAddresses(t, ips...)
}

// clusterQueries is the cluster DNS's query count over proto from
// clients of family ("1" IPv4, "2" IPv6).
func (n *dualNode) clusterQueries(t *testing.T, proto, family string) float64 {
	t.Helper()
	var sum float64
	for k, v := range metrics(t, n.node, "127.0.0.1:9153") {
		if strings.HasPrefix(k, "dnsconfigurer_dnsserver_requests_total{") && strings.Contains(k, `proto="`+proto+`"`) && strings.Contains(k, `family="`+family+`"`) {
			sum += v
		}
	}
	return sum
}

// conntrack lists the node's conntrack entries of UDP to ip port 53.
func (n *dualNode) conntrack(t *testing.T, ip string) string {
	t.Helper()
	fam := "ipv4"
	if strings.Contains(ip, ":") {
		fam = "ipv6"
	}
	out, _ := exec.Command("ip", "netns", "exec", n.node.Name, "conntrack", "-L", "-f", fam, "-p", "udp", "--orig-dst", ip, "--dport", "53").CombinedOutput()
	var entries []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "udp") {
			entries = append(entries, l)
		}
	}
	return strings.Join(entries, "\n")
}

// podConf is the resolv.conf the node agents give a ClusterFirst pod in
// prod on a node whose kubelet has clusterDNS servers (the policy engine's).
func podConf(t *testing.T, servers ...string) string {
	t.Helper()
	e, err := policy.New(policy.Node{ClusterDNS: servers, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.Compute(policy.Input{Name: "client", Namespace: "prod", Policy: policy.ClusterFirst}, policy.Host{Nameservers: []string{upstream}})
	if err != nil {
		t.Fatal(err)
	}
	return resolvconf.Format(r.Config())
}

// lookupAll resolves the dual-stack names with every resolver in the pod
// through the nameservers of conf, over UDP.
func (n *dualNode) lookupAll(t *testing.T, res []stubresolver.Resolver, conf string) {
	t.Helper()
	n.pod.SetResolvConf(t, conf)
	server := strings.Join(strings.Fields(conf), " ")
	for _, r := range res {
		for _, lk := range []struct{ host, want string }{
			{"web", "10.96.0.20 fd00:10:96::20"},
			{"web6", "fd00:10:96::21"},
			{"web4", "10.96.0.22"},
			{"db", "10.244.0.7 fd00:10:244:: fd00:10:244::7"},
			{"www.example.com", "192.0.2.80 2001:db8::80"},
		} {
			got, err := r.Addrs(n.pod, lk.host)
			if err != nil {
				t.Errorf("via %s, %s: %s: %v", server, r.Name, lk.host, err)
			} else if strings.Join(got, " ") != lk.want {
				t.Errorf("via %s, %s: %s = %v, want %s", server, r.Name, lk.host, got, lk.want)
			}
		}
		names, err := r.Names(n.pod, "fd00:10:96::20")
		if err != nil || strings.Join(names, " ") != "web.prod.svc.cluster.local" {
			t.Errorf("via %s, %s: PTR fd00:10:96::20 = %v %v, want web.prod.svc.cluster.local", server, r.Name, names, err)
		}
	}
}

// TestNodeLocalDualStack: the node-local stage serves its ULA address and
// the IPv6 kube-dns ClusterIP beside the IPv4 ones (node-cache takes one
// family only), out of conntrack on both (nftables, inet), and forwards
// to the cluster DNS over IPv6 TCP: a pod's UDP queries to either
// ClusterIP no longer reach the cluster DNS. Once it stops, kube-proxy's
// DNAT answers again.
func TestNodeLocalDualStack(t *testing.T) {
	n := newDualNode(t)
	res := stubresolver.New(t)

	// Before: kube-proxy's DNAT takes the pod's queries to the cluster DNS.
	r := ask(t, n.pod, "udp", dns6, netip.Addr{}, "web6.prod.svc.cluster.local", 28)
	if len(r.Answer) != 1 {
		t.Fatalf("before node-local, through the DNAT: %v", r)
	}
	if got := n.clusterQueries(t, "udp", "2"); got != 1 {
		t.Fatalf("cluster DNS saw %v UDP queries over IPv6, want the pod's 1", got)
	}
	if table, addrs := n.setup(t); table || addrs {
		t.Fatalf("setup before node-local: table %v, addresses %v", table, addrs)
	}
	if n.conntrack(t, dns6) == "" {
		t.Fatal("no conntrack entry for the DNAT'd query: the conntrack check below would prove nothing")
	}
	exec.Command("ip", "netns", "exec", n.node.Name, "conntrack", "-F").Run()

	nl := n.startNodeLocal(t)
	if table, addrs := n.setup(t); !table || !addrs {
		t.Fatalf("setup after start: table %v, addresses %v", table, addrs)
	}
	udp6, udp4, tcp6 := n.clusterQueries(t, "udp", "2"), n.clusterQueries(t, "udp", "1"), n.clusterQueries(t, "tcp", "2")
	// The agents' resolv.conf for a dual-stack kubelet (clusterDNS IPv6
	// first), and each address alone.
	n.lookupAll(t, res, podConf(t, dns6, dns4))
	for _, server := range []string{local6, dns4} {
		n.lookupAll(t, res, podConf(t, server))
	}
	if got := n.clusterQueries(t, "udp", "2") - udp6; got != 0 {
		t.Errorf("cluster DNS saw %v UDP queries over IPv6 while node-local served, want 0", got)
	}
	if got := n.clusterQueries(t, "udp", "1") - udp4; got != 0 {
		t.Errorf("cluster DNS saw %v UDP queries over IPv4 while node-local served, want 0", got)
	}
	if got := n.clusterQueries(t, "tcp", "2") - tcp6; got == 0 {
		t.Error("cluster DNS saw no TCP query over IPv6: node-local did not forward to the IPv6 upstream Service")
	}
	for _, ip := range []string{dns6, local6, dns4} {
		if ct := n.conntrack(t, ip); ct != "" {
			t.Errorf("conntrack entries for %s while node-local serves it:\n%s", ip, ct)
		}
	}
	served := metrics(t, n.node, "127.0.0.1:9353")
	for _, l := range []string{"[" + dns6 + "]:53", "[" + local6 + "]:53", dns4 + ":53"} {
		if served[testkit.Key("dnsconfigurer_dnsserver_listen_queries_total", "listen", l, "server", "nodelocal")] == 0 {
			t.Errorf("node-local answered nothing on %s", l)
		}
	}

	// Stop: the setup goes, and the IPv6 ClusterIP is the cluster DNS's again.
	nl.Stop(t, 15*time.Second)
	if table, addrs := n.setup(t); table || addrs {
		t.Fatalf("setup left after node-local stopped: table %v, addresses %v", table, addrs)
	}
	before := n.clusterQueries(t, "udp", "2")
	if r := ask(t, n.pod, "udp", dns6, netip.Addr{}, "web6.prod.svc.cluster.local", 28); len(r.Answer) != 1 {
		t.Fatalf("after node-local, through the DNAT: %v", r)
	}
	if got := n.clusterQueries(t, "udp", "2") - before; got != 1 {
		t.Errorf("cluster DNS saw %v UDP queries over IPv6 after node-local stopped, want 1", got)
	}
}
