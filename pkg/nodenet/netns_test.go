package nodenet

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/vishvananda/netns"
)

// newNetNS makes a network namespace for the test and returns its handle;
// the test's own thread stays in the host namespace.
func newNetNS(t *testing.T) netns.NsHandle {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	host, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("new network namespace: %v", err)
	}
	if err := netns.Set(host); err != nil {
		t.Fatalf("back to the host namespace: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// TestRealNamespace runs the whole lifecycle against the kernel, in a
// namespace of its own: addresses on the dummy device or lo, the nftables
// table present, repaired after removal, and everything removed at the end.
func TestRealNamespace(t *testing.T) {
	ns := newNetNS(t)
	links, err := NewNetlinkLinks(int(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer links.Close()
	nt := NewNftNotrack(int(ns))
	all := append(slices.Clone(ips), netip.MustParseAddr("fd00:10:96::a"))
	m, err := New(Config{IPs: slices.Clone(all), SetupInterface: true, SetupNotrack: true,
		LockFile: filepath.Join(t.TempDir(), "nl.lock"), Links: links, Notrack: nt})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("addresses on %q", m.Device())
	have, err := links.Addrs(m.Device())
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range all {
		if !slices.Contains(have, ip) {
			t.Errorf("%s not on %s (%v)", ip, m.Device(), have)
		}
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
	if err := nt.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := links.DelAddr(m.Device(), all[0]); err != nil {
		t.Fatal(err)
	}
	m.check()
	if ok, _ := nt.Present(all, 53); !ok {
		t.Error("table not repaired")
	}
	if have, _ := links.Addrs(m.Device()); !slices.Contains(have, all[0]) {
		t.Error("address not repaired")
	}
	if err := m.RemoveNotrack(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := nt.Present(all, 53); ok {
		t.Error("table left after RemoveNotrack")
	}
	if err := nt.Remove(); err != nil {
		t.Errorf("Remove of a missing table: %v", err)
	}
	if err := m.Release(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := links.Exists(DefaultInterface); ok {
		t.Error("dummy interface left")
	}
	have, _ = links.Addrs("lo")
	for _, ip := range all {
		if slices.Contains(have, ip) {
			t.Errorf("%s left on lo", ip)
		}
	}
}
