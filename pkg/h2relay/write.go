package h2relay

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// sendFrameLen bounds the DATA frames the relay writes itself: every peer
// accepts 16 KiB (the protocol's minimum SETTINGS_MAX_FRAME_SIZE).
const sendFrameLen = 16 << 10

// connWriter serialises whole writes of frames onto one connection: the
// frames relayed as read, and the frames the relay writes itself with an
// http2.Framer, which must not be used concurrently.
type connWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
	fr *http2.Framer
}

func newConnWriter(w io.Writer) *connWriter {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &connWriter{w: bw, fr: http2.NewFramer(bw, nil)}
}

// write writes b, and flushes when flush is set: the relay direction
// feeding this writer is about to wait for input (its next frame is not
// complete yet), so nothing more goes out until more comes in.
func (c *connWriter) write(flush bool, b ...[]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range b {
		if _, err := c.w.Write(p); err != nil {
			return err
		}
	}
	if flush {
		return c.w.Flush()
	}
	return nil
}

// frames writes frames with the Framer, and flushes as write does.
func (c *connWriter) frames(flush bool, fn func(*http2.Framer) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := fn(c.fr); err != nil {
		return err
	}
	if flush {
		return c.w.Flush()
	}
	return nil
}

// maxStatusMessage bounds the grpc-message of a rejection.
const maxStatusMessage = 2048

// trailersOnly is the header block of a gRPC "trailers only" response with
// status code and msg. Every field but ":status: 200" (an exact static
// table entry) is Sensitive, so the encoder writes literals "never
// indexed": the block leaves the peer's dynamic table, which the
// upstream's encoder drives, untouched.
func trailersOnly(code uint32, msg string) []byte {
	if len(msg) > maxStatusMessage {
		msg = msg[:maxStatusMessage]
	}
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range []hpack.HeaderField{
		{Name: ":status", Value: "200"},
		{Name: "content-type", Value: "application/grpc", Sensitive: true},
		{Name: "grpc-status", Value: strconv.FormatUint(uint64(code), 10), Sensitive: true},
		{Name: "grpc-message", Value: grpcMessageEncode(msg), Sensitive: true},
	} {
		_ = enc.WriteField(f) // writes to a bytes.Buffer do not fail
	}
	return b.Bytes()
}

// grpcMessageEncode percent-encodes a grpc-message value as the gRPC
// HTTP/2 protocol asks: bytes outside printable ASCII, and '%'.
func grpcMessageEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
