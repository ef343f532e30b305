package pack

import (
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/internal/unsafeptr"
)

// A store of 100k Services held a million objects: a node per name, each
// record's name and lists. The collector marks them at every cycle, and
// while it marks, a DNS server of one CPU answers late. Nodes and Strings
// carve the long-lived ones from shared chunks: the objects a build makes
// together lie together.
//
// A chunk lives while anything cut from it does. So an arena serves only
// a bulk of objects made together, and is dropped after: a chunk then
// holds at most what that bulk made, however the objects cut from it come
// and go afterwards.

// byteChunk is the largest chunk of Strings, nodeChunk of Nodes (in
// words: 512 KiB). A bulk's first chunk is a 32nd of that, and each next
// one twice the last: a small cluster's rebuild takes little, a large
// one's few chunks. Large chunks mark faster: at 100k Services a
// collection of the store took 52 ms with chunks of 16 and 32 KiB, 36 ms
// with 256 and 512 (store's BenchmarkHeap gc-ms).
const (
	byteChunk = 256 << 10
	nodeChunk = 128 << 10
)

// cut returns an empty slice with room for n items, cut from the end of
// *chunk, or from a new chunk when *chunk has no room left: twice the
// last one, at least size/32 items and at most size. Its capacity is n:
// an append past n moves it off the chunk. A list of more than an eighth
// of size is allocated alone.
func cut[T any](chunk *[]T, n, size int) []T {
	if n > size/8 {
		return make([]T, 0, n)
	}
	c := *chunk
	if cap(c)-len(c) < n {
		c = make([]T, 0, min(size, max(2*cap(c), size/32, n)))
	}
	*chunk = c[:len(c)+n]
	return c[len(c) : len(c) : len(c)+n]
}

// Nodes is an arena of packed nodes: the stable ones (those that change
// only with a Service object) in chunks apart from the others, so that
// endpoints coming and going do not keep a Service's chunk alive.
type Nodes struct {
	stable []uint32
	other  []uint32
}

// Pack packs d into the chunk of its kind.
func (a *Nodes) Pack(d *Draft) *Node {
	chunk := &a.other
	if d.Stable {
		chunk = &a.stable
	}
	n := d.words()
	return d.packInto(cut(chunk, n, nodeChunk)[:n])
}

// Chunks is the arena's current chunks, stable and other, for tests.
func (a *Nodes) Chunks() (stable, other []uint32) { return a.stable, a.other }

// Strings is an arena of strings: names and packed records. A nil
// *Strings allocates each string alone.
type Strings struct {
	buf []byte
}

// Len is the bytes of the arena's current chunk in use.
func (a *Strings) Len() int { return len(a.buf) }

// Copy is a copy of s cut from the arena.
func (a *Strings) Copy(s string) string {
	if a == nil {
		return strings.Clone(s)
	}
	return a.Concat(s)
}

// CopyBytes is a string of b's bytes cut from the arena.
func (a *Strings) CopyBytes(b []byte) string {
	switch {
	case len(b) == 0:
		return ""
	case a == nil:
		return string(b)
	}
	return freeze(append(cut(&a.buf, len(b), byteChunk), b...))
}

// Concat is the concatenation of parts, cut from the arena.
func (a *Strings) Concat(parts ...string) string {
	if a == nil {
		return strings.Join(parts, "")
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return ""
	}
	buf := cut(&a.buf, n, byteChunk)
	for _, p := range parts {
		buf = append(buf, p...)
	}
	return freeze(buf)
}

// freeze is b as a string. The arena never writes b again: the bytes
// the string shares never change.
func freeze(b []byte) string { return unsafeptr.String(b) }

// Borrow is b as a string for a lookup: the caller must neither keep the
// string nor change b while it uses it.
func Borrow(b []byte) string { return unsafeptr.String(b) }
