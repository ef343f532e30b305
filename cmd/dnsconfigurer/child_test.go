package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// procHWM returns the peak resident set size (VmHWM) of the process pid in
// bytes.
func procHWM(t *testing.T, pid int) int64 {
	t.Helper()
	return procStatus(t, pid, "VmHWM")
}

// procStatus returns the field (a size in kB) of /proc/<pid>/status in
// bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("process status: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kib, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				break
			}
			return kib << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status:\n%s", field, pid, b)
	return 0
}

// childEnv carries the command line of a child started by startChild.
const childEnv = "DNSCONFIGURER_CHILD"

// runChild, called first by a test that startChild names, turns this
// process into the dnsconfigurer command line it was started with (main
// exits); elsewhere it does nothing.
func runChild() {
	if args := os.Getenv(childEnv); args != "" {
		os.Args = append([]string{"dnsconfigurer"}, strings.Split(args, "\n")...)
		main() // exits
	}
}

// child is `dnsconfigurer <args>` in a process of its own: this test binary
// re-executed into main, as TestShimFlood runs the shim.
type child struct {
	pid    int
	lines  chan string // stdout, a line at a time
	stderr *testkit.Buffer
	// exited is closed when the process has exited, with waitErr and
	// state set.
	exited  chan struct{}
	waitErr error
	state   *os.ProcessState
}

// startChild starts dnsconfigurer args in a child process; test is the
// test (calling runChild first) that the child runs. The child gets this
// process's environment without the Go runtime's memory settings (GOGC,
// GOMEMLIMIT) and without an API server (KUBECONFIG,
// KUBERNETES_SERVICE_HOST). Cleanup kills it if it is still running and,
// if the test failed, logs its stderr.
func startChild(t *testing.T, test string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	return startCmd(t, cmd, []string{childEnv + "=" + strings.Join(args, "\n")}, args)
}

// startBinary starts the dnsconfigurer binary bin (buildbin.Dnsconfigurer)
// with args and env, for a test that measures the process: this test
// binary, with every test's packages in it, weighs more than the product.
func startBinary(t *testing.T, bin string, env []string, args ...string) *child {
	t.Helper()
	return startCmd(t, exec.Command(bin, args...), env, args)
}

// startCmd starts cmd, args being the dnsconfigurer command line it runs,
// with env added to this process's environment without what a Deployment
// or a developer's shell would set.
func startCmd(t *testing.T, cmd *exec.Cmd, env, args []string) *child {
	t.Helper()
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, drop := range []string{"GOGC=", "GOMEMLIMIT=", "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", childEnv + "="} {
			if strings.HasPrefix(kv, drop) {
				return true
			}
		}
		return false
	}), env...)
	c := &child{lines: make(chan string, 64), stderr: &testkit.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout = &lineWriter{lines: c.lines}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.pid = cmd.Process.Pid
	go func() {
		c.waitErr = cmd.Wait()
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // fails if it has exited
		<-c.exited
		if t.Failed() {
			t.Logf("%s stderr:\n%s", args[0], c.stderr.String())
		}
	})
	return c
}

// line returns the child's next line of output, failing the test when
// none comes within wait or the child exits first.
func (c *child) line(t *testing.T, wait time.Duration) string {
	t.Helper()
	select {
	case l := <-c.lines:
		return l
	case <-c.exited:
		select {
		case l := <-c.lines: // written before it exited
			return l
		default:
		}
		t.Fatalf("exited (%v) without another line of output", c.waitErr)
	case <-time.After(wait):
		t.Fatalf("no line of output within %v", wait)
	}
	return ""
}

// waitStderr waits until the child's stderr holds each of want, for at
// most wait.
func (c *child) waitStderr(t *testing.T, wait time.Duration, want ...string) string {
	t.Helper()
	var s string
	testkit.WaitFor(t, wait, func() error {
		exited := false
		select {
		case <-c.exited:
			exited = true // the last write is in: this check is the last
		default:
		}
		s = c.stderr.String()
		missing := slices.IndexFunc(want, func(w string) bool { return !strings.Contains(s, w) })
		if missing < 0 {
			return nil
		}
		if exited {
			t.Fatalf("exited (%v); stderr lacks %q:\n%s", c.waitErr, want[missing], s)
		}
		return fmt.Errorf("stderr lacks %q:\n%s", want[missing], s)
	})
	return s
}

// waitUntil waits for cond as testkit.WaitFor does; the child exiting
// first fails t at once.
func (c *child) waitUntil(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	testkit.WaitFor(t, timeout, func() error {
		select {
		case <-c.exited:
			t.Fatalf("exited (%v) before the wait ended:\n%s", c.waitErr, c.stderr.String())
		default:
		}
		return cond()
	})
}

// terminate sends SIGTERM and returns how long the child took to exit,
// failing the test when that is more than within; it waits at most twice
// that.
func (c *child) terminate(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	if err := syscall.Kill(c.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
	case <-time.After(2 * within):
		t.Fatalf("still running %v after SIGTERM", 2*within)
	}
	took := time.Since(begin)
	if took > within {
		t.Errorf("took %v to exit after SIGTERM, want at most %v", took.Round(time.Millisecond), within)
	}
	return took
}

// lineWriter sends what is written to it to lines, a line at a time; a
// line that finds lines full is dropped rather than block the writer.
type lineWriter struct {
	partial []byte
	lines   chan<- string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		select {
		case w.lines <- string(w.partial[:i]):
		default:
		}
		w.partial = w.partial[i+1:]
	}
}
