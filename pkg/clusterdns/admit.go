package clusterdns

import (
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/unsafeptr"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// admit fills q, a zero query, with the query of req asked from src:
// checked once (dnsmsg.Check), its client placed once, its reply cache key
// made. Its name is lowercased here when the client's answer depends on it
// (a name with variants, autopath by source), else by the answer stage: a
// reply cache hit needs none. The topology option is taken off req here:
// it is never forwarded.
func (h *Handler) admit(q *query, src net.Addr, req *dns.Msg) {
	_, q.tcp = src.(*net.TCPAddr)
	q.h, q.req, q.client.ip, q.z = h, req, dnsmsg.ClientAddr(src), h.zone()
	q.opt, q.rcode = dnsmsg.Check(req)
	if q.rcode != dns.RcodeSuccess {
		return
	}
	q.place()
	if h.ap != nil && h.ap.sourceIP {
		q.client.ns, q.bySource = h.ap.firstStep(q.z, q.client.ip, q.lower())
	}
	if !req.Response && !q.bySource {
		// Answers that depend on the source are never cached.
		q.key, q.cacheable = q.cacheKey(), true
	}
}

// lower is the question's name in lowercase with its dot, made on first
// use: once per query. On the wire path admitWire or answerWire makes it.
func (q *query) lower() string {
	if q.lname == "" {
		q.lname = lowerFQDN(q.req.Question[0].Name)
	}
	return q.lname
}

// place places the client of q once: its topology option (removed from
// the message, malformed or not), else the node and zone of the pod at its
// address, when the answer may depend on them. Unknown parts are "".
func (q *query) place() {
	h := q.h
	if cs := h.cset; cs != nil && inZone(q.lower(), cs.name) {
		q.placeClusterset(cs)
		return
	}
	var snap *store.Snapshot // set when the answer may have variants
	var named, expands bool
	if z := q.z; z != nil && z.snap.Counts.Variants > 0 {
		named = z.snap.HasVariants(q.lower())
		expands = h.ap != nil && (h.ap.sourceIP || inZone(q.lname, autopath.Suffix))
		if named || expands {
			snap = z.snap
		}
	}
	c := clientTopology(q.req, h.topoCode, q.client.ip, snap)
	if named {
		q.client.variant = snap.VariantFor(q.lname, c.Zone, c.Node)
	}
	if expands {
		q.client.topo = c
	}
}

// placeClusterset is place for a name of the clusterset zone: the
// client's variant of an import with a trafficDistribution, the client
// placed by the cluster's records: its topology zone, then this cluster
// (WithClusterset).
func (q *query) placeClusterset(cs *clusterset) {
	z := cs.zone()
	if z == nil || z.snap.Counts.Variants == 0 || !z.snap.HasVariants(q.lname) {
		return
	}
	var cluster *store.Snapshot
	if q.z != nil {
		cluster = q.z.snap
	}
	c := clientTopology(q.req, q.h.topoCode, q.client.ip, cluster)
	q.client.variant = z.snap.VariantFor(q.lname, cs.local(), c.Zone)
}

// clientTopology is where the client of req is: the option of code
// (removed, malformed or not), else the node and zone of the pod at ip
// (none without snap). Unknown parts are "".
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

// cacheKey is the reply cache key of a query dnsmsg.Check accepts: the
// question as asked, the reply size Finish truncates to (dnsmsg.ReplySize)
// and, for a name with variants, the client's variant.
func (q *query) cacheKey() replycache.Key {
	qn := q.req.Question[0]
	k := replycache.Key{Name: qn.Name, Qtype: qn.Qtype, Qclass: qn.Qclass, Limit: uint16(dnsmsg.ReplySize(q.opt, q.tcp))}
	if q.opt != nil {
		k.EDNS, k.DO = true, q.opt.Do()
	}
	return variantKey(k, q.client.variant)
}

// variantKey is the reply cache key of a reply made for variant v of the
// question of k: the name and the variant. A variant holds a 0x00 byte
// and ends in an alphanumeric byte; a question name as either path keys
// it ends in '.', so the two never meet.
func variantKey(k replycache.Key, v store.Variant) replycache.Key {
	if v != "" {
		k.Name += string(v)
	}
	return k
}

// admitWire fills q, a zero query, with the query of a UDP query read from
// its wire form msg: the query admit makes of it unpacked. It is false when ServeDNS
// must take it: a query dnsmsg.ParseQuery leaves to miekg/dns, any query
// while autopath answers by source, a name whose answer depends on the
// client. The name as asked (the reply cache's key), then the lowercase
// name (lowerWire), are written in dst, which the reply overwrites only
// once they are used: on the stack they would escape to the heap through
// the cache's map.
func (h *Handler) admitWire(q *query, dst, msg []byte) bool {
	if h.ap != nil && h.ap.sourceIP {
		return false
	}
	q.h, q.rcode, q.z = h, dns.RcodeSuccess, h.zone()
	if !q.wire.Parse(msg) {
		return false
	}
	q.asWire = dnsmsg.AppendName(dst[:0], q.wire.Name, false)
	q.key = replycache.Key{Name: borrowString(q.asWire), Qtype: q.wire.Qtype, Qclass: q.wire.Qclass,
		EDNS: q.wire.EDNS, DO: q.wire.DO, Limit: uint16(q.wire.ReplySize())}
	q.cacheable = true
	// The answer depends on the client's source: ServeDNS's.
	return q.z == nil || q.z.snap.Counts.Variants == 0 || !q.z.snap.HasVariants(q.lowerWire())
}

// lowerWire is lower on the wire path: the name written after the name as
// asked, in the same buffer.
func (q *query) lowerWire() string {
	if q.lname == "" {
		n := len(q.asWire)
		q.lname = borrowString(dnsmsg.AppendName(q.asWire[n:n], q.wire.Name, true))
	}
	return q.lname
}

// borrowString is b as a string without a copy, for a lookup or a parse
// that keeps no part of it while b is not written.
func borrowString(b []byte) string { return unsafeptr.String(b) }

// lowerFQDN returns name in lowercase with a trailing dot, without
// allocating when it already is.
func lowerFQDN(name string) string {
	clean := len(name) > 0 && name[len(name)-1] == '.'
	if clean {
		for i := 0; i < len(name); i++ {
			if c := name[i]; 'A' <= c && c <= 'Z' {
				clean = false
				break
			}
		}
	}
	if clean {
		return name
	}
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}
