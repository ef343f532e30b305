package h2relay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"golang.org/x/net/http2"
)

const (
	// frameHeaderLen is the size of an HTTP/2 frame header (RFC 9113 4.1).
	frameHeaderLen = 9
	// maxFrameLen is the largest frame payload the relay reads: HTTP/2's
	// own limit (2^24-1), which covers any SETTINGS_MAX_FRAME_SIZE.
	maxFrameLen = 1<<24 - 1
	// readBuffer is the size of a relay direction's read buffer: a whole
	// default-size frame fits (and is relayed without a copy), and a long
	// response is read in pieces, so that its first frames go on while
	// the rest is still being read.
	readBuffer = 32 << 10
)

// frame is one frame as read: raw holds the 9-byte header and the
// payload, exactly the bytes to write on.
type frame struct {
	typ   http2.FrameType
	flags http2.Flags
	id    uint32
	raw   []byte
}

func (f frame) payload() []byte { return f.raw[frameHeaderLen:] }

// frameReader reads frames without parsing them. A frame that fits in the
// reader's buffer is returned in place (no copy), a larger one in a buffer
// the frameReader reuses: either way a frame is valid until the next call.
// http2.Framer is not used for reading because it copies every frame and
// rebuilds none: the relay writes the bytes it read.
type frameReader struct {
	r       *bufio.Reader
	buf     []byte
	pending int // bytes of the last frame still in r, skipped on the next call
	// limit, when set, is the longest frame payload accepted: a longer
	// frame is a FRAME_SIZE_ERROR, read no further.
	limit *atomic.Uint32
}

func (fr *frameReader) next() (frame, error) {
	if fr.pending > 0 {
		if _, err := fr.r.Discard(fr.pending); err != nil {
			return frame{}, err
		}
		fr.pending = 0
	}
	hdr, err := fr.r.Peek(frameHeaderLen)
	if err != nil {
		return frame{}, truncated(err, len(hdr))
	}
	n := frameLen(hdr)
	if fr.limit != nil && n > int(fr.limit.Load()) {
		return frame{}, clientError(http2.ErrCodeFrameSize, fmt.Errorf("frame of %d bytes (type %v, stream %d) over %d bytes",
			n, http2.FrameType(hdr[3]), binary.BigEndian.Uint32(hdr[5:9])&0x7fffffff, fr.limit.Load()))
	}
	raw, err := fr.r.Peek(frameHeaderLen + n)
	switch {
	case err == nil:
		fr.pending = len(raw)
	case errors.Is(err, bufio.ErrBufferFull):
		if raw, err = fr.readLarge(frameHeaderLen + n); err != nil {
			return frame{}, err
		}
	default:
		return frame{}, truncated(err, len(raw))
	}
	return frame{typ: http2.FrameType(raw[3]), flags: http2.Flags(raw[4]), id: binary.BigEndian.Uint32(raw[5:9]) & 0x7fffffff, raw: raw}, nil
}

// readLarge reads a frame of n bytes that does not fit the read buffer
// into fr.buf, which grows with what arrives rather than with what the
// frame header announces: a peer that announces 16 MiB and sends less
// does not get 16 MiB allocated.
func (fr *frameReader) readLarge(n int) ([]byte, error) {
	raw := fr.buf[:0]
	for len(raw) < n {
		if len(raw) == cap(raw) {
			raw = slices.Grow(raw, min(n-len(raw), max(cap(raw), readBuffer)))
		}
		m, err := fr.r.Read(raw[len(raw):min(n, cap(raw))])
		raw = raw[:len(raw)+m]
		if err != nil {
			fr.buf = raw[:0]
			return nil, truncated(err, len(raw)) // the header was buffered: len(raw) > 0
		}
	}
	fr.buf = raw[:0]
	return raw, nil
}

// frameLen is the payload length in frame header h (at most maxFrameLen:
// the field has 24 bits).
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
// between them) and the header block. The frames as sent, headers and
// padding included, may be at most maxBytes, and at most maxFrames
// CONTINUATION frames may follow f: both are checked as each frame
// arrives, so a peer cannot make the relay buffer more.
func (fr *frameReader) headerBlock(f frame, maxBytes, maxFrames int) (raw, block []byte, err error) {
	frag, err := headersFragment(f)
	if err != nil {
		return nil, nil, err
	}
	if len(f.raw) > maxBytes {
		return nil, nil, clientError(http2.ErrCodeEnhanceYourCalm, fmt.Errorf("header block of stream %d over %d bytes", f.id, maxBytes))
	}
	if f.flags.Has(http2.FlagHeadersEndHeaders) {
		return f.raw, frag, nil
	}
	raw = append([]byte(nil), f.raw...)
	for n := 1; ; n++ {
		c, err := fr.next()
		if err != nil {
			return nil, nil, err
		}
		if c.typ != http2.FrameContinuation || c.id != f.id {
			return nil, nil, clientError(http2.ErrCodeProtocol, fmt.Errorf("frame type %v on stream %d inside the header block of stream %d", c.typ, c.id, f.id))
		}
		if n > maxFrames {
			return nil, nil, clientError(http2.ErrCodeEnhanceYourCalm, fmt.Errorf("header block of stream %d over %d CONTINUATION frames", f.id, maxFrames))
		}
		if len(raw)+len(c.raw) > maxBytes {
			return nil, nil, clientError(http2.ErrCodeEnhanceYourCalm, fmt.Errorf("header block of stream %d over %d bytes", f.id, maxBytes))
		}
		raw = append(raw, c.raw...)
		if c.flags.Has(http2.FlagContinuationEndHeaders) {
			break
		}
	}
	// The block: the HEADERS fragment, then each CONTINUATION's payload.
	block = make([]byte, 0, len(raw))
	block = append(block, frag...)
	for p := raw[len(f.raw):]; len(p) > 0; {
		n := frameHeaderLen + frameLen(p)
		block = append(block, p[frameHeaderLen:n]...)
		p = p[n:]
	}
	return raw, block, nil
}

// headersFragment strips a HEADERS frame's padding and priority fields.
func headersFragment(f frame) ([]byte, error) {
	p, err := unpad(f, http2.FlagHeadersPadded, "HEADERS")
	if err != nil {
		return nil, err
	}
	if f.flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return nil, clientError(http2.ErrCodeProtocol, fmt.Errorf("HEADERS on stream %d: short priority field", f.id))
		}
		p = p[5:]
	}
	return p, nil
}

// dataPayload strips a DATA frame's padding.
func dataPayload(f frame) ([]byte, error) {
	return unpad(f, http2.FlagDataPadded, "DATA")
}

// unpad returns the payload of frame f of type typ without its padding,
// present when f has the padded flag.
func unpad(f frame, padded http2.Flags, typ string) ([]byte, error) {
	p := f.payload()
	if f.flags.Has(padded) {
		if len(p) < 1 || int(p[0]) > len(p)-1 {
			return nil, clientError(http2.ErrCodeProtocol, fmt.Errorf("%s on stream %d: bad padding", typ, f.id))
		}
		p = p[1 : len(p)-int(p[0])]
	}
	return p, nil
}

// settings calls fn for each parameter of a SETTINGS frame.
func settings(f frame, fn func(http2.Setting)) {
	p := f.payload()
	for len(p) >= 6 {
		fn(http2.Setting{ID: http2.SettingID(binary.BigEndian.Uint16(p)), Val: binary.BigEndian.Uint32(p[2:])})
		p = p[6:]
	}
}

// windowIncrement is a WINDOW_UPDATE frame's increment; ok is false for a
// malformed frame, which is relayed as it is.
func windowIncrement(f frame) (inc int64, ok bool) {
	if len(f.payload()) != 4 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint32(f.payload()) & 0x7fffffff), true
}
