package unsafeptr

import "unsafe"

// String is b's bytes as a string, without a copy. The caller must not
// change b while the string is in use.
func String(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Words is w's memory as bytes, 4 a word. *uint32 to *byte is pattern
// (1), and the bytes stay within w's allocation.
func Words(w []uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 4*len(w))
}

// View is p read as a *To. To must have From's size, an alignment no
// stricter than From's and the same layout of pointers (pattern 1); View
// panics when the size or alignment differs.
func View[To, From any](p *From) *To {
	var t To
	if unsafe.Sizeof(t) != unsafe.Sizeof(*p) || unsafe.Alignof(t) > unsafe.Alignof(*p) {
		panic("unsafeptr: View between types of different size or alignment")
	}
	return (*To)(unsafe.Pointer(p))
}

// Tail is the n bytes that follow *p. The caller must have allocated them
// in one object with *p (pattern 3), and they must hold no pointer.
func Tail[T any](p *T, n int) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(*p))), n)
}
