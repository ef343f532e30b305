// Package topology carries a DNS client's Kubernetes topology (its topology
// zone and node) and chooses endpoints by it.
//
// "Zone" alone means a DNS zone elsewhere in this code base; here a
// topology zone is the value of a Node's topology.kubernetes.io/zone label.
//
// wire.go holds the two forms clients send. The first is the EDNS0 local
// option the node-local stage adds to every query it forwards to the
// cluster DNS (default code 65002, api topologyOptionCode). Its payload is the topology zone, one 0x00 byte and
// the node name. The cluster DNS takes it off (Take) before a query leaves
// the cluster, so the option never reaches an upstream outside it.
//
// The second is CoreDNS's zone-scoped name,
// <topology zone>.<pin|prefer>._zone.<svc>.<ns>.svc.<cluster zone>, which
// ParseScoped reads; the cluster DNS answers it.
//
// The package is pure: the standard library, miekg/dns and pkg/dnsmsg (for
// the EDNS0 size) only.
package topology
