package cri

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
)

// The HTTP/2 (RFC 9113) frames and flags the relay looks at. Every other
// frame type passes through without being looked at.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingHeaderTableSize   = 0x1
	settingInitialWindowSize = 0x4

	errCodeNo     = 0x0
	errCodeCancel = 0x8

	frameHeaderLen = 9
	// maxFrameLen is the largest frame payload the relay reads: HTTP/2's
	// own limit (2^24-1), which covers any SETTINGS_MAX_FRAME_SIZE.
	maxFrameLen = 1<<24 - 1
	// sendFrameLen bounds the frames the shim writes itself: every peer
	// accepts 16 KiB (the protocol's minimum SETTINGS_MAX_FRAME_SIZE).
	sendFrameLen = 16 << 10
	// defaultWindow is the initial flow-control window (RFC 9113 6.9.2).
	defaultWindow = 65535
	// defaultHeaderTable is the initial HPACK dynamic table size.
	defaultHeaderTable = 4096
)

// clientPreface opens every HTTP/2 connection (RFC 9113 3.4).
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// h2frame is one frame as read: raw holds the 9-byte header and the
// payload, exactly the bytes to write on.
type h2frame struct {
	typ, flags uint8
	id         uint32
	raw        []byte
}

func (f h2frame) payload() []byte { return f.raw[frameHeaderLen:] }

// frameReader reads frames. A frame that fits in the reader's buffer is
// returned in place (no copy), a larger one in a buffer the frameReader
// reuses: either way a frame is valid until the next call.
type frameReader struct {
	r       *bufio.Reader
	buf     []byte
	pending int // bytes of the last frame still in r, skipped on the next call
}

func (fr *frameReader) next() (h2frame, error) {
	if fr.pending > 0 {
		if _, err := fr.r.Discard(fr.pending); err != nil {
			return h2frame{}, err
		}
		fr.pending = 0
	}
	hdr, err := fr.r.Peek(frameHeaderLen)
	if err != nil {
		return h2frame{}, truncated(err, len(hdr))
	}
	n := frameLen(hdr)
	if n > maxFrameLen {
		return h2frame{}, fmt.Errorf("frame of %d bytes", n)
	}
	raw, err := fr.r.Peek(frameHeaderLen + n)
	switch {
	case err == nil:
		fr.pending = len(raw)
	case errors.Is(err, bufio.ErrBufferFull):
		if cap(fr.buf) < frameHeaderLen+n {
			fr.buf = make([]byte, frameHeaderLen+n)
		}
		raw = fr.buf[:frameHeaderLen+n]
		if _, err := io.ReadFull(fr.r, raw); err != nil {
			return h2frame{}, err // the header is buffered: a short read is io.ErrUnexpectedEOF
		}
	default:
		return h2frame{}, truncated(err, len(raw))
	}
	return h2frame{typ: raw[3], flags: raw[4], id: binary.BigEndian.Uint32(raw[5:9]) & 0x7fffffff, raw: raw}, nil
}

// frameLen is the payload length in frame header h.
func frameLen(h []byte) int { return int(h[0])<<16 | int(h[1])<<8 | int(h[2]) }

// truncated turns EOF after part of a frame (got > 0 bytes) into
// io.ErrUnexpectedEOF.
func truncated(err error, got int) error {
	if got > 0 && errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ready reports whether the next whole frame is already buffered, so that
// reading it cannot block. When it is not, whatever was relayed so far
// should be flushed first: a frame split across reads must not hold back
// the frames before it.
func (fr *frameReader) ready() bool {
	n := fr.r.Buffered() - fr.pending // the frame returned last is still in r
	if n < frameHeaderLen {
		return false
	}
	b, err := fr.r.Peek(fr.pending + frameHeaderLen) // buffered: does not read
	if err != nil {
		return false
	}
	return n >= frameHeaderLen+frameLen(b[fr.pending:])
}

// headerBlock reads the CONTINUATION frames that complete HEADERS frame f
// and returns every frame's bytes (to write on together: nothing may come
// between them) and the header block.
func (fr *frameReader) headerBlock(f h2frame) (raw, block []byte, err error) {
	frag, err := headersFragment(f)
	if err != nil {
		return nil, nil, err
	}
	if f.flags&flagEndHeaders != 0 {
		return f.raw, frag, nil
	}
	raw = append([]byte(nil), f.raw...)
	block = append([]byte(nil), frag...)
	for {
		c, err := fr.next()
		if err != nil {
			return nil, nil, err
		}
		if c.typ != frameContinuation || c.id != f.id {
			return nil, nil, fmt.Errorf("frame type %d on stream %d inside the header block of stream %d", c.typ, c.id, f.id)
		}
		raw = append(raw, c.raw...)
		block = append(block, c.payload()...)
		if len(block) > MaxMsgSize {
			return nil, nil, errors.New("header block over 16 MiB")
		}
		if c.flags&flagEndHeaders != 0 {
			return raw, block, nil
		}
	}
}

// headersFragment strips a HEADERS frame's padding and priority fields.
func headersFragment(f h2frame) ([]byte, error) {
	p := f.payload()
	if f.flags&flagPadded != 0 {
		if len(p) < 1 || int(p[0]) > len(p)-1 {
			return nil, fmt.Errorf("HEADERS on stream %d: bad padding", f.id)
		}
		p = p[1 : len(p)-int(p[0])]
	}
	if f.flags&flagPriority != 0 {
		if len(p) < 5 {
			return nil, fmt.Errorf("HEADERS on stream %d: short priority field", f.id)
		}
		p = p[5:]
	}
	return p, nil
}

// dataPayload strips a DATA frame's padding.
func dataPayload(f h2frame) ([]byte, error) {
	p := f.payload()
	if f.flags&flagPadded != 0 {
		if len(p) < 1 || int(p[0]) > len(p)-1 {
			return nil, fmt.Errorf("DATA on stream %d: bad padding", f.id)
		}
		p = p[1 : len(p)-int(p[0])]
	}
	return p, nil
}

// settings calls fn for each parameter of a SETTINGS frame.
func settings(f h2frame, fn func(id uint16, v uint32)) {
	p := f.payload()
	for len(p) >= 6 {
		fn(binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:]))
		p = p[6:]
	}
}

func appendFrameHeader(b []byte, n int, typ, flags uint8, id uint32) []byte {
	return append(b, byte(n>>16), byte(n>>8), byte(n), typ, flags, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

func windowUpdate(b []byte, id uint32, inc uint32) []byte {
	b = appendFrameHeader(b, 4, frameWindowUpdate, 0, id)
	return binary.BigEndian.AppendUint32(b, inc)
}

func rstStream(id uint32, code uint32) []byte {
	b := appendFrameHeader(nil, 4, frameRSTStream, 0, id)
	return binary.BigEndian.AppendUint32(b, code)
}

func goAway(lastID uint32, code uint32) []byte {
	b := appendFrameHeader(nil, 8, frameGoAway, 0, 0)
	b = binary.BigEndian.AppendUint32(b, lastID)
	return binary.BigEndian.AppendUint32(b, code)
}

// trailersOnly is a gRPC "trailers only" response (one HEADERS frame that
// ends the stream) with status code and message. It is HPACK-encoded with
// the static table and literals that are not indexed, so it leaves the
// peer's dynamic table, which the runtime's encoder drives, untouched.
func trailersOnly(id uint32, code uint32, msg string) []byte {
	if len(msg) > 2048 {
		msg = msg[:2048]
	}
	block := []byte{0x88} // :status 200, static index 8
	block = appendLiteral(block, "content-type", "application/grpc")
	block = appendLiteral(block, "grpc-status", strconv.FormatUint(uint64(code), 10))
	block = appendLiteral(block, "grpc-message", grpcMessageEncode(msg))
	b := appendFrameHeader(nil, len(block), frameHeaders, flagEndStream|flagEndHeaders, id)
	return append(b, block...)
}

// appendLiteral appends a header field as a literal without indexing, with
// a literal name (RFC 7541 6.2.2).
func appendLiteral(b []byte, name, value string) []byte {
	b = append(b, 0x00)
	b = appendHpackInt(b, 7, 0, uint64(len(name)))
	b = append(b, name...)
	b = appendHpackInt(b, 7, 0, uint64(len(value)))
	return append(b, value...)
}

func appendHpackInt(b []byte, prefix uint8, first byte, v uint64) []byte {
	limit := uint64(1)<<prefix - 1
	if v < limit {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(limit))
	v -= limit
	for v >= 128 {
		b = append(b, byte(v%128)|0x80)
		v /= 128
	}
	return append(b, byte(v))
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

// grpcTimeout parses a grpc-timeout header ("100m", "5S").
func grpcTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	unit := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second, 'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}[v[len(v)-1]]
	if unit == 0 {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// readBuffer is the size of a relay direction's read buffer: a whole
// default-size frame fits (and is relayed without a copy), and a long
// response is read in pieces, so that its first frames go on while the
// rest is still being read.
const readBuffer = 32 << 10

// syncWriter serialises whole writes of frames onto one connection.
type syncWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func newSyncWriter(w io.Writer) *syncWriter {
	return &syncWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// write writes b, and flushes when flush is set: the relay direction
// feeding this writer is about to wait for input (its next frame is not
// complete yet), so nothing more goes out until more comes in.
func (s *syncWriter) write(flush bool, b ...[]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(flush, b...)
}

func (s *syncWriter) writeLocked(flush bool, b ...[]byte) error {
	for _, p := range b {
		if _, err := s.w.Write(p); err != nil {
			return err
		}
	}
	if flush {
		return s.w.Flush()
	}
	return nil
}

// headerDecoder is one direction's HPACK decoder. The table size it may be
// told to use is set by the other direction's SETTINGS (allowed; nil keeps
// the default).
type headerDecoder struct {
	dec     *hpack.Decoder
	allowed *atomic.Uint32
	table   uint32
}

func newHeaderDecoder(allowed *atomic.Uint32) *headerDecoder {
	return &headerDecoder{dec: hpack.NewDecoder(defaultHeaderTable, nil), allowed: allowed, table: defaultHeaderTable}
}

func (d *headerDecoder) decode(block []byte) ([]hpack.HeaderField, error) {
	if d.allowed != nil {
		if t := d.allowed.Load(); t != d.table {
			d.table = t
			d.dec.SetAllowedMaxDynamicTableSize(t)
		}
	}
	return d.dec.DecodeFull(block)
}
