package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// TestCluster brings one cluster up, runs every proof against it as
// subtests, tears it down and checks that nothing was left behind. Run a
// part with -run, e.g. -run 'TestCluster/kubelet' (the cluster still
// comes up and goes down around it).
func TestCluster(t *testing.T) {
	withCluster(t, Options{}, "kubelet Ready through the shim", func(t *testing.T, c *Cluster, st *steps) {
		ok := st.run(t, "deploy", func(t *testing.T) { testDeploy(t, c) })
		st.run(t, "kubelet", func(t *testing.T) { testKubelet(t, c) })
		if !ok {
			t.Log("deploy/ failed: the DNS proofs are skipped")
			return
		}
		st.proofs(t, c, proof{"resolve", testResolve}, proof{"autopath", testAutopath},
			proof{"transparent", testTransparent},
			proof{"conformance", func(t *testing.T, c *Cluster) { testConformance(t, c) }})
	})
}

// withCluster is the frame of a cluster test: the cluster comes up (the
// "up" step, what saying how kubelet reaches containerd), proofs run inside
// it as steps, it goes down, and "teardown" checks that nothing was left.
func withCluster(t *testing.T, opts Options, what string, proofs func(t *testing.T, c *Cluster, st *steps)) {
	// A cluster whose test process died left the machine's sysctls as
	// kubelet set them; Start would restore them after this reading.
	sweepStale(t)
	before := HostSysctls()
	st := newSteps(t)
	var c *Cluster
	st.run(t, "up", func(t *testing.T) {
		begin := time.Now()
		c = Start(t, buildbin.Dnsconfigurer(t), opts)
		t.Logf("cluster up in %s (%s; %s, %s)", time.Since(begin).Round(time.Millisecond), what, c.Node.ContainerdVersion, c.Node.RuncVersion)
		proofs(t, c, st)
	})
	if c == nil {
		return
	}
	st.run(t, "teardown", func(t *testing.T) { checkTeardown(t, c, before) })
}

// steps runs a cluster test's proofs as subtests and, at the very end of
// the test's output, names those that failed. A failed cluster test ends
// with the components' log tails, so a log cut to its tail still says
// which step failed.
type steps struct {
	mu     sync.Mutex
	failed []string
}

// newSteps returns steps reporting on t when t ends.
func newSteps(t *testing.T) *steps {
	s := &steps{}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.failed) > 0 {
			t.Logf("failed steps (each one's error is above the cluster logs): %s", strings.Join(s.failed, ", "))
		}
	})
	return s
}

// run is t.Run, recording a failure (a step and the step around it both
// fail when the inner one does).
func (s *steps) run(t *testing.T, name string, f func(*testing.T)) bool {
	ok := t.Run(name, f)
	if !ok {
		s.mu.Lock()
		s.failed = append(s.failed, t.Name()+"/"+name)
		s.mu.Unlock()
	}
	return ok
}

// proof is a check of a running cluster, run as the step name.
type proof struct {
	name string
	run  func(*testing.T, *Cluster)
}

// proofs runs each of ps on c as a step, whether the ones before passed
// or not.
func (s *steps) proofs(t *testing.T, c *Cluster, ps ...proof) {
	for _, p := range ps {
		s.run(t, p.name, func(t *testing.T) { p.run(t, c) })
	}
}

// checkTeardown asserts that the cluster left nothing behind: no process
// of its binaries, no mount under its directory, no network namespace, no
// cgroup, its directory gone, and the machine-wide sysctls as they were.
func checkTeardown(t *testing.T, c *Cluster, before map[string]string) {
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still there (%v)", c.Dir, err)
	}
	netns := []string{}
	for _, n := range c.Nodes {
		netns = append(netns, n.Harness.NetNS)
	}
	if c.fabric != "" {
		netns = append(netns, c.fabric)
	}
	for _, ns := range netns {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); !os.IsNotExist(err) {
			t.Errorf("network namespace %s still there (%v)", ns, err)
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), c.Dir) {
		t.Errorf("mounts under %s remain:\n%s", c.Dir, testkit.GrepLines(string(mounts), c.Dir))
	}
	for _, n := range c.Nodes {
		cgroups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", n.Harness.CgroupParent))
		if len(cgroups) > 0 {
			t.Errorf("cgroups of %s remain: %v", n.Name, cgroups)
		}
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

// testContext is a context bounded by the test's deadline, or d.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
