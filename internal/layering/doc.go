// Package layering holds the test that keeps the import graph layered: the
// pure core (resolvconf, fqdn, policy, autopath, dnsserver/store,
// api/v1alpha1) imports only the standard library, internal/safefile (bounded
// non-blocking file reads, itself standard library only) and the core below it,
// and nothing in pkg/ imports cmd/ or internal test helpers. Go already
// rejects cycles; this test rejects a core package growing an adapter's
// dependency (client-go, gRPC, a DNS library, a logger).
package layering
