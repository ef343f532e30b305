package store

import "unsafe"

// A store of 100k Services held a million objects: a node per name, each
// record's name and lists. The collector marks them at every cycle, and
// while it marks, a DNS server of one CPU answers late. The nodes and the
// Service records are packed without pointers now (node.go,
// svcrecord.go), and two arenas carve the long-lived ones from shared
// chunks, with the names the index keeps: the objects a build makes
// together lie together.
//
// A chunk lives while anything cut from it does. So an arena serves only
// a bulk of objects made together, and is dropped after: a chunk then
// holds at most what that bulk made, however the objects cut from it come
// and go afterwards. Changes after the bulk allocate their own. What
// changes only with a Service object (its record, the names of a
// ClusterIP or ExternalName Service but its endpoints') is kept apart
// from what endpoints make: endpoints come and go all day, and a chunk
// of both kinds would keep the dead endpoints' nodes as long as the
// Services live. Nor are the EndpointSlice and Pod records packed.

// byteChunk and nodeChunk are the largest chunks: bytes of names and
// records, bytes of packed nodes. A bulk's first chunk is a 32nd of that,
// and each next one twice the last: a small cluster's rebuild takes
// little, a large one's few chunks. Large chunks mark faster: at 100k
// Services a collection of the store took 52 ms with chunks of 16 and
// 32 KiB, 36 ms with 256 and 512 (BenchmarkHeap gc-ms).
const (
	byteChunk = 256 << 10
	nodeChunk = 512 << 10
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

// rebuildArena is what the builds of one rebuild share: the names they
// keep, their packed nodes (those of builder.stable apart), the drafts
// they make them from and the lists they drop. A rebuild is the bulk (the
// start-up's first Publish, a Replace, new options); its builds run one
// at a time.
type rebuildArena struct {
	buf     []byte
	stable  []byte
	other   []byte
	drafts  draftPool
	scratch buildScratch
}

// pack packs d into the chunk of its kind. A packed node's size is
// rounded up to 8 bytes, so that each starts aligned.
func (a *rebuildArena) pack(d *draft) *Node {
	chunk := &a.other
	if d.stable {
		chunk = &a.stable
	}
	n := (d.packedSize() + 7) &^ 7
	return d.packInto(cut(chunk, n, nodeChunk)[:n])
}

// recordArena is where the Services set while a full Publish is pending
// keep their names and packed records (svcrecord.go): the bulk is a
// start's first lists (or a Replace). Namespaces are not copied: the feed
// interns them.
type recordArena struct {
	buf []byte
}

// str is a copy of s cut from the arena.
func (a *recordArena) str(s string) string {
	if s == "" {
		return s
	}
	b := append(cut(&a.buf, len(s), byteChunk), s...)
	return unsafe.String(&b[0], len(b))
}

// service is v's name and record, cut from the arena.
func (a *recordArena) service(v *Service) (string, svcRecord) {
	var tmp [256]byte
	return a.str(v.Name), svcRecord(a.str(string(appendService(tmp[:0], v))))
}
