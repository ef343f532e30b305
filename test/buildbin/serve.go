package buildbin

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// ServeStartWait bounds a process's start (the log lines with its
// addresses).
const ServeStartWait = 20 * time.Second

var (
	// One address of either family: 127.0.0.1:53 or [::]:53.
	dnsRe     = regexp.MustCompile(`msg="serving DNS".*listen=\[(\S+)\](?:\s|$)`)
	metricsRe = regexp.MustCompile(`msg="serving metrics".*listen=(\S+)`)
)

// Proc is a running dnsconfigurer command.
type Proc struct {
	Cmd    *exec.Cmd
	Output *testkit.Buffer // stdout and stderr
	Name   string          // names it in failures
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// Start runs the built binary with args. It is killed when t ends, and its
// output logged when t failed.
func Start(t testing.TB, args ...string) *Proc {
	t.Helper()
	return StartCommand(t, args[0], exec.Command(Dnsconfigurer(t), args...), 0)
}

// StartCommand runs cmd, the built binary (Dnsconfigurer) perhaps wrapped
// to run in a network namespace (ip netns exec, nsenter), named name in
// failures, with its stdout and stderr in Output. A parent-death signal in
// cmd.SysProcAttr holds: the fork is made from a kept thread
// (testkit.StartLocked). When t ends the process is stopped with
// Terminate, or killed at once with grace 0, and its output logged when t
// failed.
func StartCommand(t testing.TB, name string, cmd *exec.Cmd, grace time.Duration) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Output: &testkit.Buffer{}, Name: name, exited: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Output, p.Output
	release := func() {}
	if a := cmd.SysProcAttr; a != nil && a.Pdeathsig != 0 {
		r, err := testkit.StartLocked(cmd)
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		release = r
	} else if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		release()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if grace > 0 {
			Terminate(p.Cmd.Process, p.exited, grace)
		} else {
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("dnsconfigurer %s output:\n%s", name, p.Output.String())
		}
	})
	return p
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// HasExited reports whether the process has exited.
func (p *Proc) HasExited() bool { return testkit.Closed(p.exited) }

// Wait waits up to d for the exit and returns cmd.Wait's error; it fails t
// when the process still runs after d.
func (p *Proc) Wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		t.Fatalf("dnsconfigurer %s still running after %v", p.Name, d)
		return nil
	}
}

// Stop sends SIGTERM and wants a clean exit within d.
func (p *Proc) Stop(t *testing.T, d time.Duration) {
	t.Helper()
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	if err := p.Wait(t, d); err != nil {
		t.Errorf("dnsconfigurer %s exit after SIGTERM: %v", p.Name, err)
	}
}

// WaitLog waits (ServeStartWait) for re in the output and returns the
// match and its groups; it fails t if the process exits first.
func (p *Proc) WaitLog(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	return p.Output.WaitMatch(t, ServeStartWait, re, p.exited)
}

// Serve is one `dnsconfigurer serve` process on the example objects.
type Serve struct {
	*Proc
	DNS, Metrics string // addresses it logged
}

// StartServe runs `dnsconfigurer serve` on the example objects, listening
// on listen and forwarding to upstream (StartServeArgs). objects is the
// path of examples/objects from the test's directory.
func StartServe(t *testing.T, objects, listen, upstream string) *Serve {
	t.Helper()
	return StartServeArgs(t, listen, "--objects", objects, "--upstream", upstream)
}

// Objects writes manifest as objects.yaml in a new directory of t's and
// returns the directory, for serve's --objects.
func Objects(t testing.TB, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ClusterIPServices is the manifest of namespace ns and of n Services
// svc-0 ... svc-(n-1) in it, with port 80/TCP and cluster IPs from
// 10.97.0.1 on, 250 to a /24.
func ClusterIPServices(ns string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n---\n", ns)
	for k := range n {
		ip := fmt.Sprintf("10.97.%d.%d", k/250, k%250+1)
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  namespace: %s\nspec:\n  clusterIP: %s\n  clusterIPs: [%s]\n  ports:\n  - port: 80\n    protocol: TCP\n---\n", k, ns, ip, ip)
	}
	return b.String()
}

// ExternalNames is the manifest of namespace ns and of n ExternalName
// Services ext-0 ... ext-(n-1) in it, ext-k to target(k).
func ExternalNames(ns string, n int, target func(k int) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n---\n", ns)
	for k := range n {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: ext-%d\n  namespace: %s\nspec:\n  type: ExternalName\n  externalName: %s\n---\n", k, ns, target(k))
	}
	return b.String()
}

// StartServeArgs runs `dnsconfigurer serve` listening on listen (metrics
// on its host, port 0) with args after the common flags, and waits for
// its DNS and metrics addresses. The process is killed when t ends; its
// log is printed when t failed.
func StartServeArgs(t *testing.T, listen string, args ...string) *Serve {
	t.Helper()
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatal(err)
	}
	s := &Serve{Proc: Start(t, append([]string{"serve", "--listen", listen,
		"--metrics-listen", net.JoinHostPort(host, "0"), "--log-format", "text", "--lameduck", "0s"}, args...)...)}
	s.DNS = s.WaitLog(t, dnsRe)[1]
	s.Metrics = s.WaitLog(t, metricsRe)[1]
	return s
}

// Metric is the sum of the series of name on the process's /metrics.
func (s *Serve) Metric(t *testing.T, name string) float64 {
	t.Helper()
	m, err := testkit.Scrape(nil, "http://"+s.Metrics+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m.Sum(name)
}
