package h2relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	rewritten = "/test.Service/Rewritten"
	other     = "/test.Service/Other"
)

// raw is a message for rawCodec: the bytes on the wire.
type raw []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*raw), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*raw) = append(raw(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// upstream is a gRPC server that answers every method with "echo:" and
// the request, and records the requests it gets.
type upstream struct {
	mu   sync.Mutex
	got  map[string][][]byte
	md   metadata.MD
	path string
}

func (u *upstream) echo(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	md, _ := metadata.FromIncomingContext(ss.Context())
	var m raw
	if err := ss.RecvMsg(&m); err != nil {
		return err
	}
	u.mu.Lock()
	u.got[method] = append(u.got[method], m)
	u.md = md
	u.mu.Unlock()
	_ = ss.SetHeader(metadata.Pairs("x-upstream-header", "h-"+method))
	ss.SetTrailer(metadata.Pairs("x-upstream-trailer", "t-"+method))
	out := raw("echo:" + string(m))
	return ss.SendMsg(&out)
}

func (u *upstream) requests(method string) [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.got[method]
}

// rewriter is a Rewriter from functions.
type rewriter struct {
	rewrite   func(context.Context, []byte) ([]byte, error)
	malformed func(error) error
}

func (r rewriter) Rewrite(ctx context.Context, msg []byte) ([]byte, error) {
	return r.rewrite(ctx, msg)
}
func (r rewriter) Malformed(err error) error { return r.malformed(err) }

// call is one observed call.
type call struct {
	method string
	code   codes.Code
}

// env is an upstream with relays in front of it: each connection to path
// gets a Relay to a connection of its own to the upstream.
type env struct {
	up     *upstream
	path   string
	conn   *grpc.ClientConn
	relays chan *Relay
	calls  chan call // observed calls, in order
}

func newEnv(t *testing.T, rw Rewriter, opts ...Option) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{up: &upstream{got: map[string][][]byte{}, path: filepath.Join(dir, "up.sock")}, path: filepath.Join(dir, "relay.sock"), relays: make(chan *Relay, 16), calls: make(chan call, 64)}
	ul, err := net.Listen("unix", e.up.path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(e.up.echo), grpc.ForceServerCodec(rawCodec{}))
	go func() { _ = srv.Serve(ul) }()
	t.Cleanup(srv.Stop)

	l, err := net.Listen("unix", e.path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context() // done before the relays are waited for
	opts = append([]Option{WithLogger(slog.New(slog.DiscardHandler)), WithObserver(func(method string, code codes.Code, _ time.Duration) {
		select {
		case e.calls <- call{method, code}:
		default: // a test that does not look; the relay must not wait
		}
	})}, opts...)
	if rw != nil {
		opts = append(opts, WithRewrite(rewritten, rw))
	}
	testkit.Accept(t, l, func(c net.Conn) {
		up, err := net.Dial("unix", e.up.path)
		if err != nil {
			c.Close()
			return
		}
		r := New(c, up, opts...)
		select {
		case e.relays <- r:
		default:
		}
		_ = r.Run(ctx)
	})
	e.conn, err = grpc.NewClient("unix://"+e.path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.conn.Close() })
	return e
}

func (e *env) invoke(ctx context.Context, method string, msg []byte, opts ...grpc.CallOption) ([]byte, error) {
	in, out := raw(msg), raw(nil)
	err := e.conn.Invoke(ctx, method, &in, &out, opts...)
	return out, err
}

// observed waits for the next n observed calls: a call is observed just
// before its last frame goes to the client (or when it is reset).
func (e *env) observed(ctx context.Context, n int) []call {
	var got []call
	for range n {
		select {
		case c := <-e.calls:
			got = append(got, c)
		case <-ctx.Done():
			return got
		}
	}
	return got
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestPassThrough: methods other than the rewritten one, with their
// metadata, reach the upstream and come back unchanged, and are observed.
func TestPassThrough(t *testing.T) {
	e := newEnv(t, rewriter{rewrite: func(context.Context, []byte) ([]byte, error) { return nil, errors.New("not called") }})
	ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-client", "c1")
	var header, trailer metadata.MD
	big := bytes.Repeat([]byte("z"), 1<<20) // larger than every window
	for _, msg := range [][]byte{[]byte("a"), big} {
		out, err := e.invoke(ctx, other, msg, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, append([]byte("echo:"), msg...)) {
			t.Errorf("reply of %d bytes, want echo of %d", len(out), len(msg))
		}
	}
	if got := header.Get("x-upstream-header"); len(got) != 1 || got[0] != "h-"+other {
		t.Errorf("header = %v", header)
	}
	if got := trailer.Get("x-upstream-trailer"); len(got) != 1 || got[0] != "t-"+other {
		t.Errorf("trailer = %v", trailer)
	}
	if got := e.up.md.Get("x-client"); len(got) != 1 || got[0] != "c1" {
		t.Errorf("upstream metadata = %v", e.up.md)
	}
	// Both calls were counted before their answers reached the client.
	if n := len(e.calls); n != 2 {
		t.Errorf("%d calls observed when the client had both answers, want 2", n)
	}
	if got := e.observed(ctx, 2); len(got) != 2 || got[0] != (call{other, codes.OK}) || got[1] != got[0] {
		t.Errorf("observed %v, want 2 OK calls of %s", got, other)
	}
}

// TestRewrite holds the one method's request and sends on what the
// Rewriter returns, or rejects the call with its status.
func TestRewrite(t *testing.T) {
	large := bytes.Repeat([]byte("L"), 300<<10) // over the initial windows
	tests := []struct {
		name      string
		msg       []byte
		opts      []grpc.CallOption
		rewrite   func(context.Context, []byte) ([]byte, error)
		malformed error
		wantUp    []byte // what the upstream gets; nil: nothing
		wantCode  codes.Code
		wantMsg   string
	}{
		{name: "rewritten", msg: []byte("abc"),
			rewrite: func(_ context.Context, m []byte) ([]byte, error) { return append([]byte("new-"), m...), nil },
			wantUp:  []byte("new-abc")},
		{name: "unchanged", msg: []byte("abc"),
			rewrite: func(_ context.Context, m []byte) ([]byte, error) { return bytes.Clone(m), nil },
			wantUp:  []byte("abc")},
		{name: "large, grown", msg: large,
			rewrite: func(_ context.Context, m []byte) ([]byte, error) { return append(bytes.Clone(m), large...), nil },
			wantUp:  append(bytes.Clone(large), large...)},
		{name: "rejected", msg: []byte("abc"),
			rewrite: func(context.Context, []byte) ([]byte, error) {
				return nil, status.Error(codes.InvalidArgument, "no: 100% wrong\n")
			},
			wantCode: codes.InvalidArgument, wantMsg: "no: 100% wrong\n"},
		{name: "plain error", msg: []byte("abc"),
			rewrite:  func(context.Context, []byte) ([]byte, error) { return nil, errors.New("boom") },
			wantCode: codes.Unknown, wantMsg: "boom"},
		{name: "deadline", msg: []byte("abc"), opts: nil,
			rewrite: func(ctx context.Context, m []byte) ([]byte, error) {
				if _, ok := ctx.Deadline(); !ok {
					return nil, status.Error(codes.Internal, "no deadline from grpc-timeout")
				}
				return m, nil
			},
			wantUp: []byte("abc")},
		{name: "compressed, forwarded", msg: []byte("abc"), opts: []grpc.CallOption{grpc.UseCompressor(gzip.Name)},
			wantUp: []byte("abc")},
		{name: "compressed, rejected", msg: []byte("abc"), opts: []grpc.CallOption{grpc.UseCompressor(gzip.Name)},
			malformed: status.Error(codes.InvalidArgument, "compressed"), wantCode: codes.InvalidArgument, wantMsg: "compressed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var malformed []error
			e := newEnv(t, rewriter{rewrite: tt.rewrite, malformed: func(err error) error {
				malformed = append(malformed, err)
				return tt.malformed
			}})
			ctx := testCtx(t)
			out, err := e.invoke(ctx, rewritten, tt.msg, tt.opts...)
			if st := status.Convert(err); st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
				t.Fatalf("call = %v, want %v %q", err, tt.wantCode, tt.wantMsg)
			}
			got := e.up.requests(rewritten)
			switch {
			case tt.wantUp == nil && len(got) != 0:
				t.Errorf("upstream got %d requests, want none", len(got))
			case tt.wantUp != nil && (len(got) != 1 || !bytes.Equal(got[0], tt.wantUp)):
				t.Errorf("upstream got %d requests, want %d bytes", len(got), len(tt.wantUp))
			case tt.wantUp != nil && !bytes.Equal(out, append([]byte("echo:"), tt.wantUp...)):
				t.Errorf("reply of %d bytes", len(out))
			}
			if (tt.opts != nil) != (len(malformed) == 1) {
				t.Errorf("Malformed called with %v", malformed)
			}
			if c := e.observed(ctx, 1); len(c) != 1 || c[0] != (call{rewritten, tt.wantCode}) {
				t.Errorf("observed %v", c)
			}
			// The connection carries on: the client's and upstream's HPACK
			// tables are still in step after a rejection.
			for range 2 {
				if out, err := e.invoke(metadata.AppendToOutgoingContext(ctx, "x-after", "1"), other, []byte("x")); err != nil || string(out) != "echo:x" {
					t.Fatalf("call after: %q, %v", out, err)
				}
			}
		})
	}
}

// TestRewriteConcurrent sends large held requests and other calls at once
// on one connection: nothing stalls, nothing is corrupted, and the
// connection windows stay in step (more data than any window follows).
func TestRewriteConcurrent(t *testing.T) {
	e := newEnv(t, rewriter{rewrite: func(_ context.Context, m []byte) ([]byte, error) { return append([]byte("+"), m...), nil }})
	ctx := testCtx(t)
	const n = 8
	errc := make(chan error, 2*n)
	for i := range n {
		msg := bytes.Repeat([]byte{byte('a' + i)}, 200<<10)
		go func() {
			out, err := e.invoke(ctx, rewritten, msg)
			if err == nil && !bytes.Equal(out, append([]byte("echo:+"), msg...)) {
				err = errors.New("corrupted reply")
			}
			errc <- err
		}()
		go func() {
			_, err := e.invoke(ctx, other, msg)
			errc <- err
		}()
	}
	for range 2 * n {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if got := len(e.up.requests(rewritten)); got != n {
		t.Errorf("upstream got %d rewritten requests, want %d", got, n)
	}
}

// TestMaxHeldRequest: a held request over the limit (WithLimits) is answered ResourceExhausted, never reaches the
// upstream, and the connection carries on.
func TestMaxHeldRequest(t *testing.T) {
	for _, tt := range []struct {
		name string
		opt  Option
	}{
		{"WithLimits", WithLimits(Limits{MaxHeldRequest: 1 << 10})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, rewriter{rewrite: func(_ context.Context, m []byte) ([]byte, error) { return m, nil }}, tt.opt)
			ctx := testCtx(t)
			if _, err := e.invoke(ctx, rewritten, make([]byte, 1000)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.invoke(ctx, rewritten, make([]byte, 2000)); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("over the limit: %v, want ResourceExhausted", err)
			}
			if got := len(e.up.requests(rewritten)); got != 1 {
				t.Errorf("upstream got %d requests", got)
			}
			if c := e.observed(ctx, 2); len(c) != 2 || c[1] != (call{rewritten, codes.ResourceExhausted}) {
				t.Errorf("observed %v", c)
			}
			if out, err := e.invoke(ctx, other, []byte("x")); err != nil || string(out) != "echo:x" {
				t.Fatalf("call after: %q, %v", out, err)
			}
		})
	}
}

// TestDrain: a drained relay sends GOAWAY; the client opens its next call
// on a new connection, and the drain completes. The next call may leave
// before the client reads the GOAWAY: it must still run once, upstream
// of the new connection.
func TestDrain(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	if _, err := e.invoke(ctx, other, []byte("1")); err != nil {
		t.Fatal(err)
	}
	r := <-e.relays
	select {
	case <-r.Drain():
	case <-ctx.Done():
		t.Fatal("drain of an idle relay did not complete")
	}
	if _, err := e.invoke(ctx, other, []byte("2")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.relays:
	case <-ctx.Done():
		t.Fatal("the client did not reconnect after GOAWAY")
	}
	if got := e.up.requests(other); len(got) != 2 || string(got[0]) != "1" || string(got[1]) != "2" {
		t.Errorf("the upstream got %q, want each request once", got)
	}
}

// TestDrainLaterStream: a stream the client opens after Drain's GOAWAY,
// before it has read it, never reaches the upstream's handler. The
// upstream gets its HEADERS, which its HPACK table needs, then a
// RST_STREAM before its DATA. The GOAWAY names the stream in flight as the
// last, so a client retries the later one elsewhere: a relay that passed
// it on would have the call run twice. The stream in flight goes on.
func TestDrainLaterStream(t *testing.T) {
	cc, rc := socketPair(t)
	ru, uc := socketPair(t)
	r := New(rc, ru, WithLogger(slog.New(slog.DiscardHandler)))
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(context.Background()) }()
	defer func() {
		cc.Close()
		uc.Close()
		<-runErr
	}()
	deadline := time.Now().Add(15 * time.Second)
	cc.SetDeadline(deadline)
	uc.SetDeadline(deadline)

	client := newScript(t)
	client.raw([]byte(http2.ClientPreface)).settings().request(1, other, false).message(1, "first", true).
		with(func(f *http2.Framer) error { return f.WritePing(false, [8]byte{1}) })
	upFr := http2.NewFramer(nil, uc)
	// upTo reads the upstream's side up to the PING marked n, and returns
	// the frames on streams other than 0.
	upTo := func(n byte) []string {
		var got []string
		for {
			f, err := upFr.ReadFrame()
			if err != nil {
				t.Fatalf("the upstream's side: %v (got %v)", err, got)
			}
			if p, ok := f.(*http2.PingFrame); ok && p.Data[0] == n {
				return got
			}
			if id := f.Header().StreamID; id != 0 {
				s := fmt.Sprintf("%v %d", f.Header().Type, id)
				if rst, ok := f.(*http2.RSTStreamFrame); ok {
					s += " " + rst.ErrCode.String()
				}
				got = append(got, s)
			}
		}
	}
	if _, err := cc.Write(client.bytes()); err != nil {
		t.Fatal(err)
	}
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(uc, preface); err != nil {
		t.Fatal(err)
	}
	if got, want := upTo(1), []string{"HEADERS 1", "DATA 1"}; !slices.Equal(got, want) {
		t.Fatalf("the upstream got %v before the drain, want %v", got, want)
	}

	drained := r.Drain()
	sent := len(client.bytes())
	client.request(3, other, false).message(3, "later", true).
		with(func(f *http2.Framer) error { return f.WritePing(false, [8]byte{2}) })
	if _, err := cc.Write(client.bytes()[sent:]); err != nil {
		t.Fatal(err)
	}
	if got, want := upTo(2), []string{"HEADERS 3", "RST_STREAM 3 CANCEL", "DATA 3"}; !slices.Equal(got, want) {
		t.Errorf("the upstream got %v for the stream opened after GOAWAY, want %v", got, want)
	}
	select {
	case <-drained:
		t.Fatal("the drain ended with stream 1 in flight")
	default:
	}

	if _, err := uc.Write(newScript(t).response(1, "echo", 0).bytes()); err != nil {
		t.Fatal(err)
	}
	clientFr := http2.NewFramer(nil, cc)
	clientFr.ReadMetaHeaders = hpack.NewDecoder(defaultHeaderTable, nil)
	var goAway *http2.GoAwayFrame
	var ended []uint32
	for goAway == nil || len(ended) == 0 {
		f, err := clientFr.ReadFrame()
		if err != nil {
			t.Fatalf("the client's side: %v (GOAWAY %v, streams ended %v)", err, goAway, ended)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goAway = f
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				ended = append(ended, f.StreamID)
			}
		case *http2.RSTStreamFrame:
			t.Errorf("the client got RST_STREAM %d %v", f.StreamID, f.ErrCode)
		}
	}
	if goAway.LastStreamID != 1 || goAway.ErrCode != http2.ErrCodeNo {
		t.Errorf("GOAWAY last stream %d %v, want 1 NO_ERROR", goAway.LastStreamID, goAway.ErrCode)
	}
	if !slices.Equal(ended, []uint32{1}) {
		t.Errorf("streams ended for the client: %v, want [1]", ended)
	}
	select {
	case <-drained:
	case <-time.After(time.Until(deadline)):
		t.Fatal("the drain did not end once stream 1 was answered")
	}
}

// TestTrailersOnlyKeepsDynamicTable decodes a rejection with a decoder
// that has entries in its dynamic table: the reply decodes to the status,
// and the table afterwards is what it was (same entries at the same
// indexes, none added).
func TestTrailersOnlyKeepsDynamicTable(t *testing.T) {
	var prior bytes.Buffer
	enc := hpack.NewEncoder(&prior)
	for _, f := range []hpack.HeaderField{{Name: "x-a", Value: "1"}, {Name: "x-b", Value: "2"}} {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	dec := hpack.NewDecoder(defaultHeaderTable, nil)
	if _, err := dec.DecodeFull(prior.Bytes()); err != nil {
		t.Fatal(err)
	}
	msg := "dnsconfigurer: rejected: 100%\n" + strings.Repeat("é", 10)
	got, err := dec.DecodeFull(trailersOnly(uint32(codes.InvalidArgument), msg))
	if err != nil {
		t.Fatal(err)
	}
	want := []hpack.HeaderField{
		{Name: ":status", Value: "200"},
		{Name: "content-type", Value: "application/grpc", Sensitive: true},
		{Name: "grpc-status", Value: "3", Sensitive: true},
		{Name: "grpc-message", Value: grpcMessageEncode(msg), Sensitive: true},
	}
	if len(got) != len(want) {
		t.Fatalf("fields = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d = %v, want %v", i, got[i], want[i])
		}
	}
	// Indexes 62 and 63 are the dynamic table's newest and oldest entry.
	after, err := dec.DecodeFull([]byte{0x80 | 62, 0x80 | 63})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || after[0].Name != "x-b" || after[0].Value != "2" || after[1].Name != "x-a" || after[1].Value != "1" {
		t.Errorf("dynamic table after the reply = %v, want [x-b: 2, x-a: 1]", after)
	}
	if _, err := dec.DecodeFull([]byte{0x80 | 64}); err == nil {
		t.Error("the dynamic table has a third entry after the reply")
	}
}

// TestRelayBadInput sends what no HTTP/2 client sends: the relay closes
// that connection, without a panic, and the others carry on.
func TestRelayBadInput(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	if _, err := e.invoke(ctx, other, []byte("1")); err != nil {
		t.Fatal(err)
	}
	p := http2.ClientPreface
	for _, tc := range []struct{ name, input string }{
		{"not a preface", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"HEADERS with a bad HPACK block", p + string(header(3, http2.FrameHeaders, http2.FlagHeadersEndHeaders, 1)) + "\xff\xff\xff"},
		{"HEADERS with bad padding", p + string(header(2, http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersPadded, 1)) + "\x09\x00"},
		{"a frame interrupting a header block", p + string(header(0, http2.FrameHeaders, 0, 1)) + string(header(0, http2.FrameData, 0, 1))},
		{"a truncated frame", p + string(header(100, http2.FrameData, 0, 1)) + "short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("unix", e.path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.input); err != nil {
				t.Fatal(err)
			}
			if tc.name == "a truncated frame" {
				c.(*net.UnixConn).CloseWrite()
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			// The connection must end (the upstream's SETTINGS may come first).
			if _, err := io.Copy(io.Discard, c); err != nil {
				t.Fatalf("connection not closed by the relay: %v", err)
			}
			if _, err := e.invoke(ctx, other, []byte("2")); err != nil {
				t.Fatalf("relay stopped serving after %s: %v", tc.name, err)
			}
		})
	}
}
