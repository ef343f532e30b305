package apiserver

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"go.uber.org/goleak"
)

// process is one child: etcd or kube-apiserver, logging to a file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // cmd.Wait's result, valid after done
}

// startProcess runs bin with args in its own process group, appending its
// stdout and stderr to logPath and, when out is not nil, to out as well.
func startProcess(name, bin string, args []string, logPath string, out io.Writer) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	var w io.Writer = logFile
	if out != nil {
		w = io.MultiWriter(logFile, &prefixWriter{prefix: name + ": ", w: out})
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.SysProcAttr = sysProcAttr()
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	// The parent-death signal follows the thread that forked, not the
	// process: a thread that exits (as one locked by a goroutine that ends,
	// like the namespace dialer's) would take the child with it. So the
	// fork happens on a thread kept locked until the child exits.
	release, err := testkit.StartLocked(cmd)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		release()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool { return testkit.Closed(p.done) }

// stop sends SIGTERM to the process group, waits up to grace for the
// process to exit, then kills the group. It is safe to call more than once.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	if err := terminate(p.cmd.Process.Pid); err != nil {
		return fmt.Errorf("terminate %s: %w", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(grace):
		// Ignore the error: the group may have gone in the meantime.
		_ = kill(p.cmd.Process.Pid)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
		}
	}
	// Make sure nothing the process forked outlives it.
	_ = kill(p.cmd.Process.Pid)
	return nil
}

// exitError describes an unexpected exit, with the end of the log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited: %w\n%s", p.name, p.err, p.logTail(40))
}

// logTail returns the last n lines of the process log.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// addrInUse reports whether the log shows a failure to bind a port, the one
// start-up error worth retrying on fresh ports.
func (p *process) addrInUse() bool {
	b, err := os.ReadFile(p.logPath)
	return err == nil && bytes.Contains(b, []byte("address already in use"))
}

// prefixWriter prefixes each line written to w.
type prefixWriter struct {
	prefix string
	w      io.Writer
	buf    []byte
}

func (pw *prefixWriter) Write(b []byte) (int, error) {
	pw.buf = append(pw.buf, b...)
	for {
		i := bytes.IndexByte(pw.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := fmt.Fprintf(pw.w, "%s%s\n", pw.prefix, pw.buf[:i]); err != nil {
			return len(b), err
		}
		pw.buf = pw.buf[i+1:]
	}
}

// IgnoreProcesses are the goleak options for the control plane's own
// goroutines of a process it started during a test (a kube-apiserver
// started again): its waiter and the thread it was started from, which
// live as long as the control plane.
var IgnoreProcesses = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/dnsconfigurer/dnsconfigurer/test/apiserver.startProcess.func1"),
	goleak.IgnoreAnyFunction("github.com/dnsconfigurer/dnsconfigurer/internal/testkit.StartLocked.func1"),
}
