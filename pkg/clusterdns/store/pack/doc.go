// Package pack lays the store's records out in memory the collector
// never scans.
//
// It holds the packed nodes of a Snapshot (node.go), the drafts a build
// packs them from (draft.go), the chunk arenas that keep them and the
// names together (chunk.go) and the sharded copy-on-write map that
// indexes them (shard.go). The store's rules say what a Service
// contributes; this package says only how it is laid out.
//
// It is the one package of the store that imports unsafe. Each use is a
// pattern the unsafe package documents: a *[8]uint32 read as the Node of
// the same layout, a *uint32 read as a *byte, unsafe.Add within one
// allocation, and unsafe.String over bytes that never change. go test
// -race turns checkptr on, which checks them (.ci/run's race stage).
//
// This package imports only the standard library.
package pack
