package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
)

// TestDemo runs the README's first command on the embedded examples.
func TestDemo(t *testing.T) {
	code, out, errOut := run(t, "", "demo", "--pod", "../../examples/pod.yaml", "--resolv-conf", "../../examples/node-resolv.conf", "--objects", "../../examples/objects")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"search prod.svc.cluster.local svc.cluster.local cluster.local corp.example.com lab.example.com\nnameserver 10.96.0.10\noptions ndots:2 edns0\n",
		"search search.prod.cluster.local.ap.k8s.io\n",
		"web.prod.svc.cluster.local. 5 IN A 10.96.0.30",
		`dns-version.cluster.local. 28800 IN TXT "1.1.0"`,
		"kubernetes.default.search.prod.cluster.local.ap.k8s.io. 5 IN CNAME kubernetes.default.svc.cluster.local.",
		"nosuch.prod.svc.cluster.local. A (via cluster DNS) -> NXDOMAIN",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestDemoServiceIPs: the example Services the demo serves (loaded as it
// loads them) are in kubeadm's Service CIDR, 10.96.0.0/12 (fd00::/108 for
// IPv6), and none takes the cluster DNS address the demo's pod gets: in a
// cluster that address is the DNS Service's own.
func TestDemoServiceIPs(t *testing.T) {
	objs, err := kubefeed.LoadManifests("../../examples/objects")
	if err != nil {
		t.Fatal(err)
	}
	dns := netip.MustParseAddr(demoClusterDNS)
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00::/108")}
	n := 0
	for _, s := range objs.Services {
		for _, ip := range s.ClusterIPs {
			n++
			if ip == dns {
				t.Errorf("Service %s/%s: clusterIP %s is the demo's cluster DNS address", s.Namespace, s.Name, ip)
			}
			if !cidrs[0].Contains(ip) && !cidrs[1].Contains(ip) {
				t.Errorf("Service %s/%s: clusterIP %s is outside the Service CIDRs %v", s.Namespace, s.Name, ip, cidrs)
			}
		}
	}
	if n == 0 {
		t.Fatal("no example Service has a clusterIP")
	}
}
