// Package pack lays the store's records out in memory the collector
// never scans.
//
// It holds the packed nodes of a Snapshot (node.go), the drafts a build
// packs them from (draft.go), the chunk arenas that keep them and the
// names together (chunk.go) and the sharded copy-on-write map that
// indexes them (shard.go). The store's rules say what a Service
// contributes; this package says only how it is laid out.
//
// Its memory views come from internal/unsafeptr, which holds the
// product's only unsafe: a Node read over its chunk's first words, the
// records after it, and strings sharing bytes that never change. go test
// -race turns checkptr on, which checks them (.ci/run's race stage).
//
// A nil *Strings allocates each string alone, so a build outside a
// rebuild cuts its names the same way.
//
// It is internal to the store: readers outside it see Nodes through
// pkg/store's aliases and methods, never the layout. It imports only the
// standard library and internal/unsafeptr.
package pack
