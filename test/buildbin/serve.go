package buildbin

import (
	"net"
	"os/exec"
	"regexp"
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
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// Start runs the built binary with args. It is killed when t ends, and its
// output logged when t failed.
func Start(t *testing.T, args ...string) *Proc {
	t.Helper()
	p := &Proc{Cmd: exec.Command(Dnsconfigurer(t), args...), Output: &testkit.Buffer{}, exited: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Output, p.Output
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.Cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("dnsconfigurer %s output:\n%s", args[0], p.Output.String())
		}
	})
	return p
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Wait waits up to d for the exit and returns cmd.Wait's error; it fails t
// when the process still runs after d.
func (p *Proc) Wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		t.Fatalf("dnsconfigurer %s still running after %v", p.Cmd.Args[1], d)
		return nil
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
