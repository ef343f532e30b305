package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// TestCluster brings one cluster up, runs every proof against it as
// subtests, tears it down and checks that nothing was left behind. Run a
// part with -run, e.g. -run 'TestCluster/kubelet' (the cluster still
// comes up and goes down around it).
func TestCluster(t *testing.T) {
	// A cluster whose test process died left the machine's sysctls as
	// kubelet set them; Start would restore them after this reading.
	sweepStale(t)
	before := HostSysctls()
	var c *Cluster
	t.Run("up", func(t *testing.T) {
		begin := time.Now()
		c = Start(t, buildbin.Dnsconfigurer(t), Options{})
		t.Logf("cluster up in %s (kubelet Ready through the shim; %s, %s)", time.Since(begin).Round(time.Millisecond), c.Node.ContainerdVersion, c.Node.RuncVersion)

		ok := t.Run("deploy", func(t *testing.T) { testDeploy(t, c) })
		t.Run("kubelet", func(t *testing.T) { testKubelet(t, c) })
		if !ok {
			t.Log("deploy/ failed: the DNS proofs are skipped")
			return
		}
		t.Run("resolve", func(t *testing.T) { testResolve(t, c) })
		t.Run("autopath", func(t *testing.T) { testAutopath(t, c) })
		t.Run("transparent", func(t *testing.T) { testTransparent(t, c) })
		t.Run("conformance", func(t *testing.T) { testConformance(t, c) })
	})
	if c == nil {
		return
	}
	t.Run("teardown", func(t *testing.T) { checkTeardown(t, c, before) })
}

// checkTeardown asserts that the cluster left nothing behind: no process
// of its binaries, no mount under its directory, no network namespace, no
// cgroup, its directory gone, and the machine-wide sysctls as they were.
func checkTeardown(t *testing.T, c *Cluster, before map[string]string) {
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still there (%v)", c.Dir, err)
	}
	if _, err := os.Stat(c.Node.NetNSPath); !os.IsNotExist(err) {
		t.Errorf("network namespace %s still there (%v)", c.Node.NetNS, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), c.Dir) {
		t.Errorf("mounts under %s remain:\n%s", c.Dir, grepLines(string(mounts), c.Dir))
	}
	cgroups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", c.Node.CgroupParent))
	if len(cgroups) > 0 {
		t.Errorf("cgroups remain: %v", cgroups)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), c.Dir) {
			t.Errorf("process %s still runs: %q", filepath.Dir(p), strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	after := HostSysctls()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("sysctl %s = %s after the cluster, %s before", k, after[k], v)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// testContext is a context bounded by the test's deadline, or d.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
