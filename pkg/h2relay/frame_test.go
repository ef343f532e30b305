package h2relay

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"golang.org/x/net/http2"
)

// chunks is a reader that returns its chunks one per Read, as a socket
// returns what has arrived so far.
type chunks struct{ c [][]byte }

func (r *chunks) Read(p []byte) (int, error) {
	if len(r.c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.c[0])
	if r.c[0] = r.c[0][n:]; len(r.c[0]) == 0 {
		r.c = r.c[1:]
	}
	return n, nil
}

// rawFrame is one frame as x/net's Framer writes it.
func rawFrame(t testing.TB, write func(*http2.Framer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(http2.NewFramer(&b, nil)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataFrame(t testing.TB, id uint32, payload []byte) []byte {
	return rawFrame(t, func(f *http2.Framer) error { return f.WriteData(id, false, payload) })
}

// header is a frame header with any length, type and flags, valid or not.
func header(n int, typ http2.FrameType, flags http2.Flags, id uint32) []byte {
	return []byte{byte(n >> 16), byte(n >> 8), byte(n), byte(typ), byte(flags), byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
}

// TestFrameReader reads frames split across reads, several in one read,
// and one larger than the reader's buffer; ready says whether the next
// frame can be read without waiting for more input.
func TestFrameReader(t *testing.T) {
	small := dataFrame(t, 1, bytes.Repeat([]byte{'a'}, 10))
	ping := rawFrame(t, func(f *http2.Framer) error { return f.WritePing(false, [8]byte{}) })
	large := dataFrame(t, 3, bytes.Repeat([]byte{'b'}, 300))
	split := dataFrame(t, 5, bytes.Repeat([]byte{'c'}, 40))
	in := &chunks{c: [][]byte{
		append(append([]byte{}, small...), ping...), // two whole frames
		split[:4], split[4:20], split[20:], // one frame over three reads
		large[:100], large[100:], // larger than the 64-byte buffer
		small[:5], // then a truncated frame
	}}
	fr := &frameReader{r: bufio.NewReaderSize(in, 64)}
	if fr.ready() {
		t.Fatal("ready before anything was read")
	}
	for i, want := range []struct {
		raw   []byte
		ready bool // after this frame
	}{{small, true}, {ping, false}, {split, false}, {large, false}} {
		f, err := fr.next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(f.raw, want.raw) {
			t.Fatalf("frame %d = %x, want %x", i, f.raw, want.raw)
		}
		if f.typ != http2.FrameType(want.raw[3]) || f.id != uint32(want.raw[8]) {
			t.Errorf("frame %d: type %v id %d, want %d %d", i, f.typ, f.id, want.raw[3], want.raw[8])
		}
		if got := fr.ready(); got != want.ready {
			t.Errorf("ready after frame %d = %v, want %v", i, got, want.ready)
		}
	}
	if _, err := fr.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: err = %v, want %v", err, io.ErrUnexpectedEOF)
	}
	fr = &frameReader{r: bufio.NewReader(bytes.NewReader(small))}
	if _, err := fr.next(); err != nil {
		t.Fatal(err)
	}
	if _, err := fr.next(); err != io.EOF {
		t.Fatalf("clean end: err = %v, want io.EOF", err)
	}
}

// TestFrameReaderAnnouncedLength: a frame header announcing 16 MiB
// followed by a few bytes costs what arrived, not what was announced.
func TestFrameReaderAnnouncedLength(t *testing.T) {
	in := append(header(maxFrameLen, http2.FrameData, 0, 1), make([]byte, 100<<10)...)
	fr := &frameReader{r: bufio.NewReaderSize(bytes.NewReader(in), 64)}
	if _, err := fr.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want %v", err, io.ErrUnexpectedEOF)
	}
	if c := cap(fr.buf); c > 4*len(in) {
		t.Errorf("buffer of %d bytes for %d bytes of input", c, len(in))
	}
}

// FuzzFrameReader reads arbitrary bytes as frames. It must not panic;
// the frames it returns are the input, in order, byte for byte; its
// buffer grows with the input, not with announced lengths; and the
// parsers the relay applies to a frame return errors, not panics.
//
//	go test -run '^$' -fuzz FuzzFrameReader -fuzztime 60s ./pkg/h2relay/
func FuzzFrameReader(f *testing.F) {
	data := dataFrame(f, 1, []byte("hello"))
	headers := rawFrame(f, func(fw *http2.Framer) error {
		return fw.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: trailersOnly(14, "down"), EndStream: true, EndHeaders: true})
	})
	split := rawFrame(f, func(fw *http2.Framer) error {
		if err := fw.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x88}, PadLength: 3,
			Priority: http2.PriorityParam{StreamDep: 1, Weight: 7}}); err != nil {
			return err
		}
		return fw.WriteContinuation(3, true, []byte{0x82})
	})
	padded := rawFrame(f, func(fw *http2.Framer) error { return fw.WriteDataPadded(5, true, []byte("x"), make([]byte, 4)) })
	set := rawFrame(f, func(fw *http2.Framer) error {
		return fw.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	})
	wu := rawFrame(f, func(fw *http2.Framer) error { return fw.WriteWindowUpdate(0, 1000) })
	for _, seed := range [][]byte{
		nil,
		data,
		append(append(append([]byte{}, headers...), split...), padded...),
		append(set, wu...),
		data[:7],  // truncated header
		data[:12], // truncated payload
		header(maxFrameLen, http2.FrameData, 0, 1), // oversize length, nothing after it
		append(header(1<<20, http2.FrameHeaders, 0, 1), make([]byte, 70000)...),
		append(header(2, http2.FrameHeaders, http2.FlagHeadersPadded, 1), 9, 0),          // bad padding
		append(header(0, http2.FrameHeaders, 0, 1), header(0, http2.FrameData, 0, 1)...), // interrupted header block
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := &frameReader{r: bufio.NewReaderSize(bytes.NewReader(in), 64)}
		off := 0
		for range len(in) + 1 {
			fr.ready()
			fr0, err := fr.next()
			if err != nil {
				// A first step of 32 KiB (rounded up to a size class),
				// then doubling with what arrived.
				if c := cap(fr.buf); c > 2*len(in)+2*readBuffer {
					t.Fatalf("buffer of %d bytes for %d bytes of input", c, len(in))
				}
				return
			}
			if !bytes.Equal(fr0.raw, in[off:off+len(fr0.raw)]) {
				t.Fatalf("frame at %d is not the input's bytes", off)
			}
			off += len(fr0.raw)
			switch fr0.typ {
			case http2.FrameHeaders:
				start := off - len(fr0.raw)
				raw, block, err := fr.headerBlock(fr0, 1<<10, 8)
				if err != nil {
					return // the relay closes the connection
				}
				if len(raw) > 1<<10 || len(raw) > len(in)-start || !bytes.Equal(raw, in[start:start+len(raw)]) || len(block) > len(raw) {
					t.Fatalf("header block at %d is not the input's bytes", start)
				}
				off = start + len(raw)
			case http2.FrameData:
				_, _ = dataPayload(fr0)
			case http2.FrameSettings:
				settings(fr0, func(http2.Setting) {})
			case http2.FrameWindowUpdate:
				_, _ = windowIncrement(fr0)
			}
		}
		t.Fatal("more frames than input bytes")
	})
}
