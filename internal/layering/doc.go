// Package layering holds the test that keeps the import graph layered.
//
// The pure core (resolvconf, fqdn, policy, autopath, store,
// api/v1alpha1) imports only the standard library, internal/safefile and the
// core below it. It may also use the pure data-structure libraries the test
// names (store: immutable). internal/safefile does bounded non-blocking file
// reads and is itself standard library only. Nothing in pkg/ imports cmd/ or
// internal test helpers. Go already rejects cycles; this test rejects a core
// package growing an adapter's dependency (client-go, gRPC, a DNS library, a
// logger).
//
// Only internal/unsafeptr imports unsafe (tests aside). It is standard
// library only; store/internal/pack, clusterdns and udpbatch use its
// functions.
package layering
