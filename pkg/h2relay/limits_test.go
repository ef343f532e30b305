package h2relay

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// rawClient is an HTTP/2 client written with x/net's Framer, which sends
// what a gRPC client would not. One goroutine writes, another reads.
type rawClient struct {
	c   net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	blk bytes.Buffer
}

func dialRaw(t *testing.T, path string) *rawClient {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawClient{c: c, fr: http2.NewFramer(c, c)}
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(defaultHeaderTable, nil)
	rc.fr.MaxHeaderListSize = 16 << 20
	rc.enc = hpack.NewEncoder(&rc.blk)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return rc
}

// block is a gRPC request header block for method, and extra fields.
func (rc *rawClient) block(method string, extra ...hpack.HeaderField) []byte {
	rc.blk.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: method},
		{Name: ":authority", Value: "relay"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, extra...) {
		_ = rc.enc.WriteField(f)
	}
	return bytes.Clone(rc.blk.Bytes())
}

func (rc *rawClient) headers(id uint32, method string) error {
	return rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.block(method), EndHeaders: true})
}

// outcome is what a raw client read until its connection ended.
type outcome struct {
	goAway  *http2.ErrCode
	debug   string
	status  map[uint32]codes.Code // grpc-status of trailers received
	resets  map[uint32]http2.ErrCode
	dataFor map[uint32]int // DATA bytes received
	credit  map[uint32]int // WINDOW_UPDATE increments received
	err     error          // why reading stopped
}

// readAll reads frames until the connection ends, or until stop says so.
func (rc *rawClient) readAll(t *testing.T, stop func(*outcome) bool) *outcome {
	t.Helper()
	o := &outcome{status: map[uint32]codes.Code{}, resets: map[uint32]http2.ErrCode{}, dataFor: map[uint32]int{}, credit: map[uint32]int{}}
	rc.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			o.err = err
			return o
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			code := f.ErrCode
			o.goAway, o.debug = &code, string(f.DebugData())
		case *http2.MetaHeadersFrame:
			if v := f.PseudoValue("status"); v != "" || f.StreamEnded() {
				if s := f.Fields; f.StreamEnded() {
					for _, hf := range s {
						if hf.Name == "grpc-status" {
							n, _ := strconv.Atoi(hf.Value)
							o.status[f.StreamID] = codes.Code(n)
						}
					}
				}
			}
		case *http2.RSTStreamFrame:
			o.resets[f.StreamID] = f.ErrCode
		case *http2.DataFrame:
			o.dataFor[f.StreamID] += len(f.Data())
		case *http2.WindowUpdateFrame:
			o.credit[f.StreamID] += int(f.Increment)
		}
		if stop != nil && stop(o) {
			return o
		}
	}
}

// closed reports whether err is the peer closing the connection (a
// reset when it closed with data unread).
func closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// allocated runs fn and returns the bytes allocated meanwhile (the
// process's, all goroutines together) and the heap in use after it.
func allocated(fn func()) (total, heap uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, after.HeapInuse
}

// flood writes frames with write until it fails or n frames are written,
// and returns how many were written.
func flood(n int, write func(i int) error) <-chan int {
	done := make(chan int, 1)
	go func() {
		i := 0
		for ; i < n; i++ {
			if write(i) != nil {
				break
			}
		}
		done <- i
	}()
	return done
}

// TestHeaderBlockFlood: a header block that never ends, with empty or
// full CONTINUATION frames, gets GOAWAY ENHANCE_YOUR_CALM and the
// connection closed after a bounded number of frames, and the relay
// allocates a bounded amount whatever the client sends.
func TestHeaderBlockFlood(t *testing.T) {
	for _, tt := range []struct {
		name   string
		frag   int // bytes per CONTINUATION frame
		frames int // frames the client tries to send
		want   string
	}{
		{"empty CONTINUATIONs", 0, 2_000_000, "CONTINUATION frames"}, // 18 MB of frames
		{"full CONTINUATIONs", 16 << 10, 4_000, "bytes"},             // 64 MiB of header block
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			rc := dialRaw(t, e.path)
			frag := make([]byte, tt.frag)
			var sent <-chan int
			var o *outcome
			total, heap := allocated(func() {
				sent = flood(tt.frames, func(i int) error {
					if i == 0 {
						return rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block(other)})
					}
					return rc.fr.WriteContinuation(1, false, frag)
				})
				o = rc.readAll(t, nil)
				rc.c.Close()
				<-sent
			})
			t.Logf("allocated %d KiB (heap in use after: %d KiB)", total>>10, heap>>10)
			if o.goAway == nil || *o.goAway != http2.ErrCodeEnhanceYourCalm || !bytes.Contains([]byte(o.debug), []byte(tt.want)) {
				t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM naming %q", o.goAway, o.debug, tt.want)
			}
			if !closed(o.err) {
				t.Errorf("connection not closed by the relay: %v", o.err)
			}
			if total > 8<<20 {
				t.Errorf("allocated %d KiB during the flood, want at most 8 MiB", total>>10)
			}
		})
	}
}

// TestHeaderListSize: a header block of a few KiB that decodes to more
// than MaxHeaderListSize (one 4 KiB field in the dynamic table, then
// referenced 300 times: 1.2 MB) gets GOAWAY ENHANCE_YOUR_CALM.
func TestHeaderListSize(t *testing.T) {
	e := newEnv(t, nil)
	rc := dialRaw(t, e.path)
	block := rc.block(other, hpack.HeaderField{Name: "x-big", Value: string(bytes.Repeat([]byte("b"), 4000))})
	for range 300 {
		block = append(block, 0x80|62) // indexed: the newest dynamic table entry, x-big
	}
	if len(block) > defaultFrameSize {
		t.Fatalf("block of %d bytes", len(block))
	}
	if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	o := rc.readAll(t, nil)
	if o.goAway == nil || *o.goAway != http2.ErrCodeEnhanceYourCalm || !bytes.Contains([]byte(o.debug), []byte("header list")) {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM for the header list", o.goAway, o.debug)
	}
	if !closed(o.err) {
		t.Errorf("connection not closed by the relay: %v", o.err)
	}
}

// TestFrameSize: a frame longer than the upstream announced (16 KiB by
// default) gets GOAWAY FRAME_SIZE_ERROR, before it is read.
func TestFrameSize(t *testing.T) {
	e := newEnv(t, nil)
	rc := dialRaw(t, e.path)
	if err := rc.headers(1, other); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.c.Write(header(8<<20, http2.FrameData, 0, 1)); err != nil {
		t.Fatal(err)
	}
	o := rc.readAll(t, nil)
	if o.goAway == nil || *o.goAway != http2.ErrCodeFrameSize {
		t.Errorf("GOAWAY %v %q, want FRAME_SIZE_ERROR", o.goAway, o.debug)
	}
}

// TestControlFlood: RST_STREAM (rapid reset), PING and SETTINGS floods
// get GOAWAY ENHANCE_YOUR_CALM after about MaxControlFrames frames.
func TestControlFlood(t *testing.T) {
	const limit = 100
	for _, tt := range []struct {
		name  string
		write func(rc *rawClient, i int) error
	}{
		{"rapid reset", func(rc *rawClient, i int) error {
			id := uint32(2*i + 1)
			if err := rc.headers(id, other); err != nil {
				return err
			}
			return rc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}},
		{"PING", func(rc *rawClient, i int) error { return rc.fr.WritePing(false, [8]byte{byte(i)}) }},
		{"PING ACK", func(rc *rawClient, i int) error { return rc.fr.WritePing(true, [8]byte{byte(i)}) }},
		{"SETTINGS", func(rc *rawClient, _ int) error {
			return rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil, WithLimits(Limits{MaxControlFrames: limit}))
			rc := dialRaw(t, e.path)
			sent := flood(1_000_000, func(i int) error { return tt.write(rc, i) })
			o := rc.readAll(t, nil)
			rc.c.Close()
			n := <-sent
			t.Logf("%d frames written before the relay closed the connection", n)
			if o.goAway == nil || *o.goAway != http2.ErrCodeEnhanceYourCalm || !bytes.Contains([]byte(o.debug), []byte("control frames")) {
				t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM for control frames", o.goAway, o.debug)
			}
			if n == 1_000_000 {
				t.Error("the whole flood was accepted")
			}
		})
	}
}

// TestControlFedPings: PINGs that follow data sent to the client (gRPC's
// BDP estimator) are not counted: many calls with large answers pass
// under a tiny control-frame budget.
func TestControlFedPings(t *testing.T) {
	e := newEnv(t, nil, WithLimits(Limits{MaxControlFrames: 30}))
	ctx := testCtx(t)
	msg := bytes.Repeat([]byte("p"), 200<<10)
	for i := range 100 {
		if _, err := e.invoke(ctx, other, msg); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// heldRequest writes a request on stream id of the rewritten method whose
// gRPC prefix announces announce bytes, then size bytes in all, in 16 KiB
// frames, as long as writes succeed and stop is open. With credit set, it
// keeps within the stream's flow-control window (the increments for the
// stream come on credit), as a client does.
func heldRequest(rc *rawClient, id uint32, announce, size int, stop <-chan struct{}, credit <-chan int) error {
	if err := rc.headers(id, rewritten); err != nil {
		return err
	}
	chunk := make([]byte, 16<<10)
	binary.BigEndian.PutUint32(chunk[1:5], uint32(announce))
	window := defaultWindow
	for sent := 0; sent < size; {
		select {
		case <-stop:
			return nil
		default:
		}
		n := min(len(chunk), size-sent)
		for credit != nil && window < n {
			select {
			case <-stop:
				return nil
			case c := <-credit:
				window += c
			}
		}
		window -= n
		if err := rc.fr.WriteData(id, sent+n == size, chunk[:n]); err != nil {
			return err
		}
		sent += n
		clear(chunk[:5])
	}
	return nil
}

// TestHeldFlood: requests of the rewritten method of 15 MiB, announced
// by their gRPC prefix or only sent, one stream after another, are each
// answered ResourceExhausted (and RST_STREAM NO_ERROR) without being
// buffered or reaching the upstream, and the client gets no stream
// credit past MaxHeldRequest.
func TestHeldFlood(t *testing.T) {
	const big = 15 << 20
	for _, tt := range []struct {
		name     string
		announce int
	}{
		{"announced", big},
		{"sent", 10}, // the prefix lies: the relay counts what arrives
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, rewriter{rewrite: func(_ context.Context, m []byte) ([]byte, error) { return m, nil }})
			rc := dialRaw(t, e.path)
			const streams = 12
			var o *outcome
			total, heap := allocated(func() {
				for i := range streams {
					id := uint32(2*i + 1)
					stop := make(chan struct{})
					errc := make(chan error, 1)
					credit := make(chan int, 1<<12)
					go func() { errc <- heldRequest(rc, id, tt.announce, big+5, stop, credit) }()
					given := 0
					o = rc.readAll(t, func(o *outcome) bool {
						if c := o.credit[id]; c > given {
							credit <- c - given
							given = c
						}
						_, ok := o.resets[id]
						return ok
					})
					close(stop)
					if err := <-errc; err != nil {
						t.Fatalf("client: %v", err)
					}
					if o.status[id] != codes.ResourceExhausted || o.resets[id] != http2.ErrCodeNo {
						t.Errorf("stream %d: status %v, reset %v; want ResourceExhausted, NO_ERROR (%v)", id, o.status[id], o.resets[id], o.err)
					}
					if o.credit[id] > DefaultLimits.MaxHeldRequest+5 {
						t.Errorf("stream %d: %d bytes of credit, over the %d bytes held", id, o.credit[id], DefaultLimits.MaxHeldRequest+5)
					}
				}
			})
			t.Logf("allocated %d KiB for %d requests of 15 MiB (heap in use after: %d KiB)", total>>10, streams, heap>>10)
			// A held body grows by doubling (or to its announced size) up
			// to MaxHeldRequest, then is refused: 2-3 MiB allocated per
			// stream (race detector included), against 15 MiB sent.
			if bound := uint64(streams * 4 * DefaultLimits.MaxHeldRequest); total > bound {
				t.Errorf("allocated %d KiB, want at most %d KiB", total>>10, bound>>10)
			}
			if got := len(e.up.requests(rewritten)); got != 0 {
				t.Errorf("upstream got %d requests", got)
			}
			// The connection carries on.
			if err := rc.headers(101, other); err != nil {
				t.Fatal(err)
			}
			if err := rc.fr.WriteData(101, true, []byte{0, 0, 0, 0, 1, 'x'}); err != nil {
				t.Fatal(err)
			}
			o = rc.readAll(t, func(o *outcome) bool { _, ok := o.status[101]; return ok })
			if o.status[101] != codes.OK || o.dataFor[101] != 5+len("echo:x") {
				t.Errorf("call after the flood: status %v, %d bytes (%v)", o.status[101], o.dataFor[101], o.err)
			}
		})
	}
}

// TestMaxHeld: with MaxHeld requests held (their Rewriter waits), the
// next ones are answered ResourceExhausted at once; the held ones go on.
func TestMaxHeld(t *testing.T) {
	const limit, extra = 8, 4
	release := make(chan struct{})
	entered := make(chan struct{}, limit)
	e := newEnv(t, rewriter{rewrite: func(ctx context.Context, m []byte) ([]byte, error) {
		entered <- struct{}{}
		select {
		case <-release:
			return m, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}, WithLimits(Limits{MaxHeld: limit}))
	ctx := testCtx(t)
	msg := bytes.Repeat([]byte("h"), 512<<10)
	errc := make(chan error, limit)
	for range limit {
		go func() {
			_, err := e.invoke(ctx, rewritten, msg)
			errc <- err
		}()
	}
	for range limit {
		select {
		case <-entered:
		case <-ctx.Done():
			t.Fatal("held requests did not reach the Rewriter")
		}
	}
	for i := range extra {
		if _, err := e.invoke(ctx, rewritten, msg); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("request %d over MaxHeld: %v, want ResourceExhausted", limit+i, err)
		}
	}
	close(release)
	for range limit {
		if err := <-errc; err != nil {
			t.Errorf("held request: %v", err)
		}
	}
	if got := len(e.up.requests(rewritten)); got != limit {
		t.Errorf("upstream got %d requests, want %d", got, limit)
	}
}

// stalled is an upstream that accepts connections and never reads.
func stalled(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Accept(t, l, func(net.Conn) {}) // held open, unread, until t ends
}

// waitGoroutines waits (at most d) for the number of goroutines to come
// down to n, and returns it.
func waitGoroutines(n int, d time.Duration) int {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		got := runtime.NumGoroutine()
		if got <= n {
			return got
		}
		select {
		case <-deadline.C:
			return got
		case <-tick.C:
		}
	}
}

// writeWatch is a unix connection that tells how long the write under way,
// if any, has been blocked (it still offers the socket: hangup uses it).
type writeWatch struct {
	*net.UnixConn
	since atomic.Int64 // unix nanoseconds the write under way began; 0: none
}

func (w *writeWatch) Write(p []byte) (int, error) {
	w.since.Store(time.Now().UnixNano())
	defer w.since.Store(0)
	return w.UnixConn.Write(p)
}

// blockedFor reports whether a write has been under way for at least d.
func (w *writeWatch) blockedFor(d time.Duration) bool {
	s := w.since.Load()
	return s != 0 && time.Since(time.Unix(0, s)) >= d
}

// waitBlocked waits (at most 5 s) until a write to w has been under way
// for 100 ms: the relay is blocked writing to the peer named.
func waitBlocked(t *testing.T, w *writeWatch, peer string) {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !w.blockedFor(100 * time.Millisecond) {
		select {
		case <-deadline.C:
			t.Fatalf("the relay's writes to the %s never blocked", peer)
		case <-tick.C:
		}
	}
}

// TestStalledUpstream: with an upstream that never reads, a client that
// keeps writing and a held request on its way upstream, the relay ends
// within a bound however it is told to (Close, ctx, a drain then Close,
// the client hanging up, the write timeout), and its goroutines end. A
// client that hangs up while the relay is blocked writing upstream ends it
// within about hangupCheck, well before the default 30 s WriteTimeout (Run
// then returns errPeerGone, or nil when the write that failed was a held
// request's, whose goroutine closes the upstream).
func TestStalledUpstream(t *testing.T) {
	for _, tt := range []struct {
		name    string
		timeout time.Duration // WriteTimeout
		end     func(r *Relay, rc *rawClient, cancel context.CancelFunc)
		within  time.Duration // Run returns within this of end (default 5 s)
	}{
		{"Close", 0, func(r *Relay, _ *rawClient, _ context.CancelFunc) { r.Close() }, 0},
		{"ctx", 0, func(_ *Relay, _ *rawClient, cancel context.CancelFunc) { cancel() }, 0},
		{"Drain then Close", 0, func(r *Relay, _ *rawClient, _ context.CancelFunc) {
			select {
			case <-r.Drain():
			case <-time.After(100 * time.Millisecond): // the caller's bound on the drain
			}
			r.Close()
		}, 0},
		{"client hangs up", 0, func(_ *Relay, rc *rawClient, _ context.CancelFunc) { rc.c.Close() }, 2 * time.Second},
		{"write timeout", 300 * time.Millisecond, func(*Relay, *rawClient, context.CancelFunc) {}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			upPath, relayPath := filepath.Join(dir, "up.sock"), filepath.Join(dir, "relay.sock")
			stalled(t, upPath)
			l, err := net.Listen("unix", relayPath)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			base := runtime.NumGoroutine()

			rewriting := make(chan struct{})
			rw := rewriter{rewrite: func(_ context.Context, m []byte) ([]byte, error) {
				close(rewriting)
				return m, nil
			}}
			rc := dialRaw(t, relayPath)
			c, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			dialed, err := net.Dial("unix", upPath)
			if err != nil {
				t.Fatal(err)
			}
			up := &writeWatch{UnixConn: dialed.(*net.UnixConn)}
			r := New(c, up, WithRewrite(rewritten, rw), WithLimits(Limits{WriteTimeout: tt.timeout}))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- r.Run(ctx) }()

			// A held request, complete: its rewrite waits to write upstream.
			if err := heldRequest(rc, 1, 100, 105, nil, nil); err != nil {
				t.Fatal(err)
			}
			<-rewriting
			// Then more than the sockets buffer, until writes block.
			if err := rc.headers(3, other); err != nil {
				t.Fatal(err)
			}
			chunk := make([]byte, 16<<10)
			sent := flood(1<<16, func(int) error { return rc.fr.WriteData(3, false, chunk) })
			go func() { rc.readAll(t, nil) }() // the client reads what comes
			// The relay is blocked writing upstream when a write has not
			// returned for 100 ms.
			waitBlocked(t, up, "upstream")

			within := tt.within
			if within == 0 {
				within = 5 * time.Second
			}
			start := time.Now()
			tt.end(r, rc, cancel)
			var runErr error
			select {
			case runErr = <-ran:
			case <-time.After(within):
				t.Fatalf("Run did not return within %v", within)
			}
			took := time.Since(start)
			rc.c.Close()
			n := <-sent
			if n == 1<<16 {
				t.Fatal("the client's writes never blocked: the upstream read them")
			}
			got := waitGoroutines(base, 5*time.Second)
			t.Logf("Run returned %v after %s (%v); goroutines %d (baseline %d)", took.Round(time.Millisecond), tt.name, runErr, got, base)
			if got > base {
				t.Errorf("%d goroutines after the relay ended, baseline %d", got, base)
			}
		})
	}
}

// TestStalledClient: with a client that never reads and an upstream that
// writes until the relay is blocked writing to the client, the upstream
// hanging up ends the relay within about hangupCheck (not at the 30 s
// WriteTimeout), and its goroutines end.
func TestStalledClient(t *testing.T) {
	dir := t.TempDir()
	upPath, relayPath := filepath.Join(dir, "up.sock"), filepath.Join(dir, "relay.sock")
	ul, err := net.Listen("unix", upPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	l, err := net.Listen("unix", relayPath)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	base := runtime.NumGoroutine()

	rc := dialRaw(t, relayPath) // writes the preface and SETTINGS, then never reads
	accepted, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := &writeWatch{UnixConn: accepted.(*net.UnixConn)}
	up, err := net.Dial("unix", upPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ul.Accept()
	if err != nil {
		t.Fatal(err)
	}
	r := New(c, up)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(context.Background()) }()

	// The upstream reads what comes (the preface) and writes PINGs, which
	// the relay passes on, until its writes block.
	go io.Copy(io.Discard, srv)
	sfr := http2.NewFramer(srv, nil)
	sent := flood(1<<20, func(i int) error { return sfr.WritePing(false, [8]byte{byte(i)}) })
	waitBlocked(t, c, "client")

	start := time.Now()
	srv.Close()
	var runErr error
	select {
	case runErr = <-ran:
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return within 2 s of the upstream hanging up")
	}
	took := time.Since(start)
	rc.c.Close()
	if n := <-sent; n == 1<<20 {
		t.Fatal("the upstream's writes never blocked: the client read them")
	}
	got := waitGoroutines(base, 5*time.Second)
	t.Logf("Run returned %v after the upstream hung up (%v); goroutines %d (baseline %d)", took.Round(time.Millisecond), runErr, got, base)
	if !errors.Is(runErr, errPeerGone) {
		t.Errorf("Run returned %v, want %v", runErr, errPeerGone)
	}
	if got > base {
		t.Errorf("%d goroutines after the relay ended, baseline %d", got, base)
	}
}

// TestHeldSlotsShared: relays sharing HeldSlots hold at most that many
// requests between them; a slot freed is usable again.
func TestHeldSlotsShared(t *testing.T) {
	slots := NewHeldSlots(1)
	entered, unblock := make(chan struct{}, 1), make(chan struct{})
	blocking := rewriter{rewrite: func(_ context.Context, m []byte) ([]byte, error) {
		entered <- struct{}{}
		<-unblock
		return m, nil
	}}
	a := newEnv(t, blocking, WithHeldSlots(slots))
	b := newEnv(t, rewriter{rewrite: func(_ context.Context, m []byte) ([]byte, error) { return m, nil }}, WithHeldSlots(slots))
	ctx := testCtx(t)
	done := make(chan error, 1)
	go func() {
		_, err := a.invoke(ctx, rewritten, []byte("first"))
		done <- err
	}()
	<-entered // a holds the one slot
	if n := slots.InUse(); n != 1 {
		t.Fatalf("slots in use = %d, want 1", n)
	}
	if _, err := b.invoke(ctx, rewritten, []byte("second")); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a second relay while the slot is taken: %v, want ResourceExhausted", err)
	}
	close(unblock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitSlotsFree(t, slots)
	if _, err := b.invoke(ctx, rewritten, []byte("third")); err != nil {
		t.Fatalf("after the slot was freed: %v", err)
	}
	waitSlotsFree(t, slots)
}

// waitSlotsFree waits until no slot is in use: a relay's slot goes when
// its send returns, which can be after the runtime answered and the
// client read the reply.
func waitSlotsFree(t *testing.T, slots *HeldSlots) {
	t.Helper()
	testkit.WaitEqual(t, 5*time.Second, "slots in use after the calls", slots.InUse, 0)
}
