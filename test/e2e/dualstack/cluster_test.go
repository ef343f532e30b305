package dualstack

import (
	_ "embed"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/stubresolver"
)

// A dual-stack cluster's objects: Services of each family (web both, web6
// IPv6 only, web4 IPv4 only), a headless Service with an IPv4 and an IPv6
// EndpointSlice (one endpoint at fd00:10:244::, whose dashed label would end
// in '-'), and a dual-stack pod.
//
//go:embed testdata/objects.yaml
var objects string

// The cluster DNS's addresses (kube-dns's two ClusterIPs), the pod's, and
// the upstream for other names.
const (
	dns4     = "10.96.0.10"
	dns6     = "fd00:10:96::a"
	pod6     = "fd00:10:244::5"
	upstream = "fd00:53::53"
)

// clusterNS is a namespace standing for a dual-stack pod that runs the
// cluster DNS too: the Service addresses on lo, the pod's on a veth (a
// non-loopback address of each family, so that getaddrinfo's
// AI_ADDRCONFIG asks A and AAAA), an upstream stub on an IPv6 address
// (port 5353: a wildcard listener cannot share 53 with another process).
func clusterNS(t *testing.T) (*netns.NS, *testkit.Upstream) {
	t.Helper()
	ns := netns.New(t)
	ns.AddAddress(t, dns4+"/32")
	ns.IP(t, "addr", "add", dns6+"/128", "dev", "lo", "nodad")
	ns.IP(t, "addr", "add", upstream+"/128", "dev", "lo", "nodad")
	ns.IP(t, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	ns.IP(t, "link", "set", "eth1", "up")
	ns.IP(t, "addr", "add", "10.244.0.5/24", "dev", "eth0")
	ns.IP(t, "addr", "add", pod6+"/64", "dev", "eth0", "nodad")
	ns.IP(t, "link", "set", "eth0", "up")
	up := testkit.NewUpstream(t, externalReply(), testkit.At("["+upstream+"]:5353"), testkit.ListenIn(ns.Do))
	return ns, up
}

// externalReply answers www.example.com with an A and an AAAA record,
// every other name NXDOMAIN: the upstream for names outside the cluster.
func externalReply() dns.Handler {
	return testkit.Reply(func(q dns.Question, m *dns.Msg) {
		if !strings.EqualFold(q.Name, "www.example.com.") {
			m.Rcode = dns.RcodeNameError
			return
		}
		switch q.Qtype {
		case dns.TypeA:
			m.Answer = []dns.RR{testkit.A(q.Name, 60, "192.0.2.80")}
		case dns.TypeAAAA:
			rr, _ := dns.NewRR(q.Name + " 60 IN AAAA 2001:db8::80")
			m.Answer = []dns.RR{rr}
		}
	})
}

// startCluster runs the cluster DNS on both wildcards and the IPv6
// ClusterIP at once (SO_REUSEPORT lets a wildcard and a specific address
// share port 53), pods verified, autopath by source, the Service and Pod
// CIDRs of both families as reverse zones, the upstream over IPv6.
func startCluster(t *testing.T, ns *netns.NS) *buildbin.Proc {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(objects), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, ns, "serve", "--listen", "0.0.0.0:53", "--listen", "[::]:53", "--listen", "["+dns6+"]:53", "--reuse-port",
		"--objects", dir, "--autopath-by-source", "--reverse-zones", "10.96.0.0/12,fd00:10:96::/108,fd00:10:244::/64",
		"--upstream", "["+upstream+"]:5353", "--metrics-listen", "127.0.0.1:9153", "--lameduck", "0s")
	waitLog(t, p, `msg="serving DNS"`)
	return p
}

// TestClusterAnswers: the cluster DNS answers the dual-stack and IPv6
// records exactly, over UDP and TCP, to a client on an IPv6 address.
func TestClusterAnswers(t *testing.T) {
	ns, _ := clusterNS(t)
	startCluster(t, ns)
	soa := "cluster.local. 0 IN SOA ns.dns.cluster.local. hostmaster.cluster.local."
	rz := func(ip string, nibbles int) string { // the nibble zone of a prefix of ip
		labels := strings.Split(store.ReverseName(netip.MustParseAddr(ip)), ".")
		return strings.Join(labels[32-nibbles:], ".")
	}
	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		src    string
		rcode  int
		answer []string
		ns     string // prefix of the authority record, "" for none
	}{
		{"dual-stack A", "web.prod.svc.cluster.local", dns.TypeA, "", dns.RcodeSuccess, []string{"web.prod.svc.cluster.local. 0 IN A 10.96.0.20"}, ""},
		{"dual-stack AAAA", "web.prod.svc.cluster.local", dns.TypeAAAA, "", dns.RcodeSuccess, []string{"web.prod.svc.cluster.local. 0 IN AAAA fd00:10:96::20"}, ""},
		{"IPv6 AAAA", "web6.prod.svc.cluster.local", dns.TypeAAAA, "", dns.RcodeSuccess, []string{"web6.prod.svc.cluster.local. 0 IN AAAA fd00:10:96::21"}, ""},
		{"IPv6 Service asked A: NODATA", "web6.prod.svc.cluster.local", dns.TypeA, "", dns.RcodeSuccess, nil, soa},
		{"IPv4 Service asked AAAA: NODATA", "web4.prod.svc.cluster.local", dns.TypeAAAA, "", dns.RcodeSuccess, nil, soa},
		{"no such Service AAAA: NXDOMAIN", "nothere.prod.svc.cluster.local", dns.TypeAAAA, "", dns.RcodeNameError, nil, soa},
		{"headless AAAA from the IPv6 slice", "db.prod.svc.cluster.local", dns.TypeAAAA, "", dns.RcodeSuccess,
			[]string{"db.prod.svc.cluster.local. 0 IN AAAA fd00:10:244::", "db.prod.svc.cluster.local. 0 IN AAAA fd00:10:244::7"}, ""},
		{"headless A from the IPv4 slice", "db.prod.svc.cluster.local", dns.TypeA, "", dns.RcodeSuccess, []string{"db.prod.svc.cluster.local. 0 IN A 10.244.0.7"}, ""},
		{"endpoint at a :: address", "fd00-10-244--0.db.prod.svc.cluster.local", dns.TypeAAAA, "", dns.RcodeSuccess,
			[]string{"fd00-10-244--0.db.prod.svc.cluster.local. 0 IN AAAA fd00:10:244::"}, ""},
		{"headless SRV to both families", "_pg._tcp.db.prod.svc.cluster.local", dns.TypeSRV, "", dns.RcodeSuccess, []string{
			"_pg._tcp.db.prod.svc.cluster.local. 0 IN SRV 0 33 5432 10-244-0-7.db.prod.svc.cluster.local.",
			"_pg._tcp.db.prod.svc.cluster.local. 0 IN SRV 0 33 5432 fd00-10-244--0.db.prod.svc.cluster.local.",
			"_pg._tcp.db.prod.svc.cluster.local. 0 IN SRV 0 33 5432 fd00-10-244--7.db.prod.svc.cluster.local."}, ""},
		{"ClusterIP SRV", "_http._tcp.web.prod.svc.cluster.local", dns.TypeSRV, "", dns.RcodeSuccess, []string{
			"_http._tcp.web.prod.svc.cluster.local. 0 IN SRV 0 100 80 web.prod.svc.cluster.local."}, ""},
		{"pod AAAA", "fd00-10-244--5.prod.pod.cluster.local", dns.TypeAAAA, "", dns.RcodeSuccess,
			[]string{"fd00-10-244--5.prod.pod.cluster.local. 0 IN AAAA fd00:10:244::5"}, ""},
		{"pod of the other family asked A: NODATA", "fd00-10-244--5.prod.pod.cluster.local", dns.TypeA, "", dns.RcodeSuccess, nil, soa},
		{"no such pod (verified)", "fd00-10-244--6.prod.pod.cluster.local", dns.TypeAAAA, "", dns.RcodeNameError, nil, soa},
		{"PTR of an IPv6 ClusterIP", store.ReverseName(netip.MustParseAddr("fd00:10:96::20")), dns.TypePTR, "", dns.RcodeSuccess,
			[]string{store.ReverseName(netip.MustParseAddr("fd00:10:96::20")) + " 0 IN PTR web.prod.svc.cluster.local."}, ""},
		{"PTR of an IPv6 endpoint", store.ReverseName(netip.MustParseAddr("fd00:10:244::7")), dns.TypePTR, "", dns.RcodeSuccess,
			[]string{store.ReverseName(netip.MustParseAddr("fd00:10:244::7")) + " 0 IN PTR fd00-10-244--7.db.prod.svc.cluster.local."}, ""},
		{"PTR of an unknown Service address: the /108 zone's NXDOMAIN", store.ReverseName(netip.MustParseAddr("fd00:10:96::99")), dns.TypePTR, "",
			dns.RcodeNameError, nil, rz("fd00:10:96::", 27) + " 0 IN SOA"},
		{"PTR of a pod (no record): the /64 zone's NXDOMAIN", store.ReverseName(netip.MustParseAddr(pod6)), dns.TypePTR, "",
			dns.RcodeNameError, nil, rz(pod6, 16) + " 0 IN SOA"},
		{"autopath by an IPv6 pod source", "www.example.com.prod.svc.cluster.local", dns.TypeAAAA, pod6, dns.RcodeSuccess, []string{
			"www.example.com. 0 IN AAAA 2001:db8::80", "www.example.com.prod.svc.cluster.local. 0 IN CNAME www.example.com."}, ""},
		{"no autopath from a non-pod source", "www.example.com.prod.svc.cluster.local", dns.TypeAAAA, "", dns.RcodeNameError, nil, soa},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				var src netip.Addr
				if tc.src != "" {
					src = netip.MustParseAddr(tc.src)
				}
				r := ask(t, ns, network, dns6, src, tc.qname, tc.qtype)
				if r.Rcode != tc.rcode || !r.Authoritative && tc.src == "" {
					t.Errorf("rcode %s aa %v, want %s aa", dns.RcodeToString[r.Rcode], r.Authoritative, dns.RcodeToString[tc.rcode])
				}
				if got := rrs(r.Answer); !slices.Equal(got, tc.answer) {
					t.Errorf("answer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.answer, "\n"))
				}
				got := rrs(r.Ns)
				switch {
				case tc.ns == "" && len(got) > 0:
					t.Errorf("authority %v, want none", got)
				case tc.ns != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.ns)):
					t.Errorf("authority %v, want one record starting %q", got, tc.ns)
				}
			})
		}
	}
}

// TestClusterResolvers: glibc, musl and Go look names up through the
// cluster DNS on its IPv6 ClusterIP, its IPv4 one and ::1, over UDP and
// (use-vc) TCP, each address served by its own listener: the specific
// IPv6 address, the IPv4 wildcard and the IPv6 wildcard. An IPv4-only
// Service gives its A alone (musl stops a search at an NXDOMAIN for
// either type, so a wrong NXDOMAIN for its AAAA would lose the name).
func TestClusterResolvers(t *testing.T) {
	ns, up := clusterNS(t)
	startCluster(t, ns)
	res := stubresolver.New(t)
	const search = "search prod.svc.cluster.local svc.cluster.local cluster.local\n"
	confs := []struct {
		name, conf, listen string
		tcp                bool
	}{
		{"IPv6 ClusterIP, UDP", "nameserver " + dns6 + "\n" + search + "options ndots:5\n", "[" + dns6 + "]:53", false},
		{"IPv4 ClusterIP, UDP", "nameserver " + dns4 + "\n" + search + "options ndots:5\n", "0.0.0.0:53", false},
		{"::1, TCP", "nameserver ::1\n" + search + "options ndots:5 use-vc\n", "[::]:53", true},
	}
	lookups := []struct{ host, want string }{
		{"web", "10.96.0.20 fd00:10:96::20"},
		{"web6", "fd00:10:96::21"},
		{"web4", "10.96.0.22"},
		{"db", "10.244.0.7 fd00:10:244:: fd00:10:244::7"},
		{"fd00-10-244--0.db", "fd00:10:244::"},
		{"fd00-10-244--5.prod.pod", "fd00:10:244::5"},
		{"www.example.com", "192.0.2.80 2001:db8::80"},
	}
	ptrs := []struct{ ip, want string }{
		{"fd00:10:96::20", "web.prod.svc.cluster.local"},
		{"10.96.0.20", "web.prod.svc.cluster.local"},
		{"fd00:10:244::", "fd00-10-244--0.db.prod.svc.cluster.local"},
	}
	before := map[string]float64{}
	for _, c := range confs {
		before[c.listen] = metrics(t, ns, "127.0.0.1:9153")[testkit.Key("dnsconfigurer_dnsserver_listen_queries_total", "listen", c.listen, "server", "cluster")]
	}
	for _, c := range confs {
		ns.SetResolvConf(t, c.conf)
		for _, r := range res {
			if c.tcp && !r.TCP {
				continue // musl has no use-vc: it uses TCP only after a truncated reply
			}
			for _, lk := range lookups {
				got, err := r.Addrs(ns, lk.host)
				if err != nil {
					t.Errorf("%s, %s: %s: %v", c.name, r.Name, lk.host, err)
				} else if strings.Join(got, " ") != lk.want {
					t.Errorf("%s, %s: %s = %v, want %s", c.name, r.Name, lk.host, got, lk.want)
				}
			}
			for _, p := range ptrs {
				names, err := r.Names(ns, p.ip)
				if err != nil {
					t.Errorf("%s, %s: PTR %s: %v", c.name, r.Name, p.ip, err)
				} else if !slices.Equal(names, []string{p.want}) {
					t.Errorf("%s, %s: PTR %s = %v, want %s", c.name, r.Name, p.ip, names, p.want)
				}
			}
		}
	}
	after := metrics(t, ns, "127.0.0.1:9153")
	for _, c := range confs {
		if n := after[testkit.Key("dnsconfigurer_dnsserver_listen_queries_total", "listen", c.listen, "server", "cluster")] - before[c.listen]; n == 0 {
			t.Errorf("listen %s answered no query of %q", c.listen, c.name)
		}
	}
	if up.Count() == 0 {
		t.Error("the IPv6 upstream got no query")
	}
	t.Logf("resolvers: %d, upstream queries over IPv6: %d", len(res), up.Count())
}

// TestZonedUpstream: a node resolv.conf whose nameserver is an IPv6
// link-local address with a zone index (fe80::1%eth1, as kubelet passes it
// on) is forwarded to through that interface.
func TestZonedUpstream(t *testing.T) {
	ns := netns.New(t)
	ns.IP(t, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	ns.IP(t, "addr", "add", "fe80::2/64", "dev", "eth0", "nodad")
	ns.IP(t, "addr", "add", "fe80::1/64", "dev", "eth1", "nodad")
	ns.IP(t, "link", "set", "eth0", "up")
	ns.IP(t, "link", "set", "eth1", "up")
	up := testkit.NewUpstream(t, externalReply(), testkit.At("[fe80::1%eth1]:53"), testkit.ListenIn(ns.Do))
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver fe80::1%eth1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, ns, "serve", "--listen", "[::1]:53", "--objects", t.TempDir(), "--upstream-resolv-conf", conf, "--lameduck", "0s")
	waitLog(t, p, `msg="serving DNS"`)
	r := ask(t, ns, "udp", "::1", netip.Addr{}, "www.example.com", dns.TypeAAAA)
	if got := rrs(r.Answer); !slices.Equal(got, []string{"www.example.com. 0 IN AAAA 2001:db8::80"}) {
		t.Errorf("answer %v, want the upstream's AAAA", got)
	}
	n := 0
	for _, q := range up.Queries() {
		if q.Msg.Question[0].Name == "www.example.com." {
			n++
		}
	}
	if n != 1 { // besides the forwarder's loop probes
		t.Errorf("the link-local upstream got %d queries for www.example.com, want 1", n)
	}
}
