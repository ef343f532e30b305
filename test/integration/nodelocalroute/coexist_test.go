package nodelocalroute

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	testns "github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

// addrsOn lists the IPv4 addresses on dev in n ("" when dev is missing).
func addrsOn(t *testing.T, n *testns.NS, dev string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", n.Name, "-4", "-o", "addr", "show", "dev", dev).CombinedOutput()
	if err != nil {
		return ""
	}
	var as []string
	for _, f := range regexp.MustCompile(`inet (\S+)`).FindAllStringSubmatch(string(out), -1) {
		as = append(as, f[1])
	}
	return strings.Join(as, " ")
}

// TestNodeCacheInterfaceSurvives: NodeLocal DNSCache's node-cache made
// "nodelocaldns" with 169.254.20.10 and the Service IP (a dummy; a bridge
// stands for it on a kernel without the dummy type). The stage, run in
// transparent mode in the same namespace (`serve --mode node-local
// --setup-interface`, the built binary), adds only its missing address;
// once stopped, the interface and node-cache's addresses are still there,
// and only the address it added is gone.
func TestNodeCacheInterfaceSurvives(t *testing.T) {
	n := testns.New(t)
	if out, err := exec.Command("ip", "-n", n.Name, "link", "add", "nodelocaldns", "type", "dummy").CombinedOutput(); err != nil {
		t.Logf("no dummy link type (%s): a bridge stands for node-cache's dummy", strings.TrimSpace(string(out)))
		n.IP(t, "link", "add", "nodelocaldns", "type", "bridge")
	}
	n.IP(t, "addr", "add", "169.254.20.10/32", "dev", "nodelocaldns")
	n.IP(t, "addr", "add", "10.96.0.10/32", "dev", "nodelocaldns")
	n.IP(t, "link", "set", "nodelocaldns", "up")
	before := addrsOn(t, n, "nodelocaldns")

	bin := buildbin.Dnsconfigurer(t) // built before the clock starts
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := n.Exec(ctx, bin, "serve", "--mode", "node-local", "--lameduck", "0s",
		"--local-ip", "169.254.20.10,10.96.0.10,169.254.20.11", "--setup-interface", "--cluster-upstream", "10.96.0.11",
		"--resolv-conf", "", "--lock-file", filepath.Join(t.TempDir(), "nl.lock"))
	out := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", out)
		}
	}()
	out.WaitMatch(t, 20*time.Second, regexp.MustCompile(`msg="serving DNS"`), exited)
	if got := addrsOn(t, n, "nodelocaldns"); !strings.Contains(got, "169.254.20.11/32") {
		t.Fatalf("addresses while serving: %q, want 169.254.20.11 added beside %q", got, before)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	if got := addrsOn(t, n, "nodelocaldns"); got != before {
		t.Errorf("after stop: nodelocaldns has %q, want node-cache's %q (interface deleted, or addresses removed or left)", got, before)
	}
}
