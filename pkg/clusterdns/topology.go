package clusterdns

import (
	"net"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
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
// (coredns#8388) read the same variants. askerOf places the client once
// per query; zone.go answers with its variant.

// WithTopology reads the client's topology from the EDNS0 local option of
// code (api topologyOptionCode), which node-local adds, and takes it off
// every query, so that it is never forwarded. 0 reads none.
func WithTopology(code uint16) Option { return func(h *Handler) { h.topoCode = code } }

// asker is what a query's answer needs to know of its client: its
// address (autopath by source) and the variant of the question's name it
// gets ("" but for a name with variants).
type asker struct {
	ip      netip.Addr
	variant store.Variant
}

// askerOf places the client of req, a query dnsmsg.Check accepts, once
// per query. It takes the topology option off req, so that it is never
// forwarded.
func (h *Handler) askerOf(src net.Addr, req *dns.Msg) asker {
	var a asker
	a.ip, _ = addrOf(src)
	var snap *store.Snapshot // set when the name has variants
	var lname string
	if z := h.zone(); z != nil && z.snap.Counts.Variants > 0 {
		lname = lowerFQDN(req.Question[0].Name)
		if z.snap.HasVariants(lname) {
			snap = z.snap
		}
	}
	c := clientTopology(req, h.topoCode, a.ip, snap)
	if snap != nil {
		a.variant = snap.VariantFor(lname, c.Zone, c.Node)
	}
	return a
}

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

// clientTopology is where the client of req is: the topology option of
// code (removed from req, malformed or not), else the node and topology
// zone of the pod with address ip (none without snap). Unknown parts are
// "".
func clientTopology(req *dns.Msg, code uint16, ip netip.Addr, snap *store.Snapshot) topology.Client {
	if code != 0 {
		if c, ok := topology.Take(req, code); ok && c.Known() {
			return c
		}
	}
	if snap == nil || !ip.IsValid() {
		return topology.Client{}
	}
	zone, node := snap.ClientTopology(ip)
	return topology.Client{Zone: zone, Node: node}
}

// addrOf is the IP address of a UDP or TCP peer.
func addrOf(a net.Addr) (netip.Addr, bool) {
	switch v := a.(type) {
	case *net.UDPAddr:
		ip, ok := netip.AddrFromSlice(v.IP)
		return ip.Unmap(), ok
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(v.IP)
		return ip.Unmap(), ok
	}
	return netip.Addr{}, false
}
