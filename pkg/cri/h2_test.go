package cri

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
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

func frame(typ uint8, id uint32, payload []byte) []byte {
	return append(appendFrameHeader(nil, len(payload), typ, 0, id), payload...)
}

// TestFrameReader reads frames split across reads, several in one read,
// and one larger than the reader's buffer; ready says whether the next
// frame can be read without waiting for more input.
func TestFrameReader(t *testing.T) {
	small := frame(frameData, 1, bytes.Repeat([]byte{'a'}, 10))
	ping := frame(framePing, 0, make([]byte, 8))
	large := frame(frameData, 3, bytes.Repeat([]byte{'b'}, 300))
	split := frame(frameData, 5, bytes.Repeat([]byte{'c'}, 40))
	in := &chunks{c: [][]byte{
		append(append([]byte{}, small...), ping...), // two whole frames
		split[:4], split[4:20], split[20:], // one frame over three reads
		large,     // larger than the 64-byte buffer
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
		if f.typ != want.raw[3] || f.id != uint32(want.raw[8]) {
			t.Errorf("frame %d: type %d id %d, want %d %d", i, f.typ, f.id, want.raw[3], want.raw[8])
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
