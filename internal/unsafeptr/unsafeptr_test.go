package unsafeptr

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestString(t *testing.T) {
	for _, b := range [][]byte{nil, {}, []byte("a"), []byte("svc.ns.svc.cluster.local")} {
		if got := String(b); got != string(b) {
			t.Errorf("String(%q) = %q", b, got)
		}
	}
}

func TestWords(t *testing.T) {
	for _, w := range [][]uint32{nil, {0x04030201}, {0x04030201, 0x08070605}} {
		var want []byte
		for _, x := range w {
			want = binary.NativeEndian.AppendUint32(want, x)
		}
		if got := Words(w); !bytes.Equal(got, want) || len(got) != 4*len(w) {
			t.Errorf("Words(%#x) = %v, want %v", w, got, want)
		}
	}
	w := []uint32{0, 0}
	Words(w)[4] = 0xff
	if w[1] == 0 || binary.NativeEndian.Uint32(Words(w)[4:]) != w[1] {
		t.Errorf("a write through Words does not reach the word: %#x", w)
	}
}

type header struct{ a, b, c, d uint32 }

func TestView(t *testing.T) {
	w := [4]uint32{1, 2, 3, 4}
	h := View[header](&w)
	if *h != (header{1, 2, 3, 4}) {
		t.Errorf("View = %+v", *h)
	}
	h.c = 9
	if w[2] != 9 {
		t.Errorf("a write through View does not reach the array: %v", w)
	}
	for name, f := range map[string]func(){
		"larger":   func() { View[[5]uint32](&w) },
		"smaller":  func() { View[[3]uint32](&w) },
		"stricter": func() { View[uint64](&[2]uint32{}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("View did not panic")
				}
			}()
			f()
		})
	}
}

func TestTail(t *testing.T) {
	w := make([]uint32, 6)
	h := View[header]((*[4]uint32)(w))
	if got := Tail(h, 0); got != nil {
		t.Errorf("Tail(h, 0) = %v", got)
	}
	tail := Tail(h, 8)
	copy(tail, "abcdefgh")
	if !bytes.Equal(Words(w)[16:], []byte("abcdefgh")) {
		t.Errorf("Tail is not the bytes after the header: %q", Words(w))
	}
}
