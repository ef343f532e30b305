package store

import (
	"net/netip"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/pack"
)

// The nodes and the Service records are packed without pointers (package
// pack, svcrecord.go), and two arenas carve the long-lived ones from
// shared chunks, with the names the index keeps: the objects a build
// makes together lie together.
//
// An arena serves only a bulk of objects made together, and is dropped
// after (pack.Nodes says why). Changes after the bulk allocate their own.
// What changes only with a Service object (its record, the names of a
// ClusterIP or ExternalName Service but its endpoints') is kept apart
// from what endpoints make: endpoints come and go all day, and a chunk
// of both kinds would keep the dead endpoints' nodes as long as the
// Services live. Nor are the EndpointSlice and Pod records packed.

// rebuildArena is what the builds of one rebuild share: the names they
// keep, their packed nodes (those of builder.stable apart), the drafts
// they make them from and the lists they drop. A rebuild is the bulk (the
// start-up's first Publish, a Replace, new options); its builds run one
// at a time.
type rebuildArena struct {
	names   pack.Strings
	nodes   pack.Nodes
	drafts  pack.DraftPool
	scratch buildScratch
}

// recordArena is where the Services set while a full Publish is pending
// keep their names and packed records (svcrecord.go): the bulk is a
// start's first lists (or a Replace). Namespaces are not copied: the feed
// interns them.
type recordArena struct {
	strs pack.Strings
}

// service is v's name and record, cut from the arena.
func (a *recordArena) service(v *Service) (string, svcRecord) {
	var tmp [256]byte
	return a.strs.Copy(v.Name), svcRecord(a.strs.CopyBytes(appendService(tmp[:0], v)))
}

// nameArena is the arena a build cuts its names from: nil outside a rebuild,
// where each name is allocated alone.
func (b *builder) nameArena() *pack.Strings {
	if b.arena == nil {
		return nil
	}
	return &b.arena.names
}

// concat is the concatenation of parts, from the build's arena.
func (b *builder) concat(parts ...string) string { return b.nameArena().Concat(parts...) }

// reverseName is ReverseName(a), from the build's arena.
func (b *builder) reverseName(a netip.Addr) string {
	var buf [74]byte
	return b.nameArena().CopyBytes(appendReverseName(buf[:0], a))
}
