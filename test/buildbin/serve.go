package buildbin

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ServeStartWait bounds a serve process's start (the log lines with its
// addresses).
const ServeStartWait = 20 * time.Second

var (
	// One address of either family: 127.0.0.1:53 or [::]:53.
	dnsRe     = regexp.MustCompile(`msg="serving DNS".*listen=\[(\S+)\](?:\s|$)`)
	metricsRe = regexp.MustCompile(`msg="serving metrics".*listen=(\S+)`)
)

// LockedBuffer is a process's stderr, safe to read while it is written.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Serve is one `dnsconfigurer serve` process on the example objects.
type Serve struct {
	DNS, Metrics string // addresses it logged
	Stderr       *LockedBuffer
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
	bin := Dnsconfigurer(t)
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--listen", listen,
		"--metrics-listen", net.JoinHostPort(host, "0"), "--log-format", "text", "--lameduck", "0s"}, args...)...)
	s := &Serve{Stderr: &LockedBuffer{}}
	cmd.Stderr = s.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("serve %s stderr:\n%s", listen, s.Stderr.String())
		}
	})
	deadline := time.Now().Add(ServeStartWait)
	for {
		out := s.Stderr.String()
		if m, mm := dnsRe.FindStringSubmatch(out), metricsRe.FindStringSubmatch(out); m != nil && mm != nil {
			s.DNS, s.Metrics = m[1], mm[1]
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve %s did not start within %v:\n%s", listen, ServeStartWait, out)
		}
		select {
		case <-exited:
			t.Fatalf("serve %s exited:\n%s", listen, s.Stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Metric is the sum of the series of name on the process's /metrics.
func (s *Serve) Metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", s.Metrics, line, err)
		}
		sum += v
	}
	return sum
}
