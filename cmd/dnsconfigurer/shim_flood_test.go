package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// floodMaxHWM is the hardening target: the shim's peak RSS stays at or
// under 150 MiB under either flood.
const floodMaxHWM = 150 << 20

// Bounds of each flood, whichever comes first: a shim that is still
// reading after that has failed the test.
const (
	floodMaxBytes = 400 << 20
	floodMaxTime  = 20 * time.Second
)

// TestShimFlood runs `dnsconfigurer shim` (this test binary re-executed
// into main, as TestShimSIGTERMStalledRuntime does) in front of a runtime
// that never reads, floods it, and checks that the shim refuses the flood
// and that its peak RSS (VmHWM) stays at or under 150 MiB. Each flood has
// a process of its own, so that each peak is its own.
func TestShimFlood(t *testing.T) {
	if args := os.Getenv("DNSCONFIGURER_SHIM_CHILD"); args != "" {
		os.Args = append([]string{"dnsconfigurer", "shim"}, strings.Split(args, "\n")...)
		main() // exits
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the shim's peak RSS from /proc/<pid>/status")
	}
	t.Run("continuation/empty", func(t *testing.T) { floodContinuation(t, 0) })
	t.Run("continuation/16KiB", func(t *testing.T) { floodContinuation(t, 16<<10) })
	t.Run("held-requests", floodHeldRequests)
}

// floodShim is a shim process in front of a stalledRuntime.
type floodShim struct {
	pid      int
	sock     string
	baseline int64 // VmHWM once the shim accepts connections, in bytes
}

// startFloodShim starts the shim as a child process in front of a
// stalledRuntime (or, draining, a runtime that reads and discards) and
// waits until its socket accepts connections. Cleanup kills it and, if
// the test failed, logs its stderr.
func startFloodShim(t *testing.T, draining bool) *floodShim {
	t.Helper()
	dir := t.TempDir()
	rtSock, shimSock := filepath.Join(dir, "rt.sock"), filepath.Join(dir, "shim.sock")
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rl, err := net.Listen("unix", rtSock)
	if err != nil {
		t.Fatal(err)
	}
	if draining {
		go serveDrainingRuntime(rl)
		t.Cleanup(func() { rl.Close() })
	} else {
		rt := &stalledRuntime{l: rl}
		go rt.serve()
		t.Cleanup(rt.close)
	}

	args := []string{"--listen", shimSock, "--runtime-endpoint", "unix://" + rtSock, "--resolv-conf", resolv,
		"--cluster-dns", "10.96.0.10", "--log-level", "info"}
	cmd := exec.Command(os.Args[0], "-test.run=^TestShimFlood$")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KUBERNETES_SERVICE_HOST=") }),
		"DNSCONFIGURER_SHIM_CHILD="+strings.Join(args, "\n"))
	var stderr bytes.Buffer // read only once the shim has exited
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when the shim has exited, with waitErr set
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill() // fails if it has exited
		<-exited
		if t.Failed() {
			t.Logf("shim stderr:\n%s", stderr.String())
		}
	})

	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		c, err := net.Dial("unix", shimSock)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("shim exited before listening: %v", waitErr)
		case <-deadline:
			t.Fatalf("shim not listening on %s after 20s: %v", shimSock, err)
		case <-tick.C:
		}
	}
	s := &floodShim{pid: cmd.Process.Pid, sock: shimSock}
	s.baseline = s.hwm(t)
	return s
}

// serveDrainingRuntime accepts connections on l, opens large flow-control
// windows as stalledRuntime does, then reads and discards everything and
// answers nothing: a runtime that keeps up, as containerd does with the
// frames of a stream that was reset, but never completes a call.
func serveDrainingRuntime(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		fr := http2.NewFramer(c, nil)
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
		fr.WriteWindowUpdate(0, 1<<30)
		go io.Copy(io.Discard, c) // returns when the shim closes c
	}
}

// hwm returns the shim's peak resident set size (VmHWM) in bytes.
func (s *floodShim) hwm(t *testing.T) int64 {
	t.Helper()
	return procHWM(t, s.pid)
}

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
	stderr *lockedBuffer
	// exited is closed when the process has exited, with waitErr and
	// state set.
	exited  chan struct{}
	waitErr error
	state   *os.ProcessState
}

// startChild starts dnsconfigurer args in a child process; test is the
// test (calling runChild first) that the child runs. The child gets this
// process's environment without the Go runtime's memory settings (GOGC,
// GOMEMLIMIT), as a pod does. Cleanup kills it if it is still running and,
// if the test failed, logs its stderr.
func startChild(t *testing.T, test string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") || strings.HasPrefix(kv, childEnv+"=")
	}), childEnv+"="+strings.Join(args, "\n"))
	c := &child{lines: make(chan string, 64), stderr: &lockedBuffer{}, exited: make(chan struct{})}
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
	deadline := time.Now().Add(wait)
	for {
		s := c.stderr.String()
		missing := slices.IndexFunc(want, func(w string) bool { return !strings.Contains(s, w) })
		if missing < 0 {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks %q after %v:\n%s", want[missing], wait, s)
		}
		select {
		case <-c.exited:
			// the last write is in: check once more
			if s := c.stderr.String(); !strings.Contains(s, want[missing]) {
				t.Fatalf("exited (%v); stderr lacks %q:\n%s", c.waitErr, want[missing], s)
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
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

// lockedBuffer is a bytes.Buffer safe for a writer and concurrent readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
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

// checkHWM logs the shim's baseline and peak RSS and checks the peak
// against floodMaxHWM.
func (s *floodShim) checkHWM(t *testing.T, flood string) {
	t.Helper()
	peak := s.hwm(t)
	t.Logf("shim RSS: baseline %.1f MiB, peak under %s %.1f MiB (VmHWM; target at most %d MiB)",
		mib(s.baseline), flood, mib(peak), floodMaxHWM>>20)
	if peak > floodMaxHWM {
		t.Errorf("shim peak RSS under %s = %.1f MiB, want at most %d MiB", flood, mib(peak), floodMaxHWM>>20)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// floodContinuation opens a raw HTTP/2 connection to the shim, sends a
// HEADERS frame without END_HEADERS and then CONTINUATION frames of size
// bytes each until the shim closes the connection, floodMaxBytes are sent
// or floodMaxTime has passed; only the first passes.
func floodContinuation(t *testing.T, size int) {
	s := startFloodShim(t, false)
	c, err := net.Dial("unix", s.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fr := http2.NewFramer(c, c)

	// The reader: the connection is closed when a read fails.
	type closed struct {
		goAway *http2.ErrCode
		debug  string
		err    error
	}
	readDone := make(chan closed, 1)
	go func() {
		var res closed
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				res.err = err
				readDone <- res
				return
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				code := ga.ErrCode
				res.goAway, res.debug = &code, string(ga.DebugData())
			}
		}
	}()

	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: runtimeapi.RuntimeService_RunPodSandbox_FullMethodName}, {Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}} {
		enc.WriteField(f)
	}
	payload := continuationPayload(size)

	// The writer: the flood, bounded in bytes and time.
	type sent struct {
		frames, bytes int
		err           error // the write that failed
		all           bool  // floodMaxBytes sent
	}
	writeDone := make(chan sent, 1)
	stop := make(chan struct{})
	go func() {
		var res sent
		defer func() { writeDone <- res }()
		if _, res.err = io.WriteString(c, http2.ClientPreface); res.err != nil {
			return
		}
		if res.err = fr.WriteSettings(); res.err != nil {
			return
		}
		if res.err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr.Bytes()}); res.err != nil {
			return
		}
		for res.bytes < floodMaxBytes {
			select {
			case <-stop:
				return
			default:
			}
			if res.err = fr.WriteContinuation(1, false, payload); res.err != nil {
				return
			}
			res.frames++
			res.bytes += 9 + len(payload)
		}
		res.all = true
	}()

	begin := time.Now()
	timeout := time.NewTimer(floodMaxTime)
	defer timeout.Stop()
	var got closed
	select {
	case got = <-readDone:
	case <-timeout.C:
		close(stop)
		c.Close()
		w := <-writeDone
		t.Fatalf("the shim kept the connection open for %v under %d CONTINUATION frames (%d bytes)", floodMaxTime, w.frames, w.bytes)
	}
	took := time.Since(begin)
	close(stop)
	c.Close() // ends a write blocked on a shim that stopped reading
	w := <-writeDone
	if w.all {
		t.Errorf("the shim read all %d CONTINUATION frames (%d bytes) before closing the connection", w.frames, w.bytes)
	}
	goAway := "none"
	if got.goAway != nil {
		goAway = fmt.Sprintf("%v %q", *got.goAway, got.debug)
		if *got.goAway != http2.ErrCodeEnhanceYourCalm {
			t.Errorf("GOAWAY %s, want %v", goAway, http2.ErrCodeEnhanceYourCalm)
		}
	}
	// A unix socket whose peer closed with bytes unread reads ECONNRESET.
	if !errors.Is(got.err, io.EOF) && !errors.Is(got.err, syscall.ECONNRESET) {
		t.Errorf("read after the flood: %v, want the connection closed by the shim", got.err)
	}
	t.Logf("connection closed after %v: %d CONTINUATION frames of %d bytes written (%d bytes; last write: %v); GOAWAY %s; read: %v",
		took.Round(time.Millisecond), w.frames, size, w.bytes, w.err, goAway, got.err)
	s.checkHWM(t, fmt.Sprintf("a CONTINUATION flood (%d-byte frames)", size))
}

// continuationPayload returns a CONTINUATION frame payload of size bytes
// that continues a valid header block however often it is repeated: never
// indexed literals of one field, cut at size bytes, the next frame taking
// up where the previous stopped (the unit's length divides size).
func continuationPayload(size int) []byte {
	if size == 0 {
		return nil
	}
	var unit bytes.Buffer
	hpack.NewEncoder(&unit).WriteField(hpack.HeaderField{Name: "x-flood", Value: strings.Repeat("a", 1000), Sensitive: true})
	// Pad the value until the unit's length divides size (a power of two).
	for v := 1000; size%unit.Len() != 0; v++ {
		unit.Reset()
		hpack.NewEncoder(&unit).WriteField(hpack.HeaderField{Name: "x-flood", Value: strings.Repeat("a", v), Sensitive: true})
	}
	return bytes.Repeat(unit.Bytes(), size/unit.Len())
}

// floodHeldRequests makes 8 concurrent RunPodSandbox calls of 15 MiB each
// on one connection: the relay holds RunPodSandbox requests, and must
// refuse these (ResourceExhausted) rather than hold 120 MiB.
func floodHeldRequests(t *testing.T) {
	// The runtime reads: the relay sends on the rest of a refused
	// request, so a runtime that never reads would stall the connection
	// behind the first refusal until the relay's write timeout (30s).
	s := startFloodShim(t, true)
	conn, err := grpc.NewClient("unix://"+s.sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(32<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), floodMaxTime)
	defer cancel()
	const calls, size = 8, 15 << 20
	big := strings.Repeat("x", size) // shared: strings are immutable
	begin := time.Now()
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
				Metadata:    &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("p%d", i), Namespace: "team", Uid: fmt.Sprintf("u%d", i)},
				Annotations: map[string]string{"big": big},
				DnsConfig:   &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}},
			}}, grpc.WaitForReady(true))
		}()
	}
	wg.Wait()
	took := time.Since(begin)
	for i, err := range errs {
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("call %d of %d MiB: %v, want ResourceExhausted", i, size>>20, err)
		}
	}
	t.Logf("%d RunPodSandbox calls of %d MiB answered in %v: %v", calls, size>>20, took.Round(time.Millisecond), status.Convert(errs[0]).Message())
	s.checkHWM(t, fmt.Sprintf("%d held requests of %d MiB", calls, size>>20))
}
