package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*Broadcaster).loop"),
	)
}

func TestPassThroughUnary(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-kubelet", "k1", "x-bin-bin", "\x00\x01")

	var header, trailer metadata.MD
	resp, err := e.runtime.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.VersionResponse{Version: "v1", RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}
	if !proto.Equal(resp, want) {
		t.Errorf("Version = %v, want %v", resp, want)
	}
	if got := header.Get("x-runtime-header"); len(got) != 1 || got[0] != "h1" {
		t.Errorf("header x-runtime-header = %q, want [h1]", got)
	}
	if got := trailer.Get("x-runtime-trailer"); len(got) != 1 || got[0] != "t1" {
		t.Errorf("trailer x-runtime-trailer = %q, want [t1]", got)
	}
	md, dl := e.rt.last()
	if got := md.Get("x-kubelet"); len(got) != 1 || got[0] != "k1" {
		t.Errorf("runtime saw x-kubelet = %q, want [k1]", got)
	}
	if got := md.Get("x-bin-bin"); len(got) != 1 || got[0] != "\x00\x01" {
		t.Errorf("runtime saw x-bin-bin = %q", got)
	}
	if want, _ := ctx.Deadline(); dl.IsZero() || dl.Sub(want).Abs() > time.Second {
		t.Errorf("runtime deadline = %v, want about %v", dl, want)
	}

	// An error passes with its code, message and details.
	_, err = e.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "abc"})
	st := status.Convert(err)
	if st.Code() != codes.NotFound || st.Message() != `container "abc" not found` {
		t.Errorf("ContainerStatus error = %v, want NotFound", err)
	}
	if d := st.Details(); len(d) != 1 || !proto.Equal(d[0].(*durationpb.Duration), durationpb.New(42*time.Second)) {
		t.Errorf("ContainerStatus details = %v, want [42s]", d)
	}

	// ImageService is forwarded as a whole.
	imgs, err := e.images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(imgs.Images) != 1 || imgs.Images[0].Id != "sha256:1" {
		t.Errorf("ListImages = %v, %v", imgs, err)
	}

	// A method the runtime does not have: the runtime's Unimplemented,
	// not the shim's.
	err = e.conn.Invoke(ctx, "/runtime.v1.ImageService/NoSuchMethod", &runtimeapi.VersionRequest{}, &runtimeapi.VersionResponse{})
	if st := status.Convert(err); st.Code() != codes.Unimplemented || st.Message() != "fake runtime: unknown method /runtime.v1.ImageService/NoSuchMethod" {
		t.Errorf("unknown method error = %v, want the runtime's Unimplemented", err)
	}

	// An expired deadline is the caller's DeadlineExceeded.
	short, cancelShort := context.WithTimeout(ctx, time.Nanosecond)
	defer cancelShort()
	<-short.Done()
	if _, err := e.runtime.Version(short, &runtimeapi.VersionRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Version after deadline = %v, want DeadlineExceeded", err)
	}
}

func TestPassThroughBytes(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Unknown fields (a newer kubelet's) reach the runtime: a raw message
	// with field 1000 set is echoed back byte for byte.
	msg := rawBytes(append(protowire(1000, "from-a-newer-kubelet"), protowire(1, "v")...))
	var out rawBytes
	var trailer metadata.MD
	err := e.conn.Invoke(ctx, futureMethod, &msg, &out, grpc.ForceCodec(rawCodec{}), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	if want := "echo:" + string(msg); string(out) != want {
		t.Errorf("FutureMethod = %q, want %q", out, want)
	}
	if got := trailer.Get("x-echo"); len(got) != 1 || got[0] != "done" {
		t.Errorf("trailer = %v", trailer)
	}

	// A client-streaming unknown method: several requests, several replies.
	stream, err := e.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, futureMethod, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b", "c"} {
		m := rawBytes(s)
		if err := stream.SendMsg(&m); err != nil {
			t.Fatal(err)
		}
		var r rawBytes
		if err := stream.RecvMsg(&r); err != nil || string(r) != "echo:"+s {
			t.Fatalf("RecvMsg = %q, %v; want echo:%s", r, err, s)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var r rawBytes
	if err := stream.RecvMsg(&r); !errors.Is(err, io.EOF) {
		t.Errorf("RecvMsg after CloseSend = %v, want EOF", err)
	}
}

// protowire encodes a length-delimited field.
func protowire(field int, s string) []byte {
	b := []byte{}
	tag := uint64(field<<3 | 2)
	for tag >= 0x80 {
		b = append(b, byte(tag)|0x80)
		tag >>= 7
	}
	b = append(b, byte(tag), byte(len(s)))
	return append(b, s...)
}

func TestGetContainerEvents(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := e.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if want := "c" + string(rune('0'+i)); ev.ContainerId != want {
			t.Errorf("event %d = %q, want %q", i, ev.ContainerId, want)
		}
	}
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("Recv after cancel = %v, want Canceled", err)
	}
}

func TestListContainersLarge(t *testing.T) {
	e := newEnv(t, nil)
	e.rt.containers = 5000 // several MB: over gRPC's default 4 MiB
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	viaShim, err := e.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{}, grpc.MaxCallRecvMsgSize(MaxMsgSize))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := e.direct.ListContainers(ctx, &runtimeapi.ListContainersRequest{}, grpc.MaxCallRecvMsgSize(MaxMsgSize))
	if err != nil {
		t.Fatal(err)
	}
	if len(viaShim.Containers) != 5000 || proto.Size(viaShim) != proto.Size(direct) {
		t.Errorf("ListContainers via the shim: %d containers, %d bytes; direct %d bytes", len(viaShim.Containers), proto.Size(viaShim), proto.Size(direct))
	}
}

// TestRuntimeRestart stops the runtime: calls fail with Unavailable at
// once, and succeed again once it is back on the same socket.
func TestRuntimeRestart(t *testing.T) {
	e := newEnv(t, nil, WithMaxBackoff(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.runtime.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	e.rtStop()
	for i := range 5 {
		begin := time.Now()
		_, err := e.runtime.Version(ctx, &runtimeapi.VersionRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d with the runtime down = %v, want Unavailable", i, err)
		}
		if d := time.Since(begin); d > 2*time.Second {
			t.Fatalf("call %d with the runtime down took %v", i, d)
		}
		_, err = e.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("web", "default", "uid-1", false, nil)})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("RunPodSandbox with the runtime down = %v, want Unavailable", err)
		}
	}
	startRuntime(t, e.rt, e.rtPath)
	testkit.WaitFor(t, 10*time.Second, func() error {
		if _, err := e.runtime.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
			return fmt.Errorf("runtime back, still failing: %w", err)
		}
		return nil
	})
}

// TestMaxConnsEvictsIdle: at the maximum, a new connection is served and
// the connection idle the longest is sent GOAWAY and closed (critest opens
// a client per spec and leaves the old ones idle: issue 26).
func TestMaxConnsEvictsIdle(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, nil, WithMaxConns(2), WithRegistry(reg))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The oldest: an HTTP/2 client that never makes a call.
	oldest, fr := rawClient(t, e.path)
	// The second: e.conn, idle after one call.
	if _, err := e.runtime.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	// A third client past the maximum is served.
	third := runtimeapi.NewRuntimeServiceClient(dial(t, e.path))
	if _, err := third.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("a new client past the maximum, with the others idle: %v", err)
	}
	// The oldest got GOAWAY (no error, no stream processed), then EOF.
	if err := oldest.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var goAway *http2.GoAwayFrame
	for goAway == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the longest idle connection: %v before GOAWAY", err)
		}
		goAway, _ = f.(*http2.GoAwayFrame)
	}
	if goAway.ErrCode != http2.ErrCodeNo || goAway.LastStreamID != 0 {
		t.Errorf("GOAWAY code %v, last stream %d; want NO_ERROR, 0", goAway.ErrCode, goAway.LastStreamID)
	}
	if f, err := fr.ReadFrame(); err == nil {
		t.Errorf("the evicted connection after GOAWAY: read %v, want it closed", f)
	}
	// The second connection was not the longest idle: it still works.
	if _, err := e.runtime.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Errorf("the other idle client: %v", err)
	}
	if n := testkit.Value(t, reg, "dnsconfigurer_cri_connections_evicted_total"); n != 1 {
		t.Errorf("connections_evicted_total = %v, want 1", n)
	}
	if n := testkit.Value(t, reg, "dnsconfigurer_cri_connections_refused_total"); n != 0 {
		t.Errorf("connections_refused_total = %v, want 0", n)
	}
}

// TestMaxConnsAllBusy: at the maximum with a call in flight on every
// connection, a new connection is closed at once and counted; the call in
// flight carries on.
func TestMaxConnsAllBusy(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, nil, WithMaxConns(1), WithRegistry(reg))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// e.conn is the one connection, busy with an events stream.
	stream, err := e.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	extra, err := net.Dial("unix", e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := extra.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection beyond the limit, every one busy: read %d bytes, %v; want EOF", n, err)
	}
	if n := testkit.Value(t, reg, "dnsconfigurer_cri_connections_refused_total"); n != 1 {
		t.Errorf("connections_refused_total = %v, want 1", n)
	}
	if n := testkit.Value(t, reg, "dnsconfigurer_cri_connections_evicted_total"); n != 0 {
		t.Errorf("connections_evicted_total = %v, want 0", n)
	}
	for range 2 {
		if _, err := stream.Recv(); err != nil {
			t.Errorf("the stream in flight after a refusal: %v", err)
		}
	}
}

// rawClient opens an HTTP/2 connection to the shim and waits for the
// server's SETTINGS: the connection is relayed.
func rawClient(t *testing.T, path string) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("raw client: %v", err)
	}
	if _, ok := f.(*http2.SettingsFrame); !ok {
		t.Fatalf("raw client: first frame %v, want SETTINGS", f)
	}
	return c, fr
}
