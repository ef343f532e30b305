// Package netns gives tests a network namespace of their own.
//
// Servers bind inside it through Do. Commands run inside it with Exec, where
// /etc/resolv.conf is the file set by SetResolvConf (ip netns exec
// bind-mounts /etc/netns/<name>/resolv.conf over it). Nothing in the
// namespace can reach the host's network.
package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// NS is a network namespace created for one test.
type NS struct {
	Name string
	Path string
}

// Require skips t unless the test runs as root with ip(8) available.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip(8) from iproute2 (bash test/e2e/setup.sh installs it)")
	}
}

// New creates a namespace with loopback up and removes it on cleanup.
func New(t testing.TB) *NS {
	t.Helper()
	Require(t)
	b := make([]byte, 4)
	rand.Read(b)
	n := &NS{Name: "dnscfg-t-" + hex.EncodeToString(b)}
	n.Path = filepath.Join("/run/netns", n.Name)
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", n.Name, err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", n.Name).Run()
		os.RemoveAll(filepath.Join("/etc/netns", n.Name))
	})
	n.ip(t, "link", "set", "lo", "up")
	return n
}

// IP runs `ip -n <name> args...` and fails t on error.
func (n *NS) IP(t testing.TB, args ...string) { t.Helper(); n.ip(t, args...) }

func (n *NS) ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", n.Name}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", n.Name, strings.Join(args, " "), err, out)
	}
}

// AddAddress adds an address (e.g. "10.96.0.10/32") to the namespace's lo.
func (n *NS) AddAddress(t testing.TB, prefix string) {
	t.Helper()
	if strings.Contains(prefix, ":") {
		// Usable at once: not tentative until the kernel's DAD work runs.
		n.ip(t, "addr", "add", prefix, "dev", "lo", "nodad")
		return
	}
	n.ip(t, "addr", "add", prefix, "dev", "lo")
}

// SetResolvConf sets the /etc/resolv.conf that commands started by Exec see.
func (n *NS) SetResolvConf(t testing.TB, content string) {
	t.Helper()
	dir := filepath.Join("/etc/netns", n.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Exec runs a command inside the namespace (with its resolv.conf).
func (n *NS) Exec(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Do runs fn on an OS thread that has joined the namespace, so sockets fn
// opens live there (and stay there after fn returns). The thread is never
// returned to the Go scheduler: it ends with its goroutine.
func (n *NS) Do(fn func() error) error { return testkit.InNetNS(n.Path, fn) }

// Open opens the namespace's file, for a call that takes its descriptor
// (a netlink or nftables connection); it is closed when t ends.
func (n *NS) Open(t testing.TB) *os.File {
	t.Helper()
	f, err := os.Open(n.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// HasAddresses reports whether each of ips is an address of one of the
// namespace's interfaces (/32 or /128).
func (n *NS) HasAddresses(t testing.TB, ips ...netip.Addr) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", n.Name, "addr", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s addr show: %v: %s", n.Name, err, out)
	}
	for _, ip := range ips {
		if !strings.Contains(string(out), " "+netip.PrefixFrom(ip, ip.BitLen()).String()+" ") {
			return false
		}
	}
	return true
}
