package clusterdns

import (
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// A headless Service with a traffic distribution answers each client its
// nearest ready endpoints (store.Snapshot.VariantFor, pkg/topology's rule).
// The client is placed by the topology option node-local adds (taken off
// the query before anything is forwarded, so it never leaves the
// cluster), else by its source address: the pod with that IP, its node
// and the node's topology zone label (pods verified watches them). A
// reply made for a variant is cached under the question and the variant,
// so one topology zone's answer is never served to another; a name
// without variants keeps one entry. CoreDNS's zone-scoped names
// (coredns#8388) read the same variants. askerOf (serve.go) places the
// client once per query; zone.go answers with its variant.

// WithTopology reads the client's topology from the EDNS0 local option of
// code (api topologyOptionCode), which node-local adds, and takes it off
// every query, so that it is never forwarded. 0 reads none.
func WithTopology(code uint16) Option { return func(h *Handler) { h.topoCode = code } }

// perClient reports whether the answer to the wire name (dnsmsg's form)
// depends on the client: AnswerWire, which does not know the client,
// leaves such a query to ServeDNS.
func perClient(z *zone, wireName []byte) bool {
	if z.snap.Counts.Variants == 0 {
		return false
	}
	var buf [256]byte
	return z.snap.HasVariants(borrowString(dnsmsg.AppendName(buf[:0], wireName, true)))
}
