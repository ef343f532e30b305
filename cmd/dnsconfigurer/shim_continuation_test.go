package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
