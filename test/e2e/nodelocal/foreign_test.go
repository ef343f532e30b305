package nodelocal

import (
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodenet"
)

// foreignAddr is an address NodeLocal DNSCache's node-cache could hold
// beside its link-local one. It is not in node-local's --local-ip.
const foreignAddr = "10.233.9.9"

// addrsOn returns the addresses of dev in the node namespace, split by
// whether they carry nodenet.AddrProto. found is false when dev is gone.
func (n *node) addrsOn(t *testing.T, dev string) (found bool, ours, others []netip.Addr) {
	t.Helper()
	f, err := os.Open(n.node.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	links, err := nodenet.NewNetlinkLinks(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer links.Close()
	found, _, err = links.Lookup(dev)
	if err != nil || !found {
		return false, nil, nil
	}
	as, err := links.Addrs(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if !a.IP.Is4() {
			continue // the kernel's IPv6 link-local address
		}
		if a.Ours {
			ours = append(ours, a.IP)
		} else {
			others = append(others, a.IP)
		}
	}
	return true, ours, others
}

// TestForeignInterface (issue 27 item 9): the node already has a
// "nodelocaldns" interface that another program made (NodeLocal
// DNSCache's node-cache), holding the link-local address and one more.
// The binary adds the Service IP to it and serves. On SIGTERM it removes
// only that address; the interface and the other program's addresses stay.
func TestForeignInterface(t *testing.T) {
	n := newNode(t)
	dev := nodenet.DefaultInterface
	// node-cache makes a dummy; this kernel may lack the type, and any
	// type will do: a bridge stands for it.
	if out, err := exec.Command("ip", "-n", n.node.Name, "link", "add", dev, "type", "dummy").CombinedOutput(); err != nil {
		t.Logf("no dummy link type (%s): a bridge stands for it", strings.TrimSpace(string(out)))
		n.node.IP(t, "link", "add", dev, "type", "bridge")
	}
	n.node.IP(t, "addr", "add", linkLocal+"/32", "dev", dev)
	n.node.IP(t, "addr", "add", foreignAddr+"/32", "dev", dev)
	n.node.IP(t, "link", "set", dev, "up")
	foreign := []netip.Addr{netip.MustParseAddr(linkLocal), netip.MustParseAddr(foreignAddr)}
	added := netip.MustParseAddr(serviceIP)

	nl := n.start(t, 9353, "notrack table in place")
	found, ours, others := n.addrsOn(t, dev)
	t.Logf("while serving, on %s: added by node-local %v, others %v", dev, ours, others)
	if !found {
		t.Fatalf("%s gone while node-local serves", dev)
	}
	if !slices.Contains(ours, added) {
		t.Errorf("%s not on %s with node-local's mark (ours %v, others %v)", added, dev, ours, others)
	}
	for _, ip := range foreign {
		if !slices.Contains(others, ip) {
			t.Errorf("the other program's %s not on %s unmarked (ours %v, others %v)", ip, dev, ours, others)
		}
	}
	if got, _ := query(n.pod, serviceIP, clusterName); got != "10.0.0.1" {
		t.Fatalf("query to %s through node-local: %q", serviceIP, got)
	}
	if c := n.cluster.count(clusterName, "udp", netip.MustParseAddr(podIP)); c != 0 {
		t.Errorf("cluster DNS saw %d UDP queries from the pod, want 0: node-local did not answer the Service IP", c)
	}

	nl.stop(t)
	found, ours, others = n.addrsOn(t, dev)
	t.Logf("after SIGTERM, on %s: found %v, marked %v, others %v", dev, found, ours, others)
	if !found {
		t.Fatalf("node-local deleted %s, which another program made", dev)
	}
	if out, err := exec.Command("ip", "-n", n.node.Name, "-o", "link", "show", dev).CombinedOutput(); err != nil || !strings.Contains(string(out), "UP") {
		t.Errorf("%s after SIGTERM is not up (%v): %s", dev, err, out)
	}
	for _, ip := range foreign {
		if !slices.Contains(others, ip) {
			t.Errorf("the other program's %s was removed from %s: left %v", ip, dev, others)
		}
	}
	if slices.Contains(ours, added) || slices.Contains(others, added) {
		t.Errorf("%s, added by node-local, left on %s", added, dev)
	}
	if table, _ := n.setupPresent(t); table {
		t.Error("notrack table left after SIGTERM")
	}
	// The Service IP is the cluster DNS's again (kube-proxy's DNAT).
	if got, _ := query(n.pod, serviceIP, clusterName); got != "10.0.0.1" {
		t.Errorf("after node-local stopped: %s answered %q, want the cluster DNS's fallback", serviceIP, got)
	}
	if c := n.cluster.count(clusterName, "udp", netip.MustParseAddr(podIP)); c != 1 {
		t.Errorf("cluster DNS saw %d UDP queries from the pod, want 1 (the fallback)", c)
	}
}
