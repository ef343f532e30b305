package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// proc is one long-running child of the cluster (kubelet, kube-proxy, the
// shim, ...), started in the node's network namespace, in a process group
// of its own, logging to a file. It can be stopped and started again with
// the same command line.
type proc struct {
	name    string
	netns   string // /run/netns/NAME
	bin     string
	args    []string
	logPath string

	cmd     *exec.Cmd
	exited  chan struct{}
	release func() // of the thread the child was started from
}

// start runs the command. The child gets a parent-death signal, which the
// kernel ties to the thread that forked it, so the fork happens on a
// goroutine locked to its thread until stop: a test binary that dies
// without cleaning up takes its children with it.
func (p *proc) start() error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	fmt.Fprintf(logFile, "=== %s %s %q\n", time.Now().Format(time.RFC3339Nano), p.bin, p.args)
	// nsenter execs the binary (it does not fork for a network namespace
	// alone), so the process, its group and its death signal are the
	// binary's own.
	cmd := exec.Command("nsenter", append([]string{"--net=" + p.netns, "--", p.bin}, p.args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	release, err := testkit.StartLocked(cmd)
	if err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	p.cmd, p.exited, p.release = cmd, exited, release
	return nil
}

// running reports whether the process is started and has not exited.
func (p *proc) running() bool { return p.cmd != nil && !testkit.Closed(p.exited) }

// stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits for the exit. Stopping a stopped process does nothing.
func (p *proc) stop(grace time.Duration) error {
	if p.cmd == nil {
		return nil
	}
	defer func() {
		p.release()
		p.cmd = nil
	}()
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	var err error
	select {
	case <-p.exited:
	case <-time.After(grace):
		err = fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pgid)
		}
	}
	// Anything the process forked into its group goes with it.
	if e := syscall.Kill(-pgid, syscall.SIGKILL); e != nil && !errors.Is(e, syscall.ESRCH) {
		err = errors.Join(err, e)
	}
	return err
}

// kill kills the process group at once (SIGKILL) and waits for the exit,
// as a machine that loses power. Killing a stopped process does nothing.
func (p *proc) kill() error {
	if p.cmd == nil {
		return nil
	}
	defer func() {
		p.release()
		p.cmd = nil
	}()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// logTail returns the last n lines of the process's log.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no %s log: %v)", p.name, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// waitFor polls cond every 100ms (backing off to 1s) until it returns true
// or an error, or ctx ends; the error then carries cond's last complaint.
func waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	delay := 100 * time.Millisecond
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("wait for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-time.After(delay):
		}
		if delay < time.Second {
			delay *= 2
		}
	}
}
