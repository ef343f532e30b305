package nodenet

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	testns "github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

// newNS makes a network namespace for the test and returns it with a
// descriptor of it; the test's own threads stay in the host namespace.
func newNS(t *testing.T) (*testns.NS, int) {
	t.Helper()
	n := testns.New(t)
	f, err := os.Open(n.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return n, int(f.Fd())
}

// kernelLinks is the real Links and Notrack of the namespace nsFD.
func kernelLinks(t *testing.T, nsFD int) (*NetlinkLinks, *NftNotrack) {
	t.Helper()
	links, err := NewNetlinkLinks(nsFD)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(links.Close)
	return links, NewNftNotrack(nsFD)
}

// addrsOf is dev's addresses, by whether they carry AddrProto.
func addrsOf(t *testing.T, links Links, dev string) (ours, others []netip.Addr) {
	t.Helper()
	as, err := links.Addrs(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.Ours {
			ours = append(ours, a.IP)
		} else {
			others = append(others, a.IP)
		}
	}
	return ours, others
}

// foreignLink makes the interface name in n as another program would
// (NodeLocal DNSCache's node-cache makes a dummy "nodelocaldns"): a dummy
// where the kernel has the type, else a bridge (any type will do), with
// alias when not empty and the addresses given.
func foreignLink(t *testing.T, n *testns.NS, name, alias string, addrs ...string) {
	t.Helper()
	if out, err := exec.Command("ip", "-n", n.Name, "link", "add", name, "type", "dummy").CombinedOutput(); err != nil {
		t.Logf("no dummy link type (%s): a bridge stands for it", out)
		n.IP(t, "link", "add", name, "type", "bridge")
	}
	if alias != "" {
		n.IP(t, "link", "set", name, "alias", alias)
	}
	for _, a := range addrs {
		n.IP(t, "addr", "add", a, "dev", name)
	}
	n.IP(t, "link", "set", name, "up")
}

func newKernelManager(t *testing.T, lock string, links Links, nt Notrack, ips ...netip.Addr) *Manager {
	t.Helper()
	m, err := New(Config{IPs: ips, SetupInterface: true, SetupNotrack: true, LockFile: lock, Links: links, Notrack: nt})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// skipWithoutAddrProto skips t on a kernel that drops IFA_PROTO (before
// Linux 6.1): there an address is ours only in the process that added it.
func skipWithoutAddrProto(t *testing.T, links Links, dev string, ip netip.Addr) {
	t.Helper()
	if ours, _ := addrsOf(t, links, dev); !slices.Contains(ours, ip) {
		t.Skipf("the kernel dropped the address origin (IFA_PROTO, Linux 6.1) of %s", ip)
	}
}

// TestRealNamespace runs the whole lifecycle against the kernel, in a
// namespace of its own: addresses on the dummy device or lo, marked as
// ours, the nftables table present, repaired after removal, and
// everything removed at the end.
func TestRealNamespace(t *testing.T) {
	_, fd := newNS(t)
	links, nt := kernelLinks(t, fd)
	all := append(slices.Clone(ips), netip.MustParseAddr("fd00:10:96::a"))
	m := newKernelManager(t, filepath.Join(t.TempDir(), "nl.lock"), links, nt, slices.Clone(all)...)
	if err := m.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("addresses on %q", m.Device())
	ours, _ := addrsOf(t, links, m.Device())
	for _, ip := range all {
		if !slices.Contains(ours, ip) {
			t.Logf("%s not marked as ours on %s (%v): a kernel before 6.1?", ip, m.Device(), ours)
		}
	}
	if have, err := links.Addrs(m.Device()); err != nil || len(have) < len(all) {
		t.Fatalf("addresses on %s: %v, %v", m.Device(), have, err)
	}
	if ok, err := nt.Present(all, 53); err != nil || ok {
		t.Fatalf("table present before EnsureNotrack: %v, %v", ok, err)
	}
	if _, err := m.EnsureNotrack(); err != nil {
		t.Fatal(err)
	}
	if ok, err := nt.Present(all, 53); err != nil || !ok {
		t.Fatalf("table not present after EnsureNotrack: %v, %v", ok, err)
	}
	// Applying again replaces the table in one transaction: still exactly
	// one rule per address, protocol and direction.
	if err := nt.Apply(all, 53); err != nil {
		t.Fatal(err)
	}
	if ok, _ := nt.Present(all, 53); !ok {
		t.Fatal("table wrong after a second Apply")
	}
	if ok, _ := nt.Present(all[:1], 53); ok {
		t.Fatal("Present ignores the rule count")
	}
	// An operator flushes the table and removes an address: the check repairs both.
	if had, err := nt.Remove(); err != nil || !had {
		t.Fatalf("Remove = %v, %v; want the table removed", had, err)
	}
	if err := links.DelAddr(m.Device(), all[0]); err != nil {
		t.Fatal(err)
	}
	m.check()
	if ok, _ := nt.Present(all, 53); !ok {
		t.Error("table not repaired")
	}
	if ours, _ := addrsOf(t, links, m.Device()); !slices.Contains(ours, all[0]) {
		t.Error("address not repaired (or not marked)")
	}
	if err := m.RemoveNotrack(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := nt.Present(all, 53); ok {
		t.Error("table left after RemoveNotrack")
	}
	if had, err := nt.Remove(); err != nil || had {
		t.Errorf("Remove of a missing table = %v, %v", had, err)
	}
	if err := m.Release(); err != nil {
		t.Fatal(err)
	}
	if found, _, _ := links.Lookup(DefaultInterface); found {
		t.Error("dummy interface left")
	}
	have, _ := links.Addrs("lo")
	for _, a := range have {
		if slices.Contains(all, a.IP) {
			t.Errorf("%s left on lo", a.IP)
		}
	}
}

// TestForeignInterface: a "nodelocaldns" this project did not make (no
// LinkAlias), holding an address of its own and one of ours, gets the
// missing addresses; on stop it stays, with both of its addresses, and
// only the addresses this instance added are gone (issue 27 item 9).
func TestForeignInterface(t *testing.T) {
	n, fd := newNS(t)
	links, nt := kernelLinks(t, fd)
	foreignLink(t, n, DefaultInterface, "", "10.233.9.9/32", "169.254.20.10/32")
	all := append(slices.Clone(ips), netip.MustParseAddr("fd00:10:96::a")) // 169.254.20.10, 10.96.0.10, fd00:10:96::a
	m := newKernelManager(t, filepath.Join(t.TempDir(), "nl.lock"), links, nt, slices.Clone(all)...)
	if err := m.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m.Device() != DefaultInterface {
		t.Fatalf("addresses on %q, want the existing %q", m.Device(), DefaultInterface)
	}
	ours, others := addrsOf(t, links, DefaultInterface)
	t.Logf("on %s: ours %v, others %v", DefaultInterface, ours, others)
	for _, ip := range all {
		if !slices.Contains(ours, ip) && !slices.Contains(others, ip) {
			t.Errorf("%s not on %s", ip, DefaultInterface)
		}
	}
	if slices.Contains(ours, all[0]) {
		t.Errorf("%s was there before: it is not ours", all[0])
	}
	if err := links.Delete(DefaultInterface); err == nil {
		t.Fatal("Delete removed an interface without the mark")
	}
	stopNotrack(t, m)
	found, _, err := links.Lookup(DefaultInterface)
	if err != nil || !found {
		t.Fatalf("the foreign interface was deleted (%v)", err)
	}
	ours, others = addrsOf(t, links, DefaultInterface)
	for _, want := range []string{"10.233.9.9", "169.254.20.10"} {
		if !slices.Contains(others, netip.MustParseAddr(want)) {
			t.Errorf("its own address %s was removed: left %v", want, others)
		}
	}
	for _, ip := range all[1:] {
		if slices.Contains(ours, ip) || slices.Contains(others, ip) {
			t.Errorf("%s, added by this instance, left on %s", ip, DefaultInterface)
		}
	}
}

// TestOwnInterface: an interface with LinkAlias is this project's (made
// now, or left by an instance that was killed): deleted whole on stop.
func TestOwnInterface(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before bool // left by an earlier instance
	}{
		{"left by a killed instance", true},
		{"made now", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, fd := newNS(t)
			links, nt := kernelLinks(t, fd)
			if tt.before {
				foreignLink(t, n, DefaultInterface, LinkAlias, "10.96.0.10/32")
			}
			m := newKernelManager(t, filepath.Join(t.TempDir(), "nl.lock"), links, nt, slices.Clone(ips)...)
			if err := m.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			if m.Device() == "lo" {
				t.Skip("no dummy link type: the addresses went on lo")
			}
			if found, ours, err := links.Lookup(DefaultInterface); !found || !ours || err != nil {
				t.Fatalf("Lookup = %v, %v, %v; want found and ours", found, ours, err)
			}
			if err := m.Release(); err != nil {
				t.Fatal(err)
			}
			if found, _, _ := links.Lookup(DefaultInterface); found {
				t.Error("this project's interface left after stop")
			}
		})
	}
}

// TestRestartAfterKill: an instance that was killed left its addresses on
// lo (or its interface) and its notrack table; the next one, alone on the
// node, removes the table at once (the Service IP is the cluster DNS's
// until it serves), takes the addresses as its own (they carry
// AddrProto) and removes them on stop; an address someone else put on lo
// stays.
func TestRestartAfterKill(t *testing.T) {
	n, fd := newNS(t)
	links, nt := kernelLinks(t, fd)
	other := netip.MustParseAddr("10.233.9.9")
	n.AddAddress(t, other.String()+"/32")
	lock := filepath.Join(t.TempDir(), "nl.lock")
	killed := newKernelManager(t, lock, links, nt, slices.Clone(ips)...)
	if err := killed.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := killed.EnsureNotrack(); err != nil {
		t.Fatal(err)
	}
	dev := killed.Device()
	skipWithoutAddrProto(t, links, dev, ips[1])
	killed.lease.Close() // the kernel releases a killed process's lock

	next := newKernelManager(t, lock, links, nt, slices.Clone(ips)...)
	if err := next.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := nt.Present(ips, 53); ok {
		t.Error("the killed instance's notrack table still there after the next one's Prepare")
	}
	stopNotrack(t, next)
	ours, others := addrsOf(t, links, "lo")
	if found, _, _ := links.Lookup(DefaultInterface); found || len(ours) > 0 {
		t.Errorf("after the next instance stopped: interface %v, our addresses on lo %v", found, ours)
	}
	if !slices.Contains(others, other) {
		t.Errorf("%s, not ours, was removed from lo (%v)", other, others)
	}
}

// TestIPv6AddrBindsAtOnce: an IPv6 address AddAddr puts on lo can be
// bound at once. Without NODAD it is tentative until the kernel's DAD work
// runs (which skips DAD on lo), and a bind in that window fails with
// "cannot assign requested address" (a node-local stage failing to start).
func TestIPv6AddrBindsAtOnce(t *testing.T) {
	n, fd := newNS(t)
	links, _ := kernelLinks(t, fd)
	failed := 0
	for i := range 200 {
		ip := netip.AddrFrom16([16]byte{0xfd, 15: byte(i + 1)})
		if err := links.AddAddr("lo", ip); err != nil {
			t.Fatal(err)
		}
		if err := n.Do(func() error {
			pc, err := net.ListenPacket("udp6", netip.AddrPortFrom(ip, 53).String())
			if err == nil {
				pc.Close()
			}
			return err
		}); err != nil {
			failed++
			t.Logf("bind %s right after AddAddr: %v", ip, err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of 200 IPv6 addresses could not be bound right after AddAddr", failed)
	}
}

// stopNotrack sets up m's notrack rules, then removes them and releases m,
// as an instance that stops does.
func stopNotrack(t *testing.T, m *Manager) {
	t.Helper()
	if _, err := m.EnsureNotrack(); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveNotrack(); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(); err != nil {
		t.Fatal(err)
	}
}
