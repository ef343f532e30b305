package convert_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// envBin names a dnsconfigurer binary the tests of this file run instead of
// the one buildbin builds: the way to show that they fail on an older one.
const envBin = "DNSCONFIGURER_CONVERT_BIN"

// The bounds of issue 66 row 5 (on 8c15235 100,000 keys took 12.3 s,
// SIGTERM was ignored, and a killed run left 273,598 files).
const (
	largeSize  = 10 << 20
	largeBound = 5 * time.Second
	stopBound  = time.Second
)

func convertBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(envBin); bin != "" {
		return bin
	}
	return buildbin.Dnsconfigurer(t)
}

// corefileHead is a coredns ConfigMap whose Corefile imports three of its
// keys, and those keys.
const corefileHead = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\n  namespace: kube-system\ndata:\n" +
	"  Corefile: |\n    .:53 {\n        errors\n        forward . 10.0.0.1\n        cache 30\n    }\n    import /etc/coredns/custom/zone*.server\n" +
	"  zone0.server: |\n    z0.example:53 {\n        forward . 10.0.1.1\n    }\n" +
	"  zone1.server: |\n    z1.example:53 {\n        forward . 10.0.1.2\n    }\n" +
	"  zone2.server: |\n    z2.example:53 {\n        forward . 10.0.1.3\n    }\n"

// largeConfigMap is corefileHead padded to exactly largeSize bytes with
// small keys (many) or with four keys of 2.5 MiB; keys is how many keys
// it has.
func largeConfigMap(many bool) (text []byte, keys int) {
	var b bytes.Buffer
	b.WriteString(corefileHead)
	keys = 4
	if many {
		for b.Len()+26+64 <= largeSize {
			fmt.Fprintf(&b, "  k%07d: value-%07d\n", keys, keys)
			keys++
		}
	} else {
		line := "    " + strings.Repeat("x", 76) + "\n"
		for i := range 4 {
			fmt.Fprintf(&b, "  big%d.txt: |\n", i)
			for b.Len()+len(line) <= (i+1)*(largeSize-64)/4 {
				b.WriteString(line)
			}
			keys++
		}
	}
	b.WriteString("  pad: " + strings.Repeat("p", largeSize-b.Len()-len("  pad: \n")) + "\n")
	return b.Bytes(), keys + 1
}

// writeLarge writes largeConfigMap to a file of t.
func writeLarge(t *testing.T, many bool) (string, int) {
	t.Helper()
	text, keys := largeConfigMap(many)
	if len(text) != largeSize {
		t.Fatalf("input is %d bytes, want %d", len(text), largeSize)
	}
	path := filepath.Join(t.TempDir(), "configmap.yaml")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, keys
}

// left lists what is in dir.
func left(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// wantEmpty fails t unless dir is empty, counting what is left.
func wantEmpty(t *testing.T, dir string) {
	t.Helper()
	names := left(t, dir)
	if len(names) == 0 {
		return
	}
	files := 0
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			files++
		}
		return nil
	})
	t.Errorf("TMPDIR holds %d entries (%d files in all), want none: %s", len(names), files, strings.Join(names[:min(len(names), 3)], ", "))
}

// TestLargeConfigMap (issue 66 row 5): a 10 MiB coredns ConfigMap, of
// about 400,000 small keys or of four 2.5 MiB keys, converts in under 5 s
// and writes nothing in TMPDIR; the Corefile's imports read their keys.
func TestLargeConfigMap(t *testing.T) {
	bin := convertBin(t)
	for _, tc := range []struct {
		name string
		many bool
	}{{"small keys", true}, {"four huge keys", false}} {
		t.Run(tc.name, func(t *testing.T) {
			path, keys := writeLarge(t, tc.many)
			tmp := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "convert", path)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			begin := time.Now()
			err := cmd.Run()
			took := time.Since(begin)
			t.Logf("%d keys, %d bytes: exit %d after %v", keys, largeSize, exitCode(err), took.Round(time.Millisecond))
			if ctx.Err() != nil {
				t.Fatalf("still running after %v: killed", took.Round(time.Millisecond))
			}
			if err != nil {
				t.Fatalf("exit %d: %s", exitCode(err), lastLines(stderr.String(), 3))
			}
			if took > largeBound {
				t.Errorf("took %v, want under %v", took.Round(time.Millisecond), largeBound)
			}
			testkit.WantSubstrings(t, "stderr", stderr.String(), "zone0.server:2", "zone2.server:2", "zone*.server: zone0.server, zone1.server, zone2.server")
			testkit.WantSubstrings(t, "stdout", stdout.String(), "zone: z1.example")
			wantEmpty(t, tmp)
		})
	}
}

// TestLargeConfigMapBounds: past corefile.MaxInputBytes or
// corefile.MaxKeys, convert refuses the input with an error naming the
// bound.
func TestLargeConfigMapBounds(t *testing.T) {
	bin := convertBin(t)
	dir := t.TempDir()
	var keys strings.Builder
	keys.WriteString("kind: ConfigMap\ndata:\n  Corefile: \".:53 {\\n forward . 10.0.0.1\\n}\\n\"\n")
	for i := range 1_000_001 {
		fmt.Fprintf(&keys, "  k%d: v\n", i)
	}
	for _, tc := range []struct {
		name, text, want string
	}{
		{"over 16 MiB", corefileHead + "  pad: " + strings.Repeat("p", 16<<20) + "\n", "over 16 MiB: convert reads at most 16 MiB"},
		{"over 1,000,000 keys", keys.String(), "more than 1000000 ConfigMap keys: convert reads at most 1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "cm.yaml")
			write(t, path, tc.text)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "convert", path).CombinedOutput()
			if exitCode(err) != 1 || !strings.Contains(string(out), tc.want) {
				t.Errorf("exit %d, output %s; want exit 1 and %q", exitCode(err), lastLines(string(out), 3), tc.want)
			}
		})
	}
}

// fifoRun is a started convert whose stdin is a named pipe the test writes.
type fifoRun struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stderr bytes.Buffer
	exited chan struct{}
	err    error
}

// startFIFO starts convert on stdin, a named pipe (testkit.FIFO), with
// TMPDIR tmp. The test holds the pipe's only write end: convert reads what
// the test writes, and sees no end of input while the test keeps it open.
func startFIFO(t *testing.T, bin, tmp string) *fifoRun {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stdin")
	testkit.FIFO(t, path)
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // no writer yet: do not wait for one
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &fifoRun{cmd: exec.Command(bin, "convert", "-"), stdin: w, exited: make(chan struct{})}
	p.cmd.Stdin, p.cmd.Stderr = r, &p.stderr
	p.cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close() // convert is the only reader: a write fails if it is gone
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		w.Close()
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// feed writes text to convert's stdin; it returns once convert has read all
// of it but what the pipe buffers (64 KiB), so convert is running.
func (p *fifoRun) feed(t *testing.T, text []byte) {
	t.Helper()
	if err := p.stdin.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.stdin.Write(text); err != nil {
		t.Fatalf("write convert's stdin: %v; stderr: %s", err, p.stderr.String())
	}
}

// TestConvertStopsOnSIGTERM (issue 66 row 5): SIGTERM stops convert
// within a second, with exit 1 and a message, while it waits for more of a
// stdin that never ends and while it parses a 10 MiB ConfigMap it has read.
// On 8c15235 convert ignored SIGTERM and ran on.
func TestConvertStopsOnSIGTERM(t *testing.T) {
	bin := convertBin(t)
	text, _ := largeConfigMap(true)
	for _, tc := range []struct {
		name string
		feed []byte
		end  bool // close stdin after feed
	}{
		{"stdin that never ends", text[:1<<20], false},
		{"parsing 10 MiB", text, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			p := startFIFO(t, bin, tmp)
			p.feed(t, tc.feed)
			if tc.end {
				p.stdin.Close()
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			bound := time.NewTimer(stopBound)
			defer bound.Stop()
			select {
			case <-p.exited:
			case <-bound.C:
				t.Fatalf("still running %v after SIGTERM", stopBound)
			}
			took := time.Since(sent)
			t.Logf("exit %d %v after SIGTERM: %s", exitCode(p.err), took.Round(time.Microsecond), strings.TrimSpace(p.stderr.String()))
			if code := exitCode(p.err); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			testkit.WantSubstrings(t, "stderr", p.stderr.String(), "convert: stopped (terminated signal received): nothing written")
			wantEmpty(t, tmp)
		})
	}
}

// TestConvertStopsInItsStartCheck: SIGTERM stops convert within a second
// in its start check (clusterdns.Check, seconds for 20,000 routes), and
// its stand-in files are gone. They are files in memory (memfd): the
// check has begun once the process holds one, and none is ever in TMPDIR.
func TestConvertStopsInItsStartCheck(t *testing.T) {
	cmd, stderr, exited, tmp := startInCheck(t)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	select {
	case err := <-exited:
		took := time.Since(sent)
		t.Logf("exit %d %v after SIGTERM: %s", exitCode(err), took.Round(time.Microsecond), strings.TrimSpace(stderr.String()))
		if exitCode(err) != 1 || took > stopBound {
			t.Errorf("exit %d after %v, want 1 within %v", exitCode(err), took, stopBound)
		}
	case <-time.After(stopBound):
		t.Fatalf("still running %v after SIGTERM", stopBound)
	}
	testkit.WantSubstrings(t, "stderr", stderr.String(), "convert: stopped (terminated signal received): nothing written")
	wantEmpty(t, tmp)
}

// TestConvertKilledInItsStartCheck: SIGKILL in the start check leaves
// nothing behind: its stand-ins were files in memory. Before, they were
// files in a temporary directory, left there.
func TestConvertKilledInItsStartCheck(t *testing.T) {
	cmd, _, exited, tmp := startInCheck(t)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	wantEmpty(t, tmp)
}

// startInCheck starts convert on a Corefile of 20,000 routes (seconds of
// start check) with TMPDIR a fresh directory, and returns once the start
// check holds a stand-in file, checking that none is in TMPDIR.
func startInCheck(t *testing.T) (*exec.Cmd, *bytes.Buffer, chan error, string) {
	t.Helper()
	bin := convertBin(t)
	var text strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&text, "z%d.example:53 {\n    forward . /etc/resolv.conf\n}\n", i)
	}
	path := filepath.Join(t.TempDir(), "Corefile")
	write(t, path, text.String())
	tmp := t.TempDir()
	cmd := exec.Command(bin, "convert", path)
	stderr := new(bytes.Buffer)
	cmd.Stderr, cmd.Env = stderr, append(os.Environ(), "TMPDIR="+tmp)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	testkit.WaitEvery(t, time.Minute, time.Millisecond, func() error {
		select {
		case err := <-exited:
			t.Fatalf("ended (exit %d) before its start check was seen", exitCode(err))
		default:
		}
		if !holdsStandIn(cmd.Process.Pid) {
			return errors.New("no stand-in file yet")
		}
		return nil
	})
	if l := left(t, tmp); len(l) != 0 {
		t.Errorf("stand-in files in TMPDIR: %v", l)
	}
	return cmd, stderr, exited, tmp
}

// TestKilledConvertLeavesNothing (issue 66 row 5): convert killed with
// SIGKILL leaves nothing in TMPDIR: killed while it parses a 10 MiB
// ConfigMap, and killed at the first entry it makes in TMPDIR, watched for
// all along its run (it makes none). On 8c15235 it wrote every key to a
// temporary directory: the second case left it behind.
func TestKilledConvertLeavesNothing(t *testing.T) {
	bin := convertBin(t)
	t.Run("while parsing", func(t *testing.T) {
		tmp := t.TempDir()
		text, _ := largeConfigMap(true)
		p := startFIFO(t, bin, tmp)
		p.feed(t, text)
		p.stdin.Close()
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-p.exited
		if !isSignal(p.err, syscall.SIGKILL) {
			t.Fatalf("ended (%v) before SIGKILL: %s", p.err, p.stderr.String())
		}
		wantEmpty(t, tmp)
	})
	t.Run("at its first temporary file", func(t *testing.T) {
		tmp := t.TempDir()
		path, _ := writeLarge(t, true)
		cmd := exec.Command(bin, "convert", path)
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		var err error
		ended := false
		testkit.WaitFor(t, time.Minute, func() error {
			select {
			case err = <-exited:
				ended = true
				return nil
			default:
			}
			if len(left(t, tmp)) > 0 {
				return nil
			}
			return errors.New("no entry in TMPDIR, and convert runs")
		})
		if ended {
			t.Logf("convert ended (exit %d) with no entry ever seen in TMPDIR", exitCode(err))
		} else {
			t.Logf("killed at TMPDIR's first entry: %v", left(t, tmp))
			_ = cmd.Process.Kill()
			<-exited
		}
		wantEmpty(t, tmp)
	})
}

func isSignal(err error, sig syscall.Signal) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// holdsStandIn reports whether process pid holds a stand-in file of the
// start check (a memfd named dnsconfigurer-stand-in).
func holdsStandIn(pid int) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, _ := os.ReadDir(dir)
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(l, "/memfd:dnsconfigurer-stand-in") {
			return true
		}
	}
	return false
}
