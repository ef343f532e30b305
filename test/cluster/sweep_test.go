package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSweepStale: a cluster directory whose owner died still holds a
// kubelet mount and a changed machine sysctl; the next Start's sweep
// unmounts, restores and removes. Needs root (mount, /proc/sys).
func TestSweepStale(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount, sysctl)")
	}
	const key = "kernel/panic"
	before := HostSysctls()[key]
	if before == "" {
		t.Skipf("no %s here", key)
	}
	t.Cleanup(func() { _ = os.WriteFile("/proc/sys/"+key, []byte(before), 0o644) })

	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kubelet := filepath.Join(dir, "kubelet")
	if err := os.MkdirAll(kubelet, 0o755); err != nil {
		t.Fatal(err)
	}
	// A process that has exited: its PID is free (until reused, which
	// within this test is not expected).
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	owner := fmt.Sprintf("%d\n%s %s\n", dead.Process.Pid, key, before)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", kubelet).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "--lazy", kubelet).Run() })
	if err := os.WriteFile("/proc/sys/"+key, []byte(before+"1"), 0o644); err != nil {
		t.Fatal(err)
	}

	sweepStale(t)

	if got := HostSysctls()[key]; got != before {
		t.Errorf("%s = %s after the sweep, want %s", key, got, before)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), dir) {
		t.Errorf("mount under %s remains", dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there (%v)", dir, err)
	}
}
