package clusterdns

import (
	"context"
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
// (coredns#8388) read the same variants.

// WithTopology reads the client's topology from the EDNS0 local option of
// code (api topologyOptionCode), which node-local adds, and takes it off
// every query, so that it is never forwarded. 0 reads none.
func WithTopology(code uint16) Option { return func(h *Handler) { h.topoCode = code } }

// variant takes the topology option off req and returns the variant of
// its question the client gets: "" but for a name with variants.
func (h *Handler) variant(src net.Addr, req *dns.Msg) store.Variant {
	z := h.zone()
	if z == nil || z.snap.Counts.Variants == 0 {
		h.takeTopology(req)
		return ""
	}
	lname := lowerFQDN(req.Question[0].Name)
	if !z.snap.HasVariants(lname) {
		h.takeTopology(req)
		return ""
	}
	c := clientTopology(req, h.topoCode, src, z.snap)
	return z.snap.VariantFor(lname, c.Zone, c.Node)
}

// takeTopology removes the topology option from req.
func (h *Handler) takeTopology(req *dns.Msg) {
	if h.topoCode != 0 {
		topology.Take(req, h.topoCode)
	}
}

type variantCtxKey struct{}

// withVariant is ctx carrying the variant of the question's name that
// the reply is made for (and cached under).
func withVariant(ctx context.Context, v store.Variant) context.Context {
	if v == "" {
		return ctx
	}
	return context.WithValue(ctx, variantCtxKey{}, v)
}

// lookup is the node of lname: the variant of ctx for the question's
// name (depth 0) when it has it, else the name's own. A CNAME's target is
// answered with its own node: the reply is cached under the question.
func (z *zone) lookup(ctx context.Context, lname string, depth int) (*store.Node, bool) {
	if depth == 0 {
		if v, _ := ctx.Value(variantCtxKey{}).(store.Variant); v != "" {
			if n, ok := z.snap.LookupVariant(lname, v); ok {
				return n, true
			}
		}
	}
	return z.snap.Lookup(lname)
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
// zone of the pod with src's address. Unknown parts are "".
func clientTopology(req *dns.Msg, code uint16, src net.Addr, snap *store.Snapshot) topology.Client {
	if code != 0 {
		if c, ok := topology.Take(req, code); ok && c.Known() {
			return c
		}
	}
	if snap == nil {
		return topology.Client{}
	}
	ip, ok := addrOf(src)
	if !ok {
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

// zoneScopedAnswer answers lname when it is a zone-scoped name of a
// Service with topology zone variants, as CoreDNS does: A, AAAA and SRV
// (with the targets' addresses) of the topology zone's ready endpoints;
// with prefer, of every endpoint when the topology zone has none; NODATA
// for other types and for a pin with none. ok is false for any other
// name (the caller answers NXDOMAIN): our store keeps topology zones only
// for headless Services with a traffic distribution.
func (z *zone) zoneScopedAnswer(qtype uint16, owner, lname string) (Result, bool) {
	if z.snap.Counts.Variants == 0 {
		return Result{}, false
	}
	zs, ok := topology.ParseScoped(lname, z.name)
	if !ok || !z.snap.HasVariants(zs.Base) {
		return Result{}, false
	}
	n, found := z.snap.LookupVariant(zs.Base, store.TopologyZoneVariant(zs.Zone))
	if !found && zs.Prefer {
		n, found = z.snap.Lookup(zs.Base)
	}
	nodata := Result{Rcode: dns.RcodeSuccess, Ns: z.negative(lname), Authoritative: true, deps: []string{zs.Base}}
	if !found {
		return nodata, true
	}
	var ans []dns.RR
	switch qtype {
	case dns.TypeA, dns.TypeAAAA, dns.TypeSRV:
		ans = z.records(owner, zs.Base, n, qtype)
	}
	if len(ans) == 0 {
		return nodata, true
	}
	r := Result{Rcode: dns.RcodeSuccess, Answer: clip(ans), Authoritative: true, deps: []string{zs.Base}}
	if qtype == dns.TypeSRV {
		r.Extra = clip(z.srvExtra(n.SRV()))
		for _, s := range n.SRV() {
			r.deps = append(r.deps, s.Target)
		}
	}
	return r, true
}
