package containerd_test

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestPodResolves shows the path issue 9 needs: a server in the harness's
// namespace on a Service-like address, routed to from the pods, answering
// the Go stub resolver in a container, with the queries counted.
func TestPodResolves(t *testing.T) {
	clusterDNS := netip.MustParseAddr("10.96.0.10")
	h := containerd.Start(t, containerd.Options{Routes: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.AddAddress(ctx, netip.PrefixFrom(clusterDNS, 32)); err != nil {
		t.Fatal(err)
	}
	srv := testkit.NewUpstream(t, stubAnswers(map[string]string{
		"web.ns.svc.cluster.local.": "10.96.3.4",
		"example.org.":              "192.0.2.7",
	}), testkit.UDPOnly(), testkit.At(netip.AddrPortFrom(clusterDNS, 53).String()), testkit.ListenIn(h.Do))

	c := h.Client()
	pod, err := c.RunPod(ctx, containerd.PodSpec{Name: "client", Namespace: "ns", Hostname: "client", DNS: &runtimeapi.DNSConfig{
		Servers:  []string{clusterDNS.String()},
		Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:  []string{"ndots:5", "timeout:1", "attempts:1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := c.StartContainer(ctx, pod, "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, want string
		queries    int
	}{
		{"web", "10.96.3.4", 1},         // first search suffix answers
		{"example.org", "192.0.2.7", 4}, // three NXDOMAINs, then as is
	} {
		before := srv.Count()
		got, err := c.Testbin(ctx, ctr.ID, "lookup", tt.name, "A")
		if err != nil {
			t.Fatalf("lookup %s: %v", tt.name, err)
		}
		if strings.TrimSpace(got) != tt.want {
			t.Errorf("lookup %s = %q, want %q", tt.name, got, tt.want)
		}
		if n := srv.Count() - before; n != tt.queries {
			t.Errorf("lookup %s: server got %d queries (%v), want %d", tt.name, n, srv.Queries()[before:], tt.queries)
		}
	}

	// Ports coming and going (pods) must not change the bridge's MAC: a
	// running pod's ARP entry for the bridge address would go stale, and
	// its packets would be lost for about 30 s (a CI failure of the chain
	// test). A port with the lowest possible MAC is what changes the MAC
	// of a bridge that has none of its own.
	ipn := func(args ...string) string {
		out, err := exec.CommandContext(ctx, "ip", append([]string{"-n", h.NetNS}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	mac := func() string {
		f := strings.Fields(ipn("-o", "link", "show", containerd.BridgeName))
		for i, w := range f {
			if w == "link/ether" && i+1 < len(f) {
				return f[i+1]
			}
		}
		t.Fatalf("no MAC in %q", f)
		return ""
	}
	before := mac()
	ipn("link", "add", "lowmac0", "address", "00:00:00:00:00:01", "type", "veth", "peer", "name", "lowmac1")
	ipn("link", "set", "lowmac0", "master", containerd.BridgeName, "up")
	ipn("link", "set", "lowmac1", "up")
	if after := mac(); after != before {
		t.Errorf("bridge MAC changed from %s to %s when a port was added", before, after)
	}
	ipn("link", "del", "lowmac0")
	if after := mac(); after != before {
		t.Errorf("bridge MAC changed from %s to %s when a port was removed", before, after)
	}
	if got, err := c.Testbin(ctx, ctr.ID, "lookup", "web", "A"); err != nil || strings.TrimSpace(got) != "10.96.3.4" {
		t.Errorf("lookup web after other pods came and went = %q, %v", got, err)
	}
}

// stubAnswers answers A questions for the names in answers (any case),
// with TTL 30, and NXDOMAIN for any other name.
func stubAnswers(answers map[string]string) dns.Handler {
	return testkit.Reply(func(q dns.Question, r *dns.Msg) {
		r.Authoritative = true
		addr, ok := answers[strings.ToLower(q.Name)]
		switch {
		case !ok:
			r.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			r.Answer = []dns.RR{testkit.A(q.Name, 30, addr)}
		}
	})
}
