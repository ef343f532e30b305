// Package layering holds the test that keeps the import graph layered: the
// pure core (resolvconf, fqdn, policy, autopath, clusterdns/store,
// api/v1alpha1) imports only the standard library, internal/safefile (bounded
// non-blocking file reads, itself standard library only), the core below it
// and the pure data-structure libraries the test names (store: immutable),
// and nothing in pkg/ imports cmd/ or internal test helpers. Go already
// rejects cycles; this test rejects a core package growing an adapter's
// dependency (client-go, gRPC, a DNS library, a logger).
package layering
